// Flash attention for prefill passes on the tensor cores; see attention_prefill.cu.
#pragma once
#include "core/kernel_params.h"
#include "cuda_kernel.h"

namespace akunu {

// Launches the tensor-core kernel and returns true when `p` is a many-token
// pass it handles (causal or not, sliding window, GQA; head_dim 64, 128 or
// 256; not segmented, not cross-attention); false leaves it to the general kernel.
bool launch_attention_prefill(const CudaArgs& a, const AttentionParams& p);

}  // namespace akunu
