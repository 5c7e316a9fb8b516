#pragma once
// Output formats of `gpumeter report`. Each is a pure function of the Report.

#include <string>
#include <string_view>
#include <vector>

#include "report/report_model.h"

namespace gpumeter::report {

// The version of the JSON document's fields and the CSV's columns, one number for both: any
// field or column added, removed, renamed or changed in meaning is a new version. JSON carries it
// as "version", CSV as its last column, schema_version (docs/chargeback.md, "Formats").
inline constexpr int kReportSchemaVersion = 3;

std::string render_table(const Report& report, bool color);
std::string render_csv(const Report& report);
std::string render_json(const Report& report);
// One self-contained HTML page (no external resources) with inline SVG charts.
std::string render_html(const Report& report);

// FOCUS 1.2 (the FinOps Open Cost and Usage Specification) as CSV: a Usage row per row of a
// priced report grouped by kFocusDimensions; docs/focus.md.
std::string render_focus(const Report& report);
// Its header, in order: FOCUS columns, then the x_ columns.
const std::vector<std::string_view>& focus_columns();
// The grouping the FOCUS export needs: a row per GPU (and MIG profile) and owner.
inline const std::vector<std::string> kFocusDimensions = {"cluster", "node", "model",     "gpu", "mig_profile",
                                                          "project", "user", "namespace", "pod", "hpc_job"};

}  // namespace gpumeter::report
