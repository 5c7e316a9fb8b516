// The table and CSV formats with names a GPU user chose: spreadsheet formulas stay text in CSV,
// and control characters, bidi overrides and very long names cannot break the table's rows.
#include <gtest/gtest.h>

#include <sstream>

#include "report/format.h"

namespace gpumeter::report {
namespace {

Row owner(std::string project, double hours) {
  Row r;
  r.key = {std::move(project)};
  r.usage.allocated_seconds = hours * 3600;
  r.usage.busy_seconds = hours * 1800;
  r.cost.allocation = hours * 2;
  return r;
}

Report report_of(std::vector<Row> rows, bool priced = false) {
  Report r;
  r.url = "http://prom:9090";
  r.backend = "Prometheus 2.42.0";
  r.from = 0;
  r.to = 3600;
  r.by = {"project"};
  r.priced = priced;
  if (priced) r.currency = "EUR";
  for (const auto& row : rows) {
    r.total.usage += row.usage;
    r.total.cost += row.cost;
  }
  r.rows = std::move(rows);
  return r;
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

// The first cell of each CSV data row, as written.
std::vector<std::string> first_cells(const std::string& csv) {
  std::vector<std::string> out;
  auto all = lines(csv);
  for (std::size_t i = 1; i < all.size(); ++i) out.push_back(all[i].substr(0, all[i].find(",owner,")));
  return out;
}

TEST(CsvFormat, FormulaLikeNamesGetAQuoteAndStayText) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"=cmd|' /C calc'!A0", "'=cmd|' /C calc'!A0"},
      {"+SUM(1+1)*cmd|x", "'+SUM(1+1)*cmd|x"},
      {"-2+3+cmd|x", "'-2+3+cmd|x"},
      {"@SUM(1+1)", "'@SUM(1+1)"},
      {"\t=1+1", "'\t=1+1"},
      {"\r=1+1", "\"'\r=1+1\""},  // quoted as well: it holds a CR
      {"=HYPERLINK(\"x\",\"y\")", "\"'=HYPERLINK(\"\"x\"\",\"\"y\"\")\""},
      {"team-a", "team-a"},  // a dash inside is nothing
      {"-1", "-1"},          // a whole number is not a formula
      {"-1.5e3", "-1.5e3"},
  };
  std::vector<Row> rows;
  std::vector<std::string> want;
  for (const auto& [name, written] : cases) {
    rows.push_back(owner(name, 1));
    want.push_back(written);
  }
  EXPECT_EQ(first_cells(render_csv(report_of(rows))), want);
}

TEST(CsvFormat, TheReportsOwnNegativeNumbersStayNumbers) {
  Row r = owner("team-a", 1);
  r.cost.idle = -0.5;  // a spread can leave a tiny negative on a row
  const std::string csv = render_csv(report_of({r}, true));
  const auto row = lines(csv).at(1);
  EXPECT_NE(row.find(",-0.5,"), std::string::npos) << row;
  EXPECT_EQ(row.find('\''), std::string::npos) << row;
}

TEST(TableFormat, ControlCharactersCannotSplitOrReorderARow) {
  const Report r = report_of({owner("line1\nline2,\"quoted\";x", 3), owner("tab\there", 2),
                              owner("rlo\xE2\x80\xAE"
                                    "dcba",
                                    1),
                              owner("\x1b[2Jclear", 0.5)});
  const std::string table = render_table(r, false);
  EXPECT_NE(table.find("line1?line2,\"quoted\";x"), std::string::npos) << table;
  EXPECT_NE(table.find("tab?here"), std::string::npos) << table;
  EXPECT_NE(table.find("rlo?dcba"), std::string::npos) << table;
  EXPECT_NE(table.find("?[2Jclear"), std::string::npos) << table;
  EXPECT_EQ(table.find('\t'), std::string::npos);
  EXPECT_EQ(table.find('\x1b'), std::string::npos);
  EXPECT_EQ(table.find("\xE2\x80\xAE"), std::string::npos);
  EXPECT_EQ(table.find("\nline2"), std::string::npos);
}

TEST(TableFormat, AVeryLongNameIsCutNotPaddedIntoEveryRow) {
  const std::string huge(10240, 'x');
  const Report r = report_of({owner(huge, 2), owner("team-a", 1)});
  const std::string table = render_table(r, false);
  for (const auto& l : lines(table)) EXPECT_LT(l.size(), 400u) << l.substr(0, 80);
  EXPECT_NE(table.find(std::string(47, 'x') + "\xE2\x80\xA6"), std::string::npos);
  EXPECT_EQ(table.find(std::string(49, 'x')), std::string::npos);
  // CSV and JSON keep the exact name.
  EXPECT_NE(render_csv(r).find(huge), std::string::npos);
  EXPECT_NE(render_json(r).find(huge), std::string::npos);
}

TEST(TableFormat, ColumnsAlignOnCodePointsNotBytes) {
  const Report r = report_of({owner("\xC3\xA9quipe", 2), owner("equipe", 1)});
  const auto all = lines(render_table(r, false));
  std::vector<std::size_t> ends;  // where the first number column ends, in code points
  for (const auto& l : all) {
    if (l.find("quipe") == std::string::npos) continue;
    const std::size_t bytes = l.find(".00") + 3;
    std::size_t cps = 0;
    for (std::size_t i = 0; i < bytes; ++i) cps += (static_cast<unsigned char>(l[i]) & 0xC0) != 0x80;
    ends.push_back(cps);
  }
  ASSERT_EQ(ends.size(), 2u);
  EXPECT_EQ(ends[0], ends[1]);
}

}  // namespace
}  // namespace gpumeter::report
