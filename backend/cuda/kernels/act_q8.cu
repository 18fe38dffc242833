// Rounds decode activations to 8 bits per 32 values (see act_q8.h) in a
// kernel of its own (the arithmetic: act_q8.cuh).
#include "act_q8.h"

#include "act_q8.cuh"

namespace akunu {
namespace {

constexpr int kThreads = 256, kNormThreads = 1024;

// Norm: one block a token (the sum of squares is a whole-block reduction),
// its norm weights asked into L1 before the wait and the sum of squares in
// float4 loads (rms_scale4); else blocks along the row.
template <bool Norm>
__global__ void __launch_bounds__(Norm ? kNormThreads : kThreads)
    quantize_q8_kernel(const float* __restrict__ x, uint32_t x_stride, uint32_t K, ActQ8Norm norm, ActQ8 out) {
    if (Norm)
        for (uint32_t i = 4 * threadIdx.x; i < K; i += 4 * blockDim.x) prefetch_l1(norm.weight + i);
    pdl_wait();
    pdl_launch_dependents();
    const uint32_t t = blockIdx.y;
    const float* xr = x + (size_t)t * x_stride;
    if (Norm) {
        round_row_q8_scaled<false>(xr, K, rms_scale4(xr, K, norm.eps), norm, threadIdx.x, blockDim.x,
                                   out.q + (size_t)t * K, out.ds + (size_t)t * (K / kQ8Block));
        return;
    }
    norm.weight = nullptr;
    round_row_q8(xr, K, norm, blockIdx.x * blockDim.x + threadIdx.x, gridDim.x * blockDim.x, out.q + (size_t)t * K,
                 out.ds + (size_t)t * (K / kQ8Block));
}

// One block per token: x * scale * (weight + offset), as quantize_q8_kernel<true>.
__global__ void __launch_bounds__(kNormThreads)
    normalize_kernel(const float* __restrict__ x, uint32_t K, ActQ8Norm norm, float* __restrict__ out) {
    pdl_wait();
    pdl_launch_dependents();
    const float* xr = x + (size_t)blockIdx.y * K;
    const float scale = rms_scale(xr, K, norm.eps);
    for (uint32_t i = threadIdx.x; i < K; i += blockDim.x)
        out[(size_t)blockIdx.y * K + i] = xr[i] * scale * (norm.weight[i] + norm.offset);
}

}  // namespace

bool normalize_activations(const CudaArgs& a, const float* x, uint32_t m, uint32_t K, const ActQ8Norm& norm,
                           float** out) {
    if (!norm.weight || !act_f32_layout(a, m, K, 0, out)) return false;
    launch_pdl(normalize_kernel, dim3(1, m), kNormThreads, 0, a, x, K, norm, *out);
    return true;
}

bool act_f32_layout(const CudaArgs& a, uint32_t m, uint32_t K, int half, float** out, float** sumsq) {
    const size_t half_bytes = a.act_scratch_bytes / 2 / 256 * 256;
    const size_t bytes = ((size_t)m * K * sizeof(float) + 255) / 256 * 256;
    if (!a.act_scratch || m == 0 || bytes + (sumsq ? (K / kMinSumsqRows) * sizeof(float) : 0) > half_bytes)
        return false;
    if (sumsq && m != 1) return false;
    *out = reinterpret_cast<float*>(a.act_scratch + (half ? half_bytes : 0));
    if (sumsq) *sumsq = reinterpret_cast<float*>(a.act_scratch + (half ? half_bytes : 0) + bytes);
    return true;
}

bool act_q8_layout(const CudaArgs& a, uint32_t m, uint32_t K, int half, ActQ8* out) {
    if (K == 0 || K % kQ8Block != 0 || m == 0) return false;
    const size_t q_bytes = ((size_t)m * K + 255) / 256 * 256, half_bytes = a.act_scratch_bytes / 2 / 256 * 256;
    if (!a.act_scratch || q_bytes + (size_t)m * (K / kQ8Block) * sizeof(float2) > half_bytes) return false;
    uint8_t* base = a.act_scratch + (half ? half_bytes : 0);
    out->q = reinterpret_cast<int8_t*>(base);
    out->ds = reinterpret_cast<float2*>(base + q_bytes);
    return true;
}

bool act_q8_sumsq_layout(const CudaArgs& a, uint32_t m, uint32_t K, int half, float eps, ActQ8* out) {
    const size_t half_bytes = a.act_scratch_bytes / 2 / 256 * 256;
    const uint8_t* base = a.act_scratch + (half ? half_bytes : 0);
    const size_t at = (reinterpret_cast<const uint8_t*>(out->ds + (size_t)m * (K / kQ8Block)) - base + 255) / 256 * 256;
    if (m != 1 || at + (K / kQ8Block) * sizeof(float) > half_bytes) return false;
    out->sumsq = reinterpret_cast<float*>(a.act_scratch + (half ? half_bytes : 0) + at);
    out->eps = eps;
    return true;
}

bool quantize_activations(const CudaArgs& a, const float* x, uint32_t x_stride, uint32_t m, uint32_t K,
                          const ActQ8Norm& norm, ActQ8* out) {
    if (x_stride % 4 != 0 || (reinterpret_cast<uintptr_t>(x) & 15) != 0 || !act_q8_layout(a, m, K, 0, out))
        return false;
    if (norm.weight) {
        launch_pdl(quantize_q8_kernel<true>, dim3(1, m), kNormThreads, 0, a, x, x_stride, K, norm, *out);
    } else {
        const unsigned blocks = blocks_for(K / 4, kThreads);
        launch_pdl(quantize_q8_kernel<false>, dim3(blocks, m), kThreads, 0, a, x, x_stride, K, norm, *out);
    }
    return true;
}

}  // namespace akunu
