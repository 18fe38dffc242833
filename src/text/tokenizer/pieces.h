// Text on its way through the tokenizer pipeline: HF `tokenizers`'
// NormalizedString / PreTokenizedString reduced to what ids depend on (code
// points, and the original offset where a piece starts, which Metaspace's
// "first" scheme reads).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace akunu::text::tok {

struct NText {
    std::u32string cps;
    std::vector<uint32_t> orig;  // original byte offset of each code point
    uint32_t shift = 0;          // original offset of the piece's start

    static NText from_utf8(const std::string& s, uint32_t base);
    bool empty() const { return cps.empty(); }
    NText slice(size_t a, size_t b) const;
    std::string utf8() const;
    // Replaces the code points; `orig` follows `origin` (index of the source
    // code point of each new one).
    void assign(std::u32string cps2, const std::vector<size_t>& origin);
    void prepend(const std::u32string& s);
};

// A split of the input: text still to tokenize, or an added token's id.
struct Piece {
    NText text;
    int32_t token = -1;
};

// Match events covering a text (HF Pattern::find_matches): contiguous spans
// in code points, each a match of the pattern or not.
struct Span {
    size_t start, end;
    bool match;
};

enum class SplitBehavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

// Spans of matches given as [start, end) pairs in order, gaps between them.
std::vector<Span> spans_from_matches(size_t n, const std::vector<std::pair<size_t, size_t>>& matches);
// Every code point for which pred holds is a one-character match.
std::vector<Span> spans_from_chars(const std::u32string& s, const std::function<bool(char32_t)>& pred);
// HF NormalizedString::split: the pieces of `t` for these spans and behavior (empty ones dropped later).
std::vector<NText> split_spans(const NText& t, std::vector<Span> spans, SplitBehavior behavior, bool invert);

// HF PreTokenizedString::split: replaces each text piece by what fn makes of
// it; added-token pieces stay; empty pieces are dropped.
void split_pieces(std::vector<Piece>& pieces, const std::function<std::vector<NText>(const NText&)>& fn);

}  // namespace akunu::text::tok
