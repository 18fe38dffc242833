#include "text/tokenizer/pre_tokenizers.h"

#include "text/byte_level.h"
#include "text/tokenizer/normalizers.h"
#include "text/tokenizer/unicode.h"

namespace akunu::text::tok {
namespace {

namespace u = akunu::text::unicode;

class Sequence : public PreTokenizer {
public:
    explicit Sequence(std::vector<PreTokenizerPtr> s) : steps_(std::move(s)) {}
    void pre_tokenize(std::vector<Piece>& p) const override {
        for (auto& s : steps_) s->pre_tokenize(p);
    }

private:
    std::vector<PreTokenizerPtr> steps_;
};

class ByteLevel : public PreTokenizer {
public:
    ByteLevel(bool prefix, bool regex) : prefix_(prefix), regex_(regex ? known_regex(kGpt2Regex) : nullptr) {}
    void pre_tokenize(std::vector<Piece>& pieces) const override {
        split_pieces(pieces, [&](const NText& in) {
            NText t = in;
            if (prefix_ && (t.cps.empty() || t.cps[0] != ' ')) t.prepend(U" ");
            if (!regex_) return std::vector<NText>{t};
            return split_spans(t, spans_from_matches(t.cps.size(), regex_->find_all(t.cps)), SplitBehavior::Isolated,
                               false);
        });
        // every byte of the UTF-8 spelling becomes its stand-in character
        for (Piece& p : pieces) {
            if (p.token >= 0) continue;
            std::u32string out;
            std::vector<size_t> origin;
            for (size_t i = 0; i < p.text.cps.size(); ++i) {
                std::string bytes;
                u::append_utf8(bytes, p.text.cps[i]);
                std::u32string mapped = u::decode_utf8(bytes_to_byte_level(bytes));
                out += mapped;
                origin.insert(origin.end(), mapped.size(), i);
            }
            p.text.assign(std::move(out), origin);
        }
    }

private:
    bool prefix_;
    std::shared_ptr<const SplitRegex> regex_;
};

class RegexSplit : public PreTokenizer {
public:
    RegexSplit(std::shared_ptr<const SplitRegex> re, SplitBehavior b, bool inv) : re_(std::move(re)), b_(b), inv_(inv) {}
    void pre_tokenize(std::vector<Piece>& pieces) const override {
        split_pieces(pieces, [&](const NText& t) {
            return split_spans(t, spans_from_matches(t.cps.size(), re_->find_all(t.cps)), b_, inv_);
        });
    }

private:
    std::shared_ptr<const SplitRegex> re_;
    SplitBehavior b_;
    bool inv_;
};

class LiteralSplit : public PreTokenizer {
public:
    LiteralSplit(const std::string& p, SplitBehavior b, bool inv) : pat_(u::decode_utf8(p)), b_(b), inv_(inv) {}
    void pre_tokenize(std::vector<Piece>& pieces) const override {
        split_pieces(pieces, [&](const NText& t) {
            return split_spans(t, spans_from_matches(t.cps.size(), find_literal(t.cps, pat_)), b_, inv_);
        });
    }

private:
    std::u32string pat_;
    SplitBehavior b_;
    bool inv_;
};

class Metaspace : public PreTokenizer {
public:
    Metaspace(char32_t r, PrependScheme s, bool split) : r_(r), scheme_(s), split_(split) {}
    void pre_tokenize(std::vector<Piece>& pieces) const override {
        split_pieces(pieces, [&](const NText& in) {
            NText t = in;
            for (char32_t& c : t.cps)
                if (c == ' ') c = r_;
            bool starts = !t.cps.empty() && t.cps[0] == r_;
            if (scheme_ == PrependScheme::Always && !starts) t.prepend(std::u32string(1, r_));
            if (scheme_ == PrependScheme::First && !starts && t.shift == 0) t.prepend(std::u32string(1, r_));
            if (!split_) return std::vector<NText>{t};
            char32_t r = r_;
            return split_spans(t, spans_from_chars(t.cps, [r](char32_t c) { return c == r; }),
                               SplitBehavior::MergedWithNext, false);
        });
    }

private:
    char32_t r_;
    PrependScheme scheme_;
    bool split_;
};

bool is_bert_punct(char32_t c) { return u::has(c, u::BERT_PUNCT); }
bool is_ws(char32_t c) { return u::has(c, u::WHITESPACE); }

class CharSplit : public PreTokenizer {
public:
    CharSplit(bool (*pred)(char32_t), SplitBehavior b) : pred_(pred), b_(b) {}
    void pre_tokenize(std::vector<Piece>& pieces) const override {
        split_pieces(pieces, [&](const NText& t) { return split_spans(t, spans_from_chars(t.cps, pred_), b_, false); });
    }

private:
    bool (*pred_)(char32_t);
    SplitBehavior b_;
};

class BertPre : public PreTokenizer {
public:
    void pre_tokenize(std::vector<Piece>& pieces) const override {
        ws_.pre_tokenize(pieces);
        punct_.pre_tokenize(pieces);
    }

private:
    CharSplit ws_{is_ws, SplitBehavior::Removed};
    CharSplit punct_{is_bert_punct, SplitBehavior::Isolated};
};

bool is_numeric(char32_t c) { return u::has(c, u::NUMERIC); }

}  // namespace

PreTokenizerPtr make_sequence_pre_tokenizer(std::vector<PreTokenizerPtr> steps) {
    return std::make_shared<Sequence>(std::move(steps));
}
PreTokenizerPtr make_byte_level_pre_tokenizer(bool prefix, bool regex) { return std::make_shared<ByteLevel>(prefix, regex); }
PreTokenizerPtr make_regex_split(std::shared_ptr<const SplitRegex> re, SplitBehavior b, bool inv) {
    return std::make_shared<RegexSplit>(std::move(re), b, inv);
}
PreTokenizerPtr make_literal_split(const std::string& p, SplitBehavior b, bool inv) {
    return std::make_shared<LiteralSplit>(p, b, inv);
}
PreTokenizerPtr make_metaspace(char32_t r, PrependScheme s, bool split) { return std::make_shared<Metaspace>(r, s, split); }
PreTokenizerPtr make_bert_pre_tokenizer() { return std::make_shared<BertPre>(); }
PreTokenizerPtr make_whitespace_split() { return std::make_shared<CharSplit>(is_ws, SplitBehavior::Removed); }
PreTokenizerPtr make_digits(bool individual) {
    return std::make_shared<CharSplit>(is_numeric, individual ? SplitBehavior::Isolated : SplitBehavior::Contiguous);
}
PreTokenizerPtr make_punctuation(SplitBehavior b) { return std::make_shared<CharSplit>(is_bert_punct, b); }

}  // namespace akunu::text::tok
