#include "text/tokenizer/normalizers.h"

#include "text/tokenizer/unicode.h"

namespace akunu::text::tok {
namespace {

namespace u = akunu::text::unicode;

class Sequence : public Normalizer {
public:
    explicit Sequence(std::vector<NormalizerPtr> s) : steps_(std::move(s)) {}
    void normalize(NText& t) const override {
        for (auto& s : steps_) s->normalize(t);
    }

private:
    std::vector<NormalizerPtr> steps_;
};

class Prepend : public Normalizer {
public:
    explicit Prepend(const std::string& p) : p_(u::decode_utf8(p)) {}
    void normalize(NText& t) const override { t.prepend(p_); }

private:
    std::u32string p_;
};

class Replace : public Normalizer {
public:
    Replace(const std::string& pat, const std::string& content)
        : pat_(u::decode_utf8(pat)), content_(u::decode_utf8(content)) {}
    void normalize(NText& t) const override {
        auto matches = find_literal(t.cps, pat_);
        if (matches.empty()) return;
        std::u32string out;
        std::vector<size_t> origin;
        size_t last = 0;
        for (auto& m : matches) {
            for (size_t i = last; i < m.first; ++i) out += t.cps[i], origin.push_back(i);
            // inserted characters share the alignment of the last replaced one
            for (char32_t c : content_) out += c, origin.push_back(m.second - 1);
            last = m.second;
        }
        for (size_t i = last; i < t.cps.size(); ++i) out += t.cps[i], origin.push_back(i);
        t.assign(std::move(out), origin);
    }

private:
    std::u32string pat_, content_;
};

// Per code point rewrites keep track of which input code point each output one came from.
template <typename F>
void rewrite(NText& t, F&& f) {
    std::u32string out;
    std::vector<size_t> origin;
    out.reserve(t.cps.size());
    for (size_t i = 0; i < t.cps.size(); ++i) {
        size_t before = out.size();
        f(t.cps[i], out);
        origin.insert(origin.end(), out.size() - before, i);
    }
    t.assign(std::move(out), origin);
}

void apply_nfd(NText& t) {
    // decompose per code point (keeping alignment), then order marks canonically
    rewrite(t, [](char32_t c, std::u32string& out) { out += u::decompose(c); });
    std::u32string ordered = u::nfd(t.cps);  // already decomposed: only reorders
    if (ordered != t.cps) {
        // reordering moves marks within a run; alignment of a run's first code point stays
        t.cps = std::move(ordered);
    }
}

class Nfd : public Normalizer {
public:
    void normalize(NText& t) const override { apply_nfd(t); }
};

class Nfc : public Normalizer {
public:
    void normalize(NText& t) const override {
        std::u32string c = u::nfc(t.cps);
        if (c == t.cps) return;
        // composition only merges code points: align each output code point with
        // the input one that starts it, walking both strings
        std::vector<size_t> origin;
        size_t j = 0;
        for (size_t i = 0; i < c.size(); ++i) {
            origin.push_back(std::min(j, t.cps.size() ? t.cps.size() - 1 : 0));
            j += u::decompose(c[i]).size();  // an approximation of how many inputs it covers
        }
        t.assign(std::move(c), origin);
    }
};

class Lowercase : public Normalizer {
public:
    void normalize(NText& t) const override {
        rewrite(t, [](char32_t c, std::u32string& out) { u::append_lowercase(c, out); });
    }
};

class StripAccents : public Normalizer {
public:
    void normalize(NText& t) const override {
        rewrite(t, [](char32_t c, std::u32string& out) {
            if (!u::has(c, u::MARK)) out += c;
        });
    }
};

class Strip : public Normalizer {
public:
    Strip(bool l, bool r) : l_(l), r_(r) {}
    void normalize(NText& t) const override {
        size_t a = 0, b = t.cps.size();
        if (l_)
            while (a < b && u::has(t.cps[a], u::WHITESPACE)) ++a;
        if (r_)
            while (b > a && u::has(t.cps[b - 1], u::WHITESPACE)) --b;
        if (a == 0 && b == t.cps.size()) return;
        uint32_t shift = t.shift;
        t = t.slice(a, b);
        t.shift = shift;
    }

private:
    bool l_, r_;
};

bool is_chinese_char(char32_t c) {
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
           (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

class BertNormalizer : public Normalizer {
public:
    BertNormalizer(bool clean, bool chinese, bool strip, bool lower)
        : clean_(clean), chinese_(chinese), strip_(strip), lower_(lower) {}
    void normalize(NText& t) const override {
        if (clean_) {
            rewrite(t, [](char32_t c, std::u32string& out) {
                if (u::has(c, u::BERT_CONTROL)) return;  // also U+0000 and U+FFFD
                bool ws = c == '\t' || c == '\n' || c == '\r' || u::has(c, u::WHITESPACE);
                out += ws ? char32_t(' ') : c;
            });
        }
        if (chinese_) {
            rewrite(t, [](char32_t c, std::u32string& out) {
                if (is_chinese_char(c)) {
                    out += ' ';
                    out += c;
                    out += ' ';
                } else {
                    out += c;
                }
            });
        }
        if (strip_) {
            apply_nfd(t);
            rewrite(t, [](char32_t c, std::u32string& out) {
                if (!u::has(c, u::NONSPACING_MARK)) out += c;
            });
        }
        if (lower_) rewrite(t, [](char32_t c, std::u32string& out) { u::append_lowercase(c, out); });
    }

private:
    bool clean_, chinese_, strip_, lower_;
};

}  // namespace

std::vector<std::pair<size_t, size_t>> find_literal(const std::u32string& s, const std::u32string& pat) {
    std::vector<std::pair<size_t, size_t>> out;
    if (pat.empty()) return out;
    size_t i = 0;
    while ((i = s.find(pat, i)) != std::u32string::npos) {
        out.emplace_back(i, i + pat.size());
        i += pat.size();
    }
    return out;
}

NormalizerPtr make_sequence_normalizer(std::vector<NormalizerPtr> steps) {
    return std::make_shared<Sequence>(std::move(steps));
}
NormalizerPtr make_prepend(const std::string& p) { return std::make_shared<Prepend>(p); }
NormalizerPtr make_replace(const std::string& pat, const std::string& content) {
    return std::make_shared<Replace>(pat, content);
}
NormalizerPtr make_nfd() { return std::make_shared<Nfd>(); }
NormalizerPtr make_nfc() { return std::make_shared<Nfc>(); }
NormalizerPtr make_lowercase() { return std::make_shared<Lowercase>(); }
NormalizerPtr make_strip_accents() { return std::make_shared<StripAccents>(); }
NormalizerPtr make_strip(bool l, bool r) { return std::make_shared<Strip>(l, r); }
NormalizerPtr make_bert_normalizer(bool clean, bool chinese, bool strip, bool lower) {
    return std::make_shared<BertNormalizer>(clean, chinese, strip, lower);
}

}  // namespace akunu::text::tok
