// The report's JSON and CSV against golden files, and their schema against
// tests/golden/report-schema.txt: the fields and columns of each variant under a version number.
// A change of fields or columns without a new kReportSchemaVersion fails, even when the golden
// files are rewritten (GPUMETER_UPDATE_GOLDEN=1); with a new version the manifest is rewritten too.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <fstream>
#include <set>
#include <sstream>

#include "golden.h"
#include "html_synthetic_report.h"
#include "report/format.h"

namespace gpumeter::report {
namespace {

using gpumeter::testing::check_golden;
using gpumeter::testing::golden_path;
using gpumeter::testing::read_golden;
using gpumeter::testing::update_golden;

Report small(bool priced) {
  testing::SyntheticOptions o;
  o.projects = 3;
  o.steps = 4;
  o.gpus = 4;
  o.priced = priced;
  return testing::synthetic_report(o);
}

// MIG slices and a forecast: the columns that appear only with them.
Report with_mig_and_forecast() {
  Report r = small(true);
  r.forecast_seconds = 7 * 86400;
  for (auto* row : {&r.rows.front(), &r.total}) {
    row->usage.mig_allocated_seconds = 3600;
    row->usage.mig_sm_active_seconds = 1800;
    row->mig_profiles = {"1g.10gb", "3g.40gb"};
  }
  for (auto& row : r.rows) row.forecast = RowForecast{2, 0.5, 336, 1234.5};
  r.total.forecast = RowForecast{4, 1, 672, 2469};
  return r;
}

// Sites in the pricing file: each row's energy at the facility and its carbon.
Report with_footprint() {
  Report r = small(true);
  r.footprint = true;
  for (auto* row : {&r.rows.front(), &r.total}) {
    row->usage.facility_energy_joules = row->usage.energy_joules * 1.25;
    row->usage.co2e_kg = row->usage.facility_energy_joules / 3.6e6 * 0.38;
  }
  return r;
}

// Grouped as the FOCUS export groups: GPU, MIG profile and owner; a MIG row, a project that
// starts like a formula and an idle row.
Report focus_report() {
  Report r = with_mig_and_forecast();
  r.by = kFocusDimensions;
  r.footprint = true;
  for (std::size_t i = 0; i < r.rows.size(); ++i) {
    Row& row = r.rows[i];
    row.usage.facility_energy_joules = row.usage.energy_joules * 1.25;
    row.usage.co2e_kg = row.usage.facility_energy_joules / 3.6e6 * 0.38;
    const std::string project = i == 1 ? "=HYPERLINK(\"x\")" : row.key.front();
    const std::string n = std::to_string(i);
    row.key = {"east", "node-" + n, "NVIDIA H100 80GB HBM3", "GPU-0000000" + n, i == 0 ? "3g.40gb" : "", project};
    for (const char* owner : {"user-", "ns-", "pod-", "job-"}) {
      row.key.push_back(row.idle || row.unattributed ? project : owner + n);
    }
  }
  return r;
}

void json_paths(const nlohmann::json& j, const std::string& at, std::set<std::string>& out) {
  if (j.is_object()) {
    for (const auto& [k, v] : j.items()) {
      out.insert(at + "." + k);
      json_paths(v, at + "." + k, out);
    }
  } else if (j.is_array()) {
    for (const auto& v : j) json_paths(v, at + "[]", out);
  }
}

// The schema as the manifest writes it: the version, each CSV variant's header, the JSON paths.
std::string describe(int version) {
  std::string out =
      "# The report's schema (tests/unit/report/schema_test.cpp): its version, each CSV variant's columns\n"
      "# and the JSON document's fields. Rewritten by GPUMETER_UPDATE_GOLDEN=1 only under a new version.\n";
  out += "version " + std::to_string(version) + "\n";
  const std::pair<const char*, Report> variants[] = {{"unpriced", small(false)},
                                                     {"priced", small(true)},
                                                     {"mig-forecast", with_mig_and_forecast()},
                                                     {"footprint", with_footprint()}};
  for (const auto& [name, report] : variants) {
    const std::string csv = render_csv(report);
    out += std::string("csv ") + name + ": " + csv.substr(0, csv.find('\n')) + "\n";
  }
  const std::string focus = render_focus(focus_report());
  out += "csv focus: " + focus.substr(0, focus.find('\n')) + "\n";
  std::set<std::string> paths;
  for (const auto& [name, report] : variants) json_paths(nlohmann::json::parse(render_json(report)), "", paths);
  for (const auto& p : paths) out += "json: " + p + "\n";
  return out;
}

int manifest_version(const std::string& manifest) {
  std::istringstream in(manifest);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("version ", 0) == 0) return std::stoi(line.substr(8));
  }
  return -1;
}

TEST(ReportSchema, ColumnsAndFieldsChangeOnlyWithTheVersion) {
  const std::string name = "report-schema.txt";
  const std::string now = describe(kReportSchemaVersion);
  auto manifest = read_golden(name);
  ASSERT_TRUE(manifest || update_golden())
      << "missing " << golden_path(name) << " (create it with GPUMETER_UPDATE_GOLDEN=1)";
  if (manifest && *manifest == now) return;
  const int was = manifest ? manifest_version(*manifest) : -1;
  ASSERT_NE(was, kReportSchemaVersion)
      << "the report's JSON fields or CSV columns changed, but kReportSchemaVersion (src/report/format.h) is "
         "still "
      << was << ": a change of columns is a new version. Now:\n"
      << now;
  ASSERT_TRUE(update_golden()) << "kReportSchemaVersion is " << kReportSchemaVersion << ", " << golden_path(name)
                               << " says " << was << "; rerun with GPUMETER_UPDATE_GOLDEN=1 and review the diff";
  check_golden(name, now);
}

TEST(ReportSchema, BothFormatsCarryTheVersion) {
  const Report r = small(true);
  EXPECT_EQ(nlohmann::json::parse(render_json(r)).at("version"), kReportSchemaVersion);
  std::istringstream csv(render_csv(r));
  std::string header, row;
  std::getline(csv, header);
  std::getline(csv, row);
  EXPECT_EQ(header.substr(header.rfind(',') + 1), "schema_version");
  EXPECT_EQ(row.substr(row.rfind(',') + 1), std::to_string(kReportSchemaVersion));
}

// FOCUS asks every dataset to reference its schema: docs/focus-metadata.json lists the export's
// columns in order, under the report's schema version.
TEST(ReportSchema, TheFocusMetadataMatchesTheExport) {
  std::ifstream in(std::string(GPUMETER_SOURCE_DIR) + "/docs/focus-metadata.json");
  ASSERT_TRUE(in);
  const auto meta = nlohmann::json::parse(in);
  EXPECT_EQ(meta.at("Schema").at("FocusVersion"), "1.2");
  EXPECT_EQ(meta.at("Schema").at("DataGeneratorVersion"), std::to_string(kReportSchemaVersion));
  std::vector<std::string> listed;
  for (const auto& c : meta.at("Schema").at("ColumnDefinition")) listed.push_back(c.at("ColumnName"));
  const std::vector<std::string> written(focus_columns().begin(), focus_columns().end());
  EXPECT_EQ(listed, written);
}

TEST(ReportGolden, Json) { check_golden("report.json", render_json(small(true))); }
TEST(ReportGolden, Csv) { check_golden("report.csv", render_csv(small(true))); }
TEST(ReportGolden, CsvUnpriced) { check_golden("report-unpriced.csv", render_csv(small(false))); }
TEST(ReportGolden, CsvMigAndForecast) { check_golden("report-mig-forecast.csv", render_csv(with_mig_and_forecast())); }
TEST(ReportGolden, CsvFootprint) { check_golden("report-footprint.csv", render_csv(with_footprint())); }
TEST(ReportGolden, Focus) { check_golden("report-focus.csv", render_focus(focus_report())); }

}  // namespace
}  // namespace gpumeter::report
