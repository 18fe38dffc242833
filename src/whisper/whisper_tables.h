// Whisper's dispatch tables (book Part VIII, "Whisper"), built once at load:
// - the encoder table: conv front end (im2col + matmul + GELU, twice),
//   positions, pre-norm bidirectional layers, final LayerNorm, then the cross
//   K/V of every decoder layer computed once into the cross cache;
// - a decoder table per self-attention cache slot (one per beam) and pass
//   kind: tokens + learned positions, pre-norm layers with causal
//   self-attention, cross-attention over the fixed cross cache, GELU FFN,
//   output LayerNorm and the tied projection to logits (last row only).
#pragma once
#include "cache/kv_cache.h"
#include "cache/scratch.h"
#include "core/dispatch_table.h"
#include "whisper/whisper_weights.h"

namespace akunu {

struct WhisperAudioBuffers {
    Buffer mel;   // [n_frames, n_mels] log-mel input, frame-major
    Buffer col;   // im2col columns of either convolution
    Buffer conv;  // conv1 output [n_frames, enc_dim]
};

DispatchTable build_whisper_encoder_table(Device& dev, const WhisperConfig& c, const WhisperWeights& w,
                                          const ScratchBuffers& s, const WhisperAudioBuffers& audio,
                                          const KVCache& enc_kv, const KVCache& cross_kv);

// decode: one token per pass (GEMV kernels); otherwise prompt passes (GEMM kernels).
DispatchTable build_whisper_decoder_table(Device& dev, const WhisperConfig& c, const WhisperWeights& w,
                                          const ScratchBuffers& s, const KVCache& self_kv, const KVCache& cross_kv,
                                          bool decode);

}  // namespace akunu
