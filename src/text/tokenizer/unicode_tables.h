// The generated Unicode tables (unicode_tables.cpp, written by
// tools/make_unicode_tables.py); read through unicode.h.
#pragma once
#include <cstddef>
#include <cstdint>

namespace akunu::text::unicode {

struct FlagRange {
    uint32_t start;  // flags hold from here to the next entry's start
    uint16_t flags;
};
struct CodeMap {
    uint32_t cp;
    uint32_t offset;  // into kMapPool
    uint8_t len;
};
struct CombiningRange {
    uint32_t lo, hi;
    uint8_t ccc;
};
struct Composition {
    uint32_t first, second, composite;
};

extern const FlagRange kFlagRanges[];
extern const size_t kFlagRangeCount;
extern const char32_t kMapPool[];
extern const CodeMap kLowercase[];
extern const size_t kLowercaseCount;
extern const CodeMap kDecomposition[];  // full canonical decompositions, Hangul excluded
extern const size_t kDecompositionCount;
extern const CombiningRange kCombiningClass[];
extern const size_t kCombiningClassCount;
extern const Composition kCompositions[];  // primary composites, sorted by (first, second)
extern const size_t kCompositionCount;

}  // namespace akunu::text::unicode
