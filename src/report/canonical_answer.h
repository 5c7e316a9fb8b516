#pragma once
// The query API's answer in the one shape stores write it in when all is well, read without a
// general JSON parser. nlohmann-json's SAX reader (prom_answer.cpp) took 0.9 s for one
// counter's values of 4000 GPUs over 30 days (92 MB), and a report through the query API reads
// several of those and thousands of small answers. simdjson, the fast library Debian has,
// ships no static library, and the release links all but libc statically. Everything this
// reader does not accept goes to the SAX reader, which also words the errors.

#include <optional>
#include <string_view>
#include <vector>

#include "report/prom_api.h"

namespace gpumeter::report {

// The series of a good vector or matrix answer, `__name__` left out, labels as the last
// duplicate gives them, samples as written (not yet checked for order); nullopt for anything
// else.
std::optional<std::vector<Series>> read_canonical_answer(std::string_view body);

}  // namespace gpumeter::report
