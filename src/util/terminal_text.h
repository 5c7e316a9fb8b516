#pragma once
// Text from outside (owner label values, process names, an API's answers) made safe for a
// terminal, and cut to a column width. Shared by `gpumeter snapshot`'s tables and `gpumeter
// report`'s table, so both show a hostile name the same way.

#include <cstddef>
#include <string>
#include <string_view>

namespace gpumeter {

// Terminal columns of UTF-8 text: one per code point (names here are not CJK).
std::size_t text_width(std::string_view s);

// `s` with every character that could split a line, move the cursor, start an escape sequence
// or reorder what follows replaced by '?': C0 and C1 control characters and DEL (newline, tab,
// ESC, CSI), Unicode's bidirectional controls (U+061C, U+200E, U+200F, U+202A..U+202E,
// U+2066..U+2069), the line and paragraph separators U+2028 and U+2029, and bytes that are not
// UTF-8. Everything else is kept as it is.
std::string printable(std::string_view s);

// At most `max_chars` code points of UTF-8 text, with "…" in place of what was cut; never splits
// a multi-byte sequence.
std::string truncate_utf8(std::string_view s, std::size_t max_chars);

}  // namespace gpumeter
