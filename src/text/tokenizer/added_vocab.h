// Added tokens (HF `tokenizers` AddedVocabulary): special and user-defined
// tokens found in the text before the model sees it, leftmost-longest, on the
// raw text (normalized = false) or on each normalized piece (normalized = true).
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "text/tokenizer/model.h"
#include "text/tokenizer/normalizers.h"
#include "text/tokenizer/pieces.h"

namespace akunu::text::tok {

struct AddedToken {
    std::string content;
    bool single_word = false, lstrip = false, rstrip = false, normalized = true, special = false;
};

class AddedVocabulary {
public:
    // HF add_tokens: ids from the added map, else the model's vocabulary, else new ones after both.
    void add_tokens(const std::vector<AddedToken>& tokens, const Model& model, const Normalizer* normalizer);
    // The text's pieces: added tokens as ids, the rest normalized.
    std::vector<Piece> extract_and_normalize(const Normalizer* normalizer, const std::string& text) const;

    std::optional<int32_t> token_to_id(const std::string& content) const;
    // The string decoding sees for an added id (its normalized form when it was normalized), or nullptr.
    const std::string* decode_string(int32_t id) const;
    bool is_special(const std::string& s) const { return special_.count(s) > 0; }
    const std::unordered_map<int32_t, AddedToken>& by_id() const { return by_id_; }

private:
    struct Trie {
        struct Node {
            std::vector<std::pair<unsigned char, int>> next;
            int32_t id = -1;
        };
        std::vector<Node> nodes{1};
        void insert(const std::string& s, int32_t id);
        // leftmost-longest non-overlapping matches: (start, end, id) in bytes
        std::vector<std::tuple<size_t, size_t, int32_t>> find(const std::string& s) const;
    };
    void rebuild();
    std::vector<Piece> split(const NText& t, const Trie& trie, bool empty_trie) const;

    std::unordered_map<std::string, int32_t> by_content_;
    std::unordered_map<int32_t, AddedToken> by_id_;
    std::unordered_map<int32_t, std::string> normalized_;
    std::unordered_set<std::string> special_;
    Trie raw_, norm_;
    bool has_raw_ = false, has_norm_ = false;
};

}  // namespace akunu::text::tok
