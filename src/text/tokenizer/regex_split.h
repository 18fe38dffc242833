// The pre-tokenizer regexes of the supported vocabularies, written out by
// hand over code points: std::regex has no \p{..} classes, and the results
// must equal Oniguruma's (leftmost match, alternatives tried in order, greedy
// quantifiers that backtrack) as HF `tokenizers` runs them.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace akunu::text::tok {

class SplitRegex {
public:
    virtual ~SplitRegex() = default;
    // Length of the match starting at s[i] (0: none).
    virtual size_t match_at(const std::u32string& s, size_t i) const = 0;
    // Non-overlapping matches, searched left to right (onig find_iter).
    std::vector<std::pair<size_t, size_t>> find_all(const std::u32string& s) const;
};

// The regex `pattern` (a tokenizer.json Split pattern or a GGUF pre-tokenizer's), or
// nullptr when it is not one of the known ones.
std::shared_ptr<const SplitRegex> known_regex(const std::string& pattern);

// GPT-2's pattern as ByteLevel's use_regex runs it (with the trailing \s+).
extern const char* const kGpt2Regex;
extern const char* const kGpt2RegexNoTrailing;
extern const char* const kLlama3Regex;
extern const char* const kQwen2Regex;
extern const char* const kDigitRegex;
// OpenAI's o200k pattern as tokenizer.json files hold it, and llama.cpp's rewrite of it
// for GGUF "gpt-4o" vocabularies (which differs on letters outside ASCII and on marks).
extern const char* const kO200kRegex;
extern const char* const kGpt4oRegex;

}  // namespace akunu::text::tok
