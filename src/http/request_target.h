#pragma once
// Request-target checks the HTTP library does not make: it decodes invalid percent-escapes
// leniently and passes control bytes through, which would let odd targets reach the handlers.

#include <string_view>

namespace gpumeter {

// True for an origin-form target ("/path?query") made only of visible ASCII, whose every '%' starts
// a two-digit hex escape, and whose path does not decode to a NUL or control byte.
bool valid_request_target(std::string_view target);

}  // namespace gpumeter
