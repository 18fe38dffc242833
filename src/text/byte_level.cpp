#include "text/byte_level.h"

#include <array>
#include <cstdint>

namespace akunu::text {
namespace {

// GPT-2's table: printable Latin-1 bytes stand for themselves; the other 68
// bytes map, in order, to U+0100 onwards.
struct Alphabet {
    std::array<uint32_t, 256> to_code{};
    std::array<int16_t, 324> to_byte{};  // code points below 0x144
    Alphabet() {
        to_byte.fill(-1);
        uint32_t next = 256;
        for (int b = 0; b < 256; ++b) {
            bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
            uint32_t code = printable ? uint32_t(b) : next++;
            to_code[b] = code;
            to_byte[code] = int16_t(b);
        }
    }
};

const Alphabet& alphabet() {
    static const Alphabet a;
    return a;
}

void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
        out += char(cp);
    } else {  // the alphabet stays below U+0800
        out += char(0xC0 | (cp >> 6));
        out += char(0x80 | (cp & 0x3F));
    }
}

}  // namespace

std::string bytes_to_byte_level(std::string_view bytes) {
    const Alphabet& a = alphabet();
    std::string out;
    out.reserve(bytes.size() * 2);
    for (unsigned char b : bytes) append_utf8(out, a.to_code[b]);
    return out;
}

bool byte_level_to_bytes(std::string_view s, std::string& out) {
    const Alphabet& a = alphabet();
    out.clear();
    out.reserve(s.size());
    for (size_t i = 0; i < s.size();) {
        unsigned char c = (unsigned char)s[i];
        uint32_t cp;
        if (c < 0x80) {
            cp = c;
            i += 1;
        } else if ((c & 0xE0) == 0xC0 && i + 1 < s.size() && ((unsigned char)s[i + 1] & 0xC0) == 0x80) {
            cp = (uint32_t(c & 0x1F) << 6) | ((unsigned char)s[i + 1] & 0x3F);
            i += 2;
        } else {
            return false;
        }
        if (cp >= a.to_byte.size() || a.to_byte[cp] < 0) return false;
        out += char(a.to_byte[cp]);
    }
    return true;
}

}  // namespace akunu::text
