// One HF `tokenizers` Tokenizer: added tokens, normalizer, pre-tokenizer,
// model, post-processor and decoder, run in that library's order.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "text/tokenizer/added_vocab.h"
#include "text/tokenizer/decoders.h"
#include "text/tokenizer/model.h"
#include "text/tokenizer/normalizers.h"
#include "text/tokenizer/pre_tokenizers.h"

namespace akunu::text::tok {

// A post-processor's single-sequence template: special ids around the text.
struct PostProcessor {
    bool present = false;
    std::vector<int32_t> before, after;  // added when add_special
};

struct Pipeline {
    ModelPtr model;
    NormalizerPtr normalizer;
    PreTokenizerPtr pre_tokenizer;
    PostProcessor post;
    DecoderPtr decoder;
    AddedVocabulary added;

    std::vector<int32_t> encode(const std::string& text, bool add_special) const;
    std::string decode(const std::vector<int32_t>& ids, bool skip_special) const;
    std::optional<int32_t> token_to_id(const std::string& t) const;
    // The string an id decodes from (added tokens first), or nullptr.
    const std::string* id_to_string(int32_t id) const;
};

}  // namespace akunu::text::tok
