// Rounds decode activations to 8 bits per 32 values (see act_q8.h). Eight
// threads share a 32-value block, four values each (one float4 load, one
// int32 store); the block's amax and sum travel by shuffles within the eight.
#include "act_q8.h"

#include <cuda_fp16.h>

#include "device_math.cuh"

namespace akunu {
namespace {

constexpr int kThreads = 256, kNormThreads = 1024;

template <bool Norm>
__global__ void __launch_bounds__(Norm ? kNormThreads : kThreads)
    quantize_q8_kernel(const float* __restrict__ x, uint32_t x_stride, uint32_t K, ActQ8Norm norm, ActQ8 out) {
    const uint32_t t = blockIdx.y;
    const float* xr = x + (size_t)t * x_stride;
    float scale = 1.0f;
    if (Norm) scale = rms_scale(xr, K, norm.eps);  // one block per token
    // A block's 8 threads are 8 aligned lanes of one warp; they enter and leave the loop together (K % 32 == 0).
    const unsigned group = 0xFFu << (threadIdx.x % 32 & 24u);
    for (uint32_t i = 4 * (blockIdx.x * blockDim.x + threadIdx.x); i < K; i += 4 * gridDim.x * blockDim.x) {
        float4 v = *reinterpret_cast<const float4*>(xr + i);
        if (Norm) {
            v.x = v.x * scale * (norm.weight[i] + norm.offset);
            v.y = v.y * scale * (norm.weight[i + 1] + norm.offset);
            v.z = v.z * scale * (norm.weight[i + 2] + norm.offset);
            v.w = v.w * scale * (norm.weight[i + 3] + norm.offset);
        }
        float amax = fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w)));
#pragma unroll
        for (int o = 1; o < 8; o <<= 1) amax = fmaxf(amax, __shfl_xor_sync(group, amax, o));
        const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        const int q0 = __float2int_rn(v.x * id), q1 = __float2int_rn(v.y * id);
        const int q2 = __float2int_rn(v.z * id), q3 = __float2int_rn(v.w * id);
        int sum = q0 + q1 + q2 + q3;
#pragma unroll
        for (int o = 1; o < 8; o <<= 1) sum += __shfl_xor_sync(group, sum, o);
        const size_t at = (size_t)t * K + i;
        *reinterpret_cast<uint32_t*>(out.q + at) =
            (uint32_t)(q0 & 0xFF) | (uint32_t)(q1 & 0xFF) << 8 | (uint32_t)(q2 & 0xFF) << 16 | (uint32_t)q3 << 24;
        if (i % kQ8Block == 0) {
            // kept to F16 precision, as the CPU's and llama.cpp's Q8 blocks store it
            const float d16 = __half2float(__float2half_rn(d));
            out.ds[at / kQ8Block] = make_float2(d16, d16 * (float)sum);
        }
    }
}

// One block per token: x * scale * (weight + offset), as quantize_q8_kernel<true>.
__global__ void __launch_bounds__(kNormThreads)
    normalize_kernel(const float* __restrict__ x, uint32_t K, ActQ8Norm norm, float* __restrict__ out) {
    const float* xr = x + (size_t)blockIdx.y * K;
    const float scale = rms_scale(xr, K, norm.eps);
    for (uint32_t i = threadIdx.x; i < K; i += blockDim.x)
        out[(size_t)blockIdx.y * K + i] = xr[i] * scale * (norm.weight[i] + norm.offset);
}

}  // namespace

bool normalize_activations(const CudaArgs& a, const float* x, uint32_t m, uint32_t K, const ActQ8Norm& norm,
                           float** out) {
    if (!a.act_scratch || (size_t)m * K * sizeof(float) > a.act_scratch_bytes || !norm.weight) return false;
    *out = reinterpret_cast<float*>(a.act_scratch);
    normalize_kernel<<<dim3(1, m), kNormThreads, 0, a.stream>>>(x, K, norm, *out);
    return true;
}

bool quantize_activations(const CudaArgs& a, const float* x, uint32_t x_stride, uint32_t m, uint32_t K,
                          const ActQ8Norm& norm, ActQ8* out) {
    if (K == 0 || K % kQ8Block != 0 || m == 0 || x_stride % 4 != 0 || (reinterpret_cast<uintptr_t>(x) & 15) != 0)
        return false;
    const size_t q_bytes = ((size_t)m * K + 255) / 256 * 256;
    if (!a.act_scratch || q_bytes + (size_t)m * (K / kQ8Block) * sizeof(float2) > a.act_scratch_bytes) return false;
    out->q = reinterpret_cast<int8_t*>(a.act_scratch);
    out->ds = reinterpret_cast<float2*>(a.act_scratch + q_bytes);
    if (norm.weight) {
        quantize_q8_kernel<true><<<dim3(1, m), kNormThreads, 0, a.stream>>>(x, x_stride, K, norm, *out);
    } else {
        const unsigned blocks = blocks_for(K / 4, kThreads);
        quantize_q8_kernel<false><<<dim3(blocks, m), kThreads, 0, a.stream>>>(x, x_stride, K, norm, *out);
    }
    return true;
}

}  // namespace akunu
