#pragma once
// Output formats of `gpumeter report`. Each is a pure function of the Report.

#include <string>

#include "report/report_model.h"

namespace gpumeter::report {

std::string render_table(const Report& report, bool color);
std::string render_csv(const Report& report);
std::string render_json(const Report& report);
// One self-contained HTML page (no external resources) with inline SVG charts.
std::string render_html(const Report& report);

}  // namespace gpumeter::report
