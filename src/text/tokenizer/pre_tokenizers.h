// Pre-tokenizers of HF `tokenizers` (those GGUF vocabularies and the
// supported tokenizer.json files use), with the same meaning.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "text/tokenizer/pieces.h"
#include "text/tokenizer/regex_split.h"

namespace akunu::text::tok {

class PreTokenizer {
public:
    virtual ~PreTokenizer() = default;
    virtual void pre_tokenize(std::vector<Piece>& pieces) const = 0;
};
using PreTokenizerPtr = std::shared_ptr<const PreTokenizer>;

enum class PrependScheme { Always, First, Never };

PreTokenizerPtr make_sequence_pre_tokenizer(std::vector<PreTokenizerPtr> steps);
PreTokenizerPtr make_byte_level_pre_tokenizer(bool add_prefix_space, bool use_regex);
PreTokenizerPtr make_regex_split(std::shared_ptr<const SplitRegex> re, SplitBehavior behavior, bool invert);
PreTokenizerPtr make_literal_split(const std::string& pattern, SplitBehavior behavior, bool invert);
PreTokenizerPtr make_metaspace(char32_t replacement, PrependScheme scheme, bool split);
PreTokenizerPtr make_bert_pre_tokenizer();
PreTokenizerPtr make_whitespace_split();
PreTokenizerPtr make_digits(bool individual);
PreTokenizerPtr make_punctuation(SplitBehavior behavior);

}  // namespace akunu::text::tok
