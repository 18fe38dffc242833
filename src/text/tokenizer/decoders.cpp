#include "text/tokenizer/decoders.h"

#include "text/byte_level.h"
#include "text/tokenizer/unicode.h"

namespace akunu::text::tok {
namespace {

namespace u = akunu::text::unicode;

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
    if (from.empty()) return s;
    std::string out;
    size_t i = 0, j;
    while ((j = s.find(from, i)) != std::string::npos) {
        out.append(s, i, j - i);
        out += to;
        i = j + from.size();
    }
    out.append(s, i, std::string::npos);
    return out;
}

class Sequence : public Decoder {
public:
    explicit Sequence(std::vector<DecoderPtr> s) : steps_(std::move(s)) {}
    void decode_chain(std::vector<std::string>& t) const override {
        for (auto& s : steps_) s->decode_chain(t);
    }

private:
    std::vector<DecoderPtr> steps_;
};

// Tokens spelled in the byte-level alphabet become their bytes (a token with
// any other character stays as it is), then the whole is read as UTF-8, lossily.
class ByteLevel : public Decoder {
public:
    void decode_chain(std::vector<std::string>& t) const override {
        std::string bytes, one;
        for (auto& tok : t) bytes += byte_level_to_bytes(tok, one) ? one : tok;
        t.assign(1, u::utf8_lossy(bytes));
    }
};

class Metaspace : public Decoder {
public:
    Metaspace(char32_t r, PrependScheme s) : r_(r), scheme_(s) {}
    void decode_chain(std::vector<std::string>& t) const override {
        for (size_t i = 0; i < t.size(); ++i) {
            std::string out;
            for (char32_t c : u::decode_utf8(t[i])) {
                if (c == r_) {
                    if (!(i == 0 && scheme_ != PrependScheme::Never)) out += ' ';
                } else {
                    u::append_utf8(out, c);
                }
            }
            t[i] = std::move(out);
        }
    }

private:
    char32_t r_;
    PrependScheme scheme_;
};

std::string wordpiece_cleanup(std::string s) {
    static const char* const pairs[][2] = {{" .", "."},    {" ?", "?"},    {" !", "!"},          {" ,", ","},
                                           {" ' ", "'"},   {" n't", "n't"}, {" 'm", "'m"},        {" do not", " don't"},
                                           {" 's", "'s"},  {" 've", "'ve"}, {" 're", "'re"}};
    for (auto& p : pairs) s = replace_all(std::move(s), p[0], p[1]);
    return s;
}

class WordPiece : public Decoder {
public:
    WordPiece(std::string prefix, bool cleanup) : prefix_(std::move(prefix)), cleanup_(cleanup) {}
    void decode_chain(std::vector<std::string>& t) const override {
        for (size_t i = 0; i < t.size(); ++i) {
            if (i != 0) {
                if (t[i].compare(0, prefix_.size(), prefix_) == 0) t[i] = t[i].substr(prefix_.size());
                else t[i] = " " + t[i];
            }
            if (cleanup_) t[i] = wordpiece_cleanup(std::move(t[i]));
        }
    }

private:
    std::string prefix_;
    bool cleanup_;
};

class Replace : public Decoder {
public:
    Replace(std::string p, std::string c) : p_(std::move(p)), c_(std::move(c)) {}
    void decode_chain(std::vector<std::string>& t) const override {
        for (auto& s : t) s = replace_all(std::move(s), p_, c_);
    }

private:
    std::string p_, c_;
};

int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

// Runs of <0xXX> tokens become their bytes when they form UTF-8, else one U+FFFD per byte.
class ByteFallback : public Decoder {
public:
    void decode_chain(std::vector<std::string>& t) const override {
        std::vector<std::string> out;
        std::string pending;
        size_t n_pending = 0;
        auto flush = [&] {
            if (!n_pending) return;
            if (u::valid_utf8(pending)) out.push_back(pending);
            else
                for (size_t k = 0; k < n_pending; ++k) out.push_back("\xEF\xBF\xBD");
            pending.clear();
            n_pending = 0;
        };
        for (auto& tok : t) {
            int hi = -1, lo = -1;
            if (tok.size() == 6 && tok.compare(0, 3, "<0x") == 0 && tok[5] == '>') {
                hi = hex_digit(tok[3]);
                lo = hex_digit(tok[4]);
            }
            if (hi >= 0 && lo >= 0) {
                pending += char(hi * 16 + lo);
                ++n_pending;
            } else {
                flush();
                out.push_back(tok);
            }
        }
        flush();
        t.swap(out);
    }
};

class Fuse : public Decoder {
public:
    void decode_chain(std::vector<std::string>& t) const override {
        std::string all;
        for (auto& s : t) all += s;
        t.assign(1, all);
    }
};

class Strip : public Decoder {
public:
    Strip(char32_t c, size_t start, size_t stop) : c_(c), start_(start), stop_(stop) {}
    void decode_chain(std::vector<std::string>& t) const override {
        for (auto& s : t) {
            std::u32string cps = u::decode_utf8(s);
            size_t a = 0;
            for (size_t i = 0; i < start_ && i < cps.size(); ++i) {
                if (cps[i] != c_) break;
                a = i + 1;
            }
            size_t b = cps.size();
            for (size_t i = 0; i < stop_ && i < cps.size(); ++i) {
                size_t idx = cps.size() - i - 1;
                if (cps[idx] != c_) break;
                b = idx;
            }
            s = a < b ? u::encode_utf8(cps.substr(a, b - a)) : std::string();
        }
    }

private:
    char32_t c_;
    size_t start_, stop_;
};

class BpeDecoder : public Decoder {
public:
    explicit BpeDecoder(std::string suffix) : suffix_(std::move(suffix)) {}
    void decode_chain(std::vector<std::string>& t) const override {
        for (size_t i = 0; i < t.size(); ++i) t[i] = replace_all(std::move(t[i]), suffix_, i + 1 == t.size() ? "" : " ");
    }

private:
    std::string suffix_;
};

}  // namespace

DecoderPtr make_sequence_decoder(std::vector<DecoderPtr> steps) { return std::make_shared<Sequence>(std::move(steps)); }
DecoderPtr make_byte_level_decoder() { return std::make_shared<ByteLevel>(); }
DecoderPtr make_metaspace_decoder(char32_t r, PrependScheme s) { return std::make_shared<Metaspace>(r, s); }
DecoderPtr make_wordpiece_decoder(std::string prefix, bool cleanup) {
    return std::make_shared<WordPiece>(std::move(prefix), cleanup);
}
DecoderPtr make_replace_decoder(const std::string& p, const std::string& c) { return std::make_shared<Replace>(p, c); }
DecoderPtr make_byte_fallback_decoder() { return std::make_shared<ByteFallback>(); }
DecoderPtr make_fuse_decoder() { return std::make_shared<Fuse>(); }
DecoderPtr make_strip_decoder(char32_t c, size_t start, size_t stop) { return std::make_shared<Strip>(c, start, stop); }
DecoderPtr make_bpe_decoder(std::string suffix) { return std::make_shared<BpeDecoder>(std::move(suffix)); }

}  // namespace akunu::text::tok
