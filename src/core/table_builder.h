// Walks the forward pass once and emits the flat command list (book Part V).
#pragma once
#include "cache/kv_cache.h"
#include "cache/paged_kv_cache.h"
#include "cache/sampler_buffers.h"
#include "cache/scratch.h"
#include "core/arch_descriptor.h"
#include "core/dispatch_table.h"
#include "core/kernel_params.h"
#include "core/model_config.h"
#include "core/model_weights.h"

namespace akunu {

enum class TableKind {
    Prefill,  // up to scratch.max_tokens tokens from prompt_ids, GEMM kernels
    Decode,   // one token from chain_ids[token_index], GEMV kernels, argmax into the next slot
    // Continuous batching: a ragged pass of rows from prompt_ids, each row of
    // its own sequence and position (BatchBuffers::rows), K/V in the paged
    // cache, GEMM kernels; the output head over the n_out rows of out_rows.
    Batch,
};

// What a batch table reads beside the scratch buffers.
struct BatchBuffers {
    const PagedKVCache* kv = nullptr;
    Buffer rows;      // int32 (sequence, position) per row
    Buffer out_rows;  // int32 row index per logits row
};

DispatchTable build_dispatch_table(Device& device, const ModelConfig& cfg, const ArchDescriptor& arch,
                                   const ModelWeights& w, const KVCache& kv, const ScratchBuffers& s,
                                   TableKind kind, const BatchBuffers* batch = nullptr);

// One "sample" command on logits row 0 with parameters `params`. Chained: it
// writes chain slot token_index + 1 (replaces the decode table's argmax);
// otherwise chain slot 0 (the first token after a prefill).
DispatchTable build_sample_table(Device& device, const ModelConfig& cfg, const ScratchBuffers& s,
                                 const SamplerBuffers& sb, const SampleParams& params, bool chained);

}  // namespace akunu

namespace akunu {

// Encoder-only models (BERT): one pass over a whole sequence from prompt_ids
// at position 0, leaving the final hidden states in scratch.h (n_tokens x dim)
// for pooling. Bidirectional attention; post-norm LayerNorm blocks.
DispatchTable build_encoder_table(Device& device, const ModelConfig& cfg, const ArchDescriptor& arch,
                                  const ModelWeights& w, const KVCache& kv, const ScratchBuffers& s);

}  // namespace akunu
