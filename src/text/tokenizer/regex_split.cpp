#include "text/tokenizer/regex_split.h"

#include "text/tokenizer/unicode.h"

namespace akunu::text::tok {

const char* const kGpt2Regex = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
const char* const kGpt2RegexNoTrailing = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";
const char* const kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kDigitRegex = R"(\p{N})";
const char* const kO200kRegex =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kGpt4oRegex =
    R"([^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+)"
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?)"
    R"(|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*)"
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?)"
    R"(|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

namespace {

namespace u = akunu::text::unicode;

bool is_l(char32_t c) { return u::has(c, u::LETTER); }
bool is_n(char32_t c) { return u::has(c, u::NUMBER); }
bool is_s(char32_t c) { return u::has(c, u::SPACE); }
bool is_other(char32_t c) { return !(u::flags(c) & (u::LETTER | u::NUMBER | u::SPACE)); }  // [^\s\p{L}\p{N}]
bool is_crlf(char32_t c) { return c == '\r' || c == '\n'; }

size_t run(const std::u32string& s, size_t i, bool (*pred)(char32_t)) {
    size_t j = i;
    while (j < s.size() && pred(s[j])) ++j;
    return j - i;
}

// How 's|'t|'re|'ve|'m|'ll|'d compares letters: as written; with ASCII case folded ('[sS]);
// or (?i:...), as Oniguruma folds case.
enum class Fold { None, Ascii, Unicode };

// The length of the contraction at s[i] (0: none).
size_t contraction(const std::u32string& s, size_t i, Fold fold) {
    if (i + 1 >= s.size() || s[i] != '\'') return 0;
    auto lower = [&](size_t k) -> char32_t {
        if (k >= s.size()) return 0;
        char32_t c = s[k];
        if (fold == Fold::None) return c;
        if (c >= 'A' && c <= 'Z') return c + 32;
        if (fold == Fold::Ascii) return c;
        if (c == 0x17F) return 's';   // LATIN SMALL LETTER LONG S folds to s
        if (c == 0x212A) return 'k';  // KELVIN SIGN folds to k (not in the pattern)
        return c;
    };
    char32_t a = lower(i + 1), b = lower(i + 2);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if ((a == 'r' || a == 'v') && b == 'e') return 3;
    if (a == 'l' && b == 'l') return 3;
    return 0;
}

// \s+(?!\S): a whitespace run, giving back its last character unless the run ends the text.
size_t space_not_before_text(const std::u32string& s, size_t i) {
    size_t k = run(s, i, is_s);
    if (k == 0) return 0;
    if (i + k == s.size()) return k;
    return k - 1;
}

// The patterns' whitespace alternatives, in their order: \s*[\r\n]+ (the
// whitespace run up to its last \r or \n), then \s+(?!\S), then \s+.
size_t whitespace_piece(const std::u32string& s, size_t i) {
    size_t k = run(s, i, is_s);
    for (size_t j = i + k; j > i; --j)
        if (is_crlf(s[j - 1])) return j - i;
    if (size_t m = space_not_before_text(s, i)) return m;
    return k;
}

class Gpt2 : public SplitRegex {
public:
    explicit Gpt2(bool trailing) : trailing_(trailing) {}
    size_t match_at(const std::u32string& s, size_t i) const override {
        if (size_t m = contraction(s, i, Fold::None)) return m;
        size_t sp = s[i] == ' ' ? 1 : 0;
        for (auto pred : {is_l, is_n, is_other}) {
            // ` ?X+`: with the space when X follows it, else X at i
            if (sp && i + 1 < s.size() && pred(s[i + 1])) return 1 + run(s, i + 1, pred);
            if (pred(s[i])) return run(s, i, pred);
        }
        if (size_t m = space_not_before_text(s, i)) return m;
        return trailing_ ? run(s, i, is_s) : 0;
    }

private:
    bool trailing_;
};

class Llama3 : public SplitRegex {
public:
    explicit Llama3(size_t max_digits) : max_digits_(max_digits) {}
    size_t match_at(const std::u32string& s, size_t i) const override {
        if (size_t m = contraction(s, i, Fold::Unicode)) return m;
        // [^\r\n\p{L}\p{N}]?\p{L}+
        char32_t c = s[i];
        if (!is_crlf(c) && !is_l(c) && !is_n(c) && i + 1 < s.size() && is_l(s[i + 1])) return 1 + run(s, i + 1, is_l);
        if (is_l(c)) return run(s, i, is_l);
        // \p{N}{1,max}
        if (is_n(c)) {
            size_t k = run(s, i, is_n);
            return k < max_digits_ ? k : max_digits_;
        }
        // ` ?[^\s\p{L}\p{N}]+[\r\n]*`
        size_t start = (c == ' ' && i + 1 < s.size() && is_other(s[i + 1])) ? i + 1 : is_other(c) ? i : s.size();
        if (start < s.size()) {
            size_t j = start + run(s, start, is_other);
            j += run(s, j, is_crlf);
            return j - i;
        }
        return whitespace_piece(s, i);
    }

private:
    size_t max_digits_;
};

// OpenAI's o200k pattern (gpt-4o, gpt-oss): words split where lowercase turns to uppercase
// ("CamelCase" -> "Camel", "Case") and keep the contraction after them, digits go in threes,
// punctuation runs take the newlines and slashes after them.
//   tokenizer.json's form (kO200kRegex): the letter runs are [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]
//     then [\p{Ll}\p{Lm}\p{Lo}\p{M}], contractions (?i:...) as Oniguruma folds case;
//   llama.cpp's form for GGUF "gpt-4o" (kGpt4oRegex): letters that are not a-z, then letters
//     that are not A-Z, contractions with ASCII case folded. A letter outside ASCII belongs to
//     both runs, and marks (\p{M}) to neither: they split off as punctuation does.
class O200k : public SplitRegex {
public:
    explicit O200k(bool unicode_classes) : unicode_(unicode_classes) {}
    size_t match_at(const std::u32string& s, size_t i) const override {
        const char32_t c = s[i];
        const bool lead = !is_crlf(c) && !is_l(c) && !is_n(c);  // [^\r\n\p{L}\p{N}]
        // [^\r\n\p{L}\p{N}]?UPPER*LOWER+C?, with the lead character, then without it
        if (lead && i + 1 < s.size())
            if (size_t e = upper_lower(s, i + 1)) return e - i;
        if (size_t e = upper_lower(s, i)) return e - i;
        // [^\r\n\p{L}\p{N}]?UPPER+LOWER*C?: greedy runs, nothing to give back
        size_t start = lead && i + 1 < s.size() && upper(s[i + 1]) ? i + 1 : upper(c) ? i : s.size();
        if (start < s.size()) {
            size_t e = start;
            while (e < s.size() && upper(s[e])) ++e;
            while (e < s.size() && lower(s[e])) ++e;
            return e + contraction(s, e, fold()) - i;
        }
        // \p{N}{1,3}
        if (is_n(c)) {
            size_t k = run(s, i, is_n);
            return k < 3 ? k : 3;
        }
        // ` ?[^\s\p{L}\p{N}]+[\r\n/]*`
        start = (c == ' ' && i + 1 < s.size() && is_other(s[i + 1])) ? i + 1 : is_other(c) ? i : s.size();
        if (start < s.size()) {
            size_t j = start + run(s, start, is_other);
            while (j < s.size() && (is_crlf(s[j]) || s[j] == '/')) ++j;
            return j - i;
        }
        return whitespace_piece(s, i);
    }

private:
    bool upper(char32_t c) const {
        return unicode_ ? u::has(c, u::UPPER_OR_CASELESS) : is_l(c) && !(c >= 'a' && c <= 'z');
    }
    bool lower(char32_t c) const {
        return unicode_ ? u::has(c, u::LOWER_OR_CASELESS) : is_l(c) && !(c >= 'A' && c <= 'Z');
    }
    Fold fold() const { return unicode_ ? Fold::Unicode : Fold::Ascii; }

    // The end of UPPER*LOWER+C? matched at s[p] (0: no match). The two classes share
    // characters, so UPPER* takes its longest run and then gives characters back until
    // LOWER+ can start.
    size_t upper_lower(const std::u32string& s, size_t p) const {
        size_t j = p;
        while (j < s.size() && upper(s[j])) ++j;
        while (!(j < s.size() && lower(s[j]))) {
            if (j == p) return 0;
            --j;
        }
        while (j < s.size() && lower(s[j])) ++j;
        return j + contraction(s, j, fold());
    }

    bool unicode_;
};

class Digits : public SplitRegex {
public:
    explicit Digits(size_t max) : max_(max) {}
    size_t match_at(const std::u32string& s, size_t i) const override {
        size_t k = run(s, i, is_n);
        return k < max_ ? k : max_;
    }

private:
    size_t max_;
};

}  // namespace

std::vector<std::pair<size_t, size_t>> SplitRegex::find_all(const std::u32string& s) const {
    std::vector<std::pair<size_t, size_t>> out;
    for (size_t i = 0; i < s.size();) {
        size_t m = match_at(s, i);
        if (m) {
            out.emplace_back(i, i + m);
            i += m;
        } else {
            ++i;
        }
    }
    return out;
}

std::shared_ptr<const SplitRegex> known_regex(const std::string& p) {
    if (p == kGpt2Regex) return std::make_shared<Gpt2>(true);
    if (p == kGpt2RegexNoTrailing) return std::make_shared<Gpt2>(false);
    if (p == kLlama3Regex) return std::make_shared<Llama3>(3);
    if (p == kQwen2Regex) return std::make_shared<Llama3>(1);
    if (p == kDigitRegex) return std::make_shared<Digits>(1);
    if (p == kO200kRegex) return std::make_shared<O200k>(true);
    if (p == kGpt4oRegex) return std::make_shared<O200k>(false);
    if (p == R"(\p{N}{1,3})") return std::make_shared<Digits>(3);
    return nullptr;
}

}  // namespace akunu::text::tok
