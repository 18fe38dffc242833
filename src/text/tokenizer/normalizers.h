// Normalizers of HF `tokenizers` (the ones GGUF vocabularies and the
// supported tokenizer.json files use), with the same meaning.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "text/tokenizer/pieces.h"

namespace akunu::text::tok {

class Normalizer {
public:
    virtual ~Normalizer() = default;
    virtual void normalize(NText& t) const = 0;
};
using NormalizerPtr = std::shared_ptr<const Normalizer>;

NormalizerPtr make_sequence_normalizer(std::vector<NormalizerPtr> steps);
NormalizerPtr make_prepend(const std::string& prefix);
NormalizerPtr make_replace(const std::string& pattern, const std::string& content);  // literal pattern
NormalizerPtr make_nfd();
NormalizerPtr make_nfc();
NormalizerPtr make_lowercase();
NormalizerPtr make_strip_accents();
NormalizerPtr make_strip(bool left, bool right);
NormalizerPtr make_bert_normalizer(bool clean_text, bool handle_chinese_chars, bool strip_accents, bool lowercase);

// Rust regex find_iter of a literal: leftmost, non-overlapping occurrences.
std::vector<std::pair<size_t, size_t>> find_literal(const std::u32string& s, const std::u32string& pat);

}  // namespace akunu::text::tok
