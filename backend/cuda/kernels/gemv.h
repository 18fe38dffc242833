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

// How many bytes of each weight row a decode GEMV warp asks into L2 before it
// waits for the kernel ahead of it (launch_pdl): the first memory round trip
// overlaps that kernel's tail, while the rows of every resident warp stay
// well inside L2 (whole F16 rows at the 8B shape did not: BENCHMARKS.md).
// AKUNU_CUDA_GEMV_PREFETCH=N overrides it (0: none), for A/B runs.
inline uint32_t gemv_prefetch_bytes() {
    static const uint32_t bytes = [] {
        const char* e = std::getenv("AKUNU_CUDA_GEMV_PREFETCH");
        return e ? (uint32_t)std::strtoul(e, nullptr, 10) : 2048u;
    }();
    return bytes;
}

// The same for float rows (F16 / BF16 / F32 against float x): AKUNU_CUDA_GEMV_FLOAT_PREFETCH=N.
inline uint32_t float_prefetch_bytes() {
    static const uint32_t bytes = [] {
        const char* e = std::getenv("AKUNU_CUDA_GEMV_FLOAT_PREFETCH");
        return e ? (uint32_t)std::strtoul(e, nullptr, 10) : gemv_prefetch_bytes();
    }();
    return bytes;
}

}  // namespace akunu
