// Split (flash-decoding) attention for one query token; see attention_decode.cu.
#pragma once
#include "core/kernel_params.h"
#include "cuda_kernel.h"

namespace akunu {

// Launches the split kernel and returns true when `p` is a one-token causal
// pass it handles (head_dim 32, 64, 128 or 256); false leaves it to the general kernel.
bool launch_attention_decode(const CudaArgs& a, const AttentionParams& p);

// Whether launch_attention_decode takes `p` (its output can then be rounded
// to 8 bits as it is written: CudaArgs::q8_out).
bool attention_decode_takes(const AttentionParams& p);

// CudaKernelEntry::absorbs for the attention: a one-token decode pass right
// after the qk_norm_rope_kv of the same heads, caches and position does that
// command's work itself (AKUNU_CUDA_ATTN_FUSE=0: never; see attention_fuse).
bool attention_absorbs(const CudaArgs& self, const char* prev, const CudaArgs& prev_args);

}  // namespace akunu
