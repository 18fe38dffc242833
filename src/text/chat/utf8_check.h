// Strict UTF-8 validation of the text the C API hands to a chat template
// (Python strings cannot hold anything else): no overlong forms, no
// surrogates, nothing above U+10FFFF, no truncated sequences.
#pragma once
#include <string_view>

namespace akunu::text {

// Byte offset of the first invalid sequence in `s`, or -1 when it is valid UTF-8.
long utf8_error_offset(std::string_view s);
inline bool is_valid_utf8(std::string_view s) { return utf8_error_offset(s) < 0; }

}  // namespace akunu::text
