// The tokenizer of a text model in C++, built from the model file's own
// vocabulary (GGUF metadata or a Hugging Face tokenizer.json), so that the C
// API encodes and decodes text without Python. Its results equal the Python
// package's (Hugging Face `tokenizers` built from the same metadata).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace akunu {
class ModelFile;
}

namespace akunu::text {

class Tokenizer {
public:
    virtual ~Tokenizer() = default;

    virtual int32_t vocab_size() const = 0;
    // Text to ids; add_special puts the model's BOS (or [CLS] ... [SEP]) in
    // place as the Python package's encode(add_bos=True) does.
    virtual std::vector<int32_t> encode(std::string_view text, bool add_special) const = 0;
    // Ids to text; special (control) tokens are left out when skip_special.
    virtual std::string decode(const std::vector<int32_t>& ids, bool skip_special) const = 0;
    // The bytes token `id` stands for in generated text ("" for control and
    // unused tokens); a byte-fallback token gives its one byte.
    virtual std::string token_bytes(int32_t id) const = 0;
    // True for tokens that stand for text (normal, user-defined, byte).
    virtual bool is_text_token(int32_t id) const = 0;
    // The vocabulary's own spelling of a token ("<bos>", "<|im_end|>"), as
    // chat templates name them.
    virtual std::string token_text(int32_t id) const = 0;
    virtual int32_t bos_id() const = 0;  // -1 when the model has none
    virtual int32_t eos_id() const = 0;  // -1 when the model has none

    // The bytes of token_bytes(id), held by the tokenizer: valid while it
    // lives (the C API hands them out); empty for an id outside the vocabulary.
    virtual std::string_view token_bytes_view(int32_t id) const { (void)id; return {}; }
    // The tokenizer family as the Python package names it: "llama"
    // (SentencePiece-style BPE), "gpt2" (byte-level BPE) or "bert" (WordPiece).
    virtual std::string kind() const { return ""; }
};

// The tokenizer described by the model at `path` (a .gguf file or a model
// directory). Throws akunu::FormatError / UnsupportedError with a message
// naming what is missing or unknown.
std::shared_ptr<const Tokenizer> load_tokenizer(const std::string& path);
// The same for a model already open: a GGUF's metadata is read from `file`;
// a model directory's tokenizer.json from `path`.
std::shared_ptr<const Tokenizer> load_tokenizer(const ModelFile& file, const std::string& path);

}  // namespace akunu::text
