// WordPiece (greedy longest-prefix, "##" continuations, the whole word
// unknown when any part is) and WordLevel (whole pre-tokens), as HF
// `tokenizers` runs them.
#include "core/error.h"
#include "text/tokenizer/model.h"

namespace akunu::text::tok {
namespace {

size_t utf8_chars(const std::string& s) {
    size_t n = 0;
    for (unsigned char c : s) n += (c & 0xC0) != 0x80;
    return n;
}

class WordPiece : public Model {
public:
    WordPiece(std::unordered_map<std::string, int32_t> vocab, std::string unk, std::string prefix, size_t max_chars)
        : unk_(std::move(unk)), prefix_(std::move(prefix)), max_chars_(max_chars) {
        set_vocab(std::move(vocab));
    }

    void tokenize(const std::string& w, std::vector<int32_t>& out) const override {
        if (utf8_chars(w) > max_chars_) {
            out.push_back(unk_id());
            return;
        }
        std::vector<int32_t> sub;
        size_t start = 0;
        while (start < w.size()) {
            size_t end = w.size();
            int32_t found = -1;
            while (start < end) {
                std::string s = w.substr(start, end - start);
                if (start > 0) s = prefix_ + s;
                auto it = vocab_.find(s);
                if (it != vocab_.end()) {
                    found = it->second;
                    break;
                }
                // drop the last character
                do --end;
                while (end > start && ((unsigned char)w[end] & 0xC0) == 0x80);
            }
            if (found < 0) {
                out.push_back(unk_id());
                return;
            }
            sub.push_back(found);
            start = end;
        }
        out.insert(out.end(), sub.begin(), sub.end());
    }

private:
    int32_t unk_id() const {
        auto it = vocab_.find(unk_);
        if (it == vocab_.end()) throw FormatError("WordPiece unknown token '" + unk_ + "' is not in the vocabulary");
        return it->second;
    }

    std::string unk_, prefix_;
    size_t max_chars_;
};

class WordLevel : public Model {
public:
    WordLevel(std::unordered_map<std::string, int32_t> vocab, std::string unk) : unk_(std::move(unk)) {
        set_vocab(std::move(vocab));
    }
    void tokenize(const std::string& w, std::vector<int32_t>& out) const override {
        auto it = vocab_.find(w);
        if (it == vocab_.end()) it = vocab_.find(unk_);
        if (it == vocab_.end()) throw FormatError("WordLevel unknown token '" + unk_ + "' is not in the vocabulary");
        out.push_back(it->second);
    }

private:
    std::string unk_;
};

}  // namespace

ModelPtr make_wordpiece(std::unordered_map<std::string, int32_t> vocab, std::string unk, std::string prefix,
                        size_t max_chars) {
    return std::make_shared<WordPiece>(std::move(vocab), std::move(unk), std::move(prefix), max_chars);
}

ModelPtr make_wordlevel(std::unordered_map<std::string, int32_t> vocab, std::string unk) {
    return std::make_shared<WordLevel>(std::move(vocab), std::move(unk));
}

}  // namespace akunu::text::tok
