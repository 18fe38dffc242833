// Code point properties and UTF-8 handling as the reference tokenizer (HF
// `tokenizers`) sees them: regex classes, whitespace, BERT's control and
// punctuation tests, lowercase, NFD / NFC.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace akunu::text::unicode {

enum Flag : uint16_t {
    LETTER = 1 << 0,           // Oniguruma \p{L}
    NUMBER = 1 << 1,           // Oniguruma \p{N}
    SPACE = 1 << 2,            // Oniguruma \s
    WHITESPACE = 1 << 3,       // Rust char::is_whitespace (and regex \s)
    BERT_CONTROL = 1 << 4,     // dropped by BertNormalizer's clean_text
    BERT_PUNCT = 1 << 5,       // BertPreTokenizer / Punctuation
    NUMERIC = 1 << 6,          // Rust char::is_numeric (Digits)
    NONSPACING_MARK = 1 << 7,  // dropped by BertNormalizer's strip_accents after NFD
    MARK = 1 << 8,             // dropped by StripAccents
    WORD = 1 << 9,             // Rust regex \w
    UPPER_OR_CASELESS = 1 << 10,  // Oniguruma [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}] (o200k's first letter run)
    LOWER_OR_CASELESS = 1 << 11,  // Oniguruma [\p{Ll}\p{Lm}\p{Lo}\p{M}] (o200k's second letter run)
};

uint16_t flags(char32_t cp);
inline bool has(char32_t cp, uint16_t f) { return (flags(cp) & f) != 0; }

// Appends the lowercase of cp (Rust char::to_lowercase: one or more code points).
void append_lowercase(char32_t cp, std::u32string& out);
// NFD / NFC of a whole string.
std::u32string nfd(const std::u32string& s);
std::u32string nfc(const std::u32string& s);
// The canonical decomposition of one code point (itself when it has none).
std::u32string decompose(char32_t cp);

// UTF-8. `valid_utf8` is strict (no surrogates, overlongs or code points past U+10FFFF).
bool valid_utf8(std::string_view s);
// The length of the sequence lead byte `c` starts (2 to 4; 0: not a lead
// byte of well-formed UTF-8) and the range [lo, hi] its second byte must lie in.
int utf8_lead(unsigned char c, unsigned char& lo, unsigned char& hi);
// Decodes valid UTF-8.
std::u32string decode_utf8(std::string_view s);
void append_utf8(std::string& out, char32_t cp);
std::string encode_utf8(const std::u32string& s);
// Rust's String::from_utf8_lossy: each maximal invalid subsequence becomes one U+FFFD.
std::string utf8_lossy(std::string_view bytes);

}  // namespace akunu::text::unicode
