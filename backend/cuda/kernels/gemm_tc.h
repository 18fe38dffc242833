// Tensor-core GEMM for many-token passes (prefill); see gemm_tc.cu.
#pragma once
#include "core/kernel_params.h"
#include "cuda_kernel.h"

namespace akunu {

// Enqueues y = W x (+ bias) on the tensor cores (F16 operands, F32
// accumulation) and returns true when the format (F16, BF16, F32, Q8_0,
// Q4_0, Q4_K, Q6_K), K (a multiple of 32) and alignment suit the kernel;
// false leaves the pass to the float kernels.
bool launch_gemm_tc(const CudaArgs& a, const MatmulParams& p, const float* x, float* y);

}  // namespace akunu
