#include "text/tokenizer/unicode.h"

#include <algorithm>
#include <array>

#include "text/tokenizer/unicode_tables.h"

namespace akunu::text::unicode {
namespace {

struct AsciiFlags {
    std::array<uint16_t, 128> f{};
    AsciiFlags();
};

uint16_t lookup_flags(char32_t cp) {
    // the last range starting at or before cp
    const FlagRange* end = kFlagRanges + kFlagRangeCount;
    const FlagRange* it = std::upper_bound(kFlagRanges, end, uint32_t(cp),
                                           [](uint32_t v, const FlagRange& r) { return v < r.start; });
    return it == kFlagRanges ? 0 : (it - 1)->flags;
}

AsciiFlags::AsciiFlags() {
    for (char32_t c = 0; c < 128; ++c) f[c] = lookup_flags(c);
}

const CodeMap* find_map(const CodeMap* table, size_t n, char32_t cp) {
    const CodeMap* end = table + n;
    const CodeMap* it = std::lower_bound(table, end, uint32_t(cp), [](const CodeMap& m, uint32_t v) { return m.cp < v; });
    return it != end && it->cp == cp ? it : nullptr;
}

uint8_t ccc(char32_t cp) {
    if (cp < 0x300) return 0;
    const CombiningRange* end = kCombiningClass + kCombiningClassCount;
    const CombiningRange* it = std::upper_bound(kCombiningClass, end, uint32_t(cp),
                                                [](uint32_t v, const CombiningRange& r) { return v < r.lo; });
    if (it == kCombiningClass) return 0;
    --it;
    return cp <= it->hi ? it->ccc : 0;
}

// Hangul syllables decompose and compose by arithmetic (Unicode 3.12).
constexpr char32_t SBase = 0xAC00, LBase = 0x1100, VBase = 0x1161, TBase = 0x11A7;
constexpr char32_t LCount = 19, VCount = 21, TCount = 28, NCount = VCount * TCount, SCount = LCount * NCount;

void append_decomposed(char32_t cp, std::u32string& out) {
    if (cp >= SBase && cp < SBase + SCount) {
        char32_t s = cp - SBase;
        out += char32_t(LBase + s / NCount);
        out += char32_t(VBase + (s % NCount) / TCount);
        if (s % TCount) out += char32_t(TBase + s % TCount);
        return;
    }
    if (const CodeMap* m = find_map(kDecomposition, kDecompositionCount, cp)) {
        out.append(kMapPool + m->offset, m->len);
        return;
    }
    out += cp;
}

char32_t compose_pair(char32_t a, char32_t b) {
    if (a >= LBase && a < LBase + LCount && b >= VBase && b < VBase + VCount)
        return SBase + ((a - LBase) * VCount + (b - VBase)) * TCount;
    if (a >= SBase && a < SBase + SCount && (a - SBase) % TCount == 0 && b > TBase && b < TBase + TCount)
        return a + (b - TBase);
    const Composition* end = kCompositions + kCompositionCount;
    const Composition* it = std::lower_bound(kCompositions, end, std::make_pair(uint32_t(a), uint32_t(b)),
                                             [](const Composition& c, const std::pair<uint32_t, uint32_t>& v) {
                                                 return c.first != v.first ? c.first < v.first : c.second < v.second;
                                             });
    return it != end && it->first == a && it->second == b ? char32_t(it->composite) : 0;
}

}  // namespace

uint16_t flags(char32_t cp) {
    static const AsciiFlags ascii;
    return cp < 128 ? ascii.f[cp] : lookup_flags(cp);
}

void append_lowercase(char32_t cp, std::u32string& out) {
    if (cp < 128) {
        out += (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp;
        return;
    }
    if (const CodeMap* m = find_map(kLowercase, kLowercaseCount, cp)) out.append(kMapPool + m->offset, m->len);
    else out += cp;
}

std::u32string decompose(char32_t cp) {
    std::u32string out;
    append_decomposed(cp, out);
    return out;
}

std::u32string nfd(const std::u32string& s) {
    std::u32string out;
    out.reserve(s.size());
    for (char32_t c : s) append_decomposed(c, out);
    // canonical ordering: stable sort of each run of non-starters by class
    for (size_t i = 0; i < out.size();) {
        if (ccc(out[i]) == 0) {
            ++i;
            continue;
        }
        size_t j = i;
        while (j < out.size() && ccc(out[j]) != 0) ++j;
        std::stable_sort(out.begin() + i, out.begin() + j, [](char32_t a, char32_t b) { return ccc(a) < ccc(b); });
        i = j;
    }
    return out;
}

std::u32string nfc(const std::u32string& s) {
    std::u32string d = nfd(s);
    std::u32string out;
    out.reserve(d.size());
    size_t starter = std::u32string::npos;  // index in out of the last starter
    int last_ccc = -1;                      // class of the last character appended after it
    for (char32_t c : d) {
        int cc = ccc(c);
        if (starter != std::u32string::npos) {
            bool blocked = last_ccc != -1 && (last_ccc == 0 || last_ccc >= cc);
            if (!blocked) {
                if (char32_t comp = compose_pair(out[starter], c)) {
                    out[starter] = comp;
                    continue;
                }
            }
        }
        if (cc == 0) {
            starter = out.size();
            last_ccc = -1;
        } else {
            last_ccc = cc;
        }
        out += c;
    }
    return out;
}

int utf8_lead(unsigned char c, unsigned char& lo, unsigned char& hi) {
    lo = 0x80;
    hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) return 2;
    if (c >= 0xE0 && c <= 0xEF) {
        if (c == 0xE0) lo = 0xA0;  // no overlongs
        if (c == 0xED) hi = 0x9F;  // no surrogates
        return 3;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        if (c == 0xF0) lo = 0x90;  // no overlongs
        if (c == 0xF4) hi = 0x8F;  // nothing past U+10FFFF
        return 4;
    }
    return 0;
}

bool valid_utf8(std::string_view s) {
    size_t i = 0, n = s.size();
    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x80) {
            ++i;
            continue;
        }
        unsigned char lo, hi;
        const int len = utf8_lead(c, lo, hi);
        if (len == 0) return false;
        if (n - i < size_t(len)) return false;
        unsigned char c1 = (unsigned char)s[i + 1];
        if (c1 < lo || c1 > hi) return false;
        for (int k = 2; k < len; ++k)
            if (((unsigned char)s[i + k] & 0xC0) != 0x80) return false;
        i += len;
    }
    return true;
}

std::u32string decode_utf8(std::string_view s) {
    std::u32string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size();) {
        unsigned char c = (unsigned char)s[i];
        char32_t cp;
        int len;
        if (c < 0x80) cp = c, len = 1;
        else if (c < 0xE0) cp = c & 0x1F, len = 2;
        else if (c < 0xF0) cp = c & 0x0F, len = 3;
        else cp = c & 0x07, len = 4;
        for (int k = 1; k < len && i + k < s.size(); ++k) cp = (cp << 6) | ((unsigned char)s[i + k] & 0x3F);
        out += cp;
        i += len;
    }
    return out;
}

void append_utf8(std::string& out, char32_t cp) {
    if (cp < 0x80) {
        out += char(cp);
    } else if (cp < 0x800) {
        out += char(0xC0 | (cp >> 6));
        out += char(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out += char(0xE0 | (cp >> 12));
        out += char(0x80 | ((cp >> 6) & 0x3F));
        out += char(0x80 | (cp & 0x3F));
    } else {
        out += char(0xF0 | (cp >> 18));
        out += char(0x80 | ((cp >> 12) & 0x3F));
        out += char(0x80 | ((cp >> 6) & 0x3F));
        out += char(0x80 | (cp & 0x3F));
    }
}

std::string encode_utf8(const std::u32string& s) {
    std::string out;
    out.reserve(s.size());
    for (char32_t c : s) append_utf8(out, c);
    return out;
}

std::string utf8_lossy(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    const char* fffd = "\xEF\xBF\xBD";
    size_t i = 0, n = s.size();
    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x80) {
            out += char(c);
            ++i;
            continue;
        }
        unsigned char lo, hi;
        const int len = utf8_lead(c, lo, hi);
        if (len == 0) {
            out += fffd;
            ++i;
            continue;
        }
        // the longest valid prefix of this sequence is one maximal subpart
        size_t k = 1;
        if (i + 1 < n && (unsigned char)s[i + 1] >= lo && (unsigned char)s[i + 1] <= hi) {
            k = 2;
            while (k < size_t(len) && i + k < n && ((unsigned char)s[i + k] & 0xC0) == 0x80) ++k;
        }
        if (k == size_t(len)) out.append(s.data() + i, k);
        else out += fffd;
        i += k;
    }
    return out;
}

}  // namespace akunu::text::unicode
