// The tokenization models of HF `tokenizers`: BPE (byte-level and
// SentencePiece-style with byte fallback), WordPiece and WordLevel.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace akunu::text::tok {

class Model {
public:
    virtual ~Model() = default;
    // Ids of one pre-token (UTF-8); throws when the model cannot (no unknown token).
    virtual void tokenize(const std::string& word, std::vector<int32_t>& out) const = 0;
    std::optional<int32_t> token_to_id(const std::string& t) const;
    const std::string* id_to_token(int32_t id) const;
    size_t vocab_entries() const { return vocab_.size(); }
    const std::unordered_map<std::string, int32_t>& vocab() const { return vocab_; }

protected:
    // token -> id as the model holds it (later duplicates already resolved)
    void set_vocab(std::unordered_map<std::string, int32_t> v);
    std::unordered_map<std::string, int32_t> vocab_;
    std::unordered_map<int32_t, std::string> vocab_r_;
};
using ModelPtr = std::shared_ptr<const Model>;

struct BpeOptions {
    std::optional<std::string> unk_token;
    std::optional<std::string> continuing_subword_prefix;
    std::optional<std::string> end_of_word_suffix;
    bool fuse_unk = false;
    bool byte_fallback = false;
    bool ignore_merges = false;
};

ModelPtr make_bpe(std::unordered_map<std::string, int32_t> vocab,
                  const std::vector<std::pair<std::string, std::string>>& merges, BpeOptions opt);
// The same with merges already resolved to ids (a, b, a + b), in rank order.
struct MergeIds {
    int32_t a, b, result;
};
ModelPtr make_bpe(std::unordered_map<std::string, int32_t> vocab, const std::vector<MergeIds>& merges, BpeOptions opt);
ModelPtr make_wordpiece(std::unordered_map<std::string, int32_t> vocab, std::string unk_token, std::string prefix,
                        size_t max_input_chars_per_word);
ModelPtr make_wordlevel(std::unordered_map<std::string, int32_t> vocab, std::string unk_token);

}  // namespace akunu::text::tok
