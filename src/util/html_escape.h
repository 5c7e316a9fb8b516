#pragma once
// HTML escaping shared by the agent's landing page and the report's HTML page.

#include <string>
#include <string_view>

namespace gpumeter {

// Appends `s` with &, <, >, " and ' escaped, safe in element text and quoted attributes.
void append_html_escaped(std::string& out, std::string_view s);

}  // namespace gpumeter
