// Decode GEMV for the common GGUF formats; see gemv.cu.
#pragma once
#include "core/kernel_params.h"
#include "cuda_kernel.h"

namespace akunu {

constexpr int kGemvMaxTokens = 8;

// Enqueues y = W x (+ bias) for at most kGemvMaxTokens tokens and returns
// true when the format (Q4_0, Q8_0, Q4_K, Q6_K, F16, BF16, F32) and alignment suit these
// kernels; false leaves the pass to the general ones.
bool launch_gemv(const CudaArgs& a, const MatmulParams& p, const float* x, float* y);

}  // namespace akunu
