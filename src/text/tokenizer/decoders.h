// Decoders of HF `tokenizers` (token strings to text), with the same meaning.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "text/tokenizer/pre_tokenizers.h"

namespace akunu::text::tok {

class Decoder {
public:
    virtual ~Decoder() = default;
    virtual void decode_chain(std::vector<std::string>& tokens) const = 0;
};
using DecoderPtr = std::shared_ptr<const Decoder>;

DecoderPtr make_sequence_decoder(std::vector<DecoderPtr> steps);
DecoderPtr make_byte_level_decoder();
DecoderPtr make_metaspace_decoder(char32_t replacement, PrependScheme scheme);
DecoderPtr make_wordpiece_decoder(std::string prefix, bool cleanup);
DecoderPtr make_replace_decoder(const std::string& pattern, const std::string& content);
DecoderPtr make_byte_fallback_decoder();
DecoderPtr make_fuse_decoder();
DecoderPtr make_strip_decoder(char32_t content, size_t start, size_t stop);
DecoderPtr make_bpe_decoder(std::string suffix);

}  // namespace akunu::text::tok
