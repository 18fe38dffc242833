// Whisper in akunu's GGUF vocabulary: the metadata keys and tensor names that
// every Whisper source (GGUF, Hugging Face directory, CTranslate2 directory)
// is mapped to, so one loader reads them all.
//
// Metadata (prefix "whisper."): n_mels; encoder.{context_length, embedding_length,
// block_count, attention.head_count, feed_forward_length}; the same keys without
// "encoder." for the text decoder; attention.layer_norm_epsilon;
// suppress_tokens and begin_suppress_tokens (token-id arrays, optional).
//
// Tensors: enc.conv{1,2}.{weight,bias} (conv weights flattened to
// [in_channels * 3, out_channels], PyTorch's [out, in, k] read row-major),
// enc.position_embd.weight, enc.blk.N.{attn_norm, attn_q, attn_k, attn_v,
// attn_output, ffn_norm, ffn_up, ffn_down}, enc.output_norm; token_embd,
// position_embd, blk.N.{attn_*, cross_attn_norm, cross_attn_q, cross_attn_k,
// cross_attn_v, cross_attn_output, ffn_*}, output_norm. Every projection has
// a bias except attn_k / cross_attn_k (optional there).
#pragma once
#include <map>
#include <string>

#include "weight/json.h"
#include "weight/model_file.h"

namespace akunu {

// Hugging Face module path (WhisperForConditionalGeneration, without
// .weight/.bias) -> GGUF base name, or "" for modules the model does not use.
std::string whisper_name_from_hf(const std::string& module);

// config.json (and generation_config.json, when present) -> whisper.* metadata.
void whisper_metadata_from_hf(const JsonValue& config, const JsonValue* generation,
                              std::map<std::string, GGUFValue>& kv, const std::string& what);

// A JSON array of token ids (or absent) -> an int-array metadata value `key`.
void put_token_ids(const JsonValue* v, const std::string& key, const std::string& what,
                   std::map<std::string, GGUFValue>& kv);

// Convolution weights arrive as [k, in, out] in GGUF order; the matmul that
// runs them wants [in * k, out] (same bytes).
void flatten_conv_weight(GGUFTensorInfo& t);

}  // namespace akunu
