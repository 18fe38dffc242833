// The rounding of one token's activations to 8 bits (act_q8.h), as device
// code that the rounding kernel (act_q8.cu) and the Q8Link writers that
// round their outputs (the decode attention, gemv_multi.cuh) share, so all
// write the same bytes.
#pragma once
#include <cuda_fp16.h>

#include "act_q8.h"
#include "device_math.cuh"

namespace akunu {

// Token row xr (K values, K % 32 == 0, 16-byte aligned) into q (K int8) and
// ds (K / 32 of {d, d * sum(q)}). Every thread of the block calls it; thread
// `first` of `stride` takes four values at a time, eight threads a 32-value
// block (they are eight aligned lanes of one warp while stride % 32 == 0).
// With norm.weight the row is RMS-normalized first, x * scale * (weight +
// offset): round_row_q8 has the whole block reduce the sum of squares (so the
// caller's grid holds one block per token then); round_row_q8_scaled takes
// the scale (a Q8Link writer sums the squares itself) and with FromL2 reads x
// through L2 (x written by other blocks of the same grid).
template <bool FromL2>
__device__ inline void round_row_q8_scaled(const float* __restrict__ xr, uint32_t K, float scale,
                                           const ActQ8Norm& norm, uint32_t first, uint32_t stride, int8_t* q,
                                           float2* ds) {
    const unsigned group = 0xFFu << (threadIdx.x % 32 & 24u);
    for (uint32_t i = 4 * first; i < K; i += 4 * stride) {
        float4 v = FromL2 ? __ldcg(reinterpret_cast<const float4*>(xr + i)) : *reinterpret_cast<const float4*>(xr + i);
        if (norm.weight) {
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
        *reinterpret_cast<uint32_t*>(q + i) =
            (uint32_t)(q0 & 0xFF) | (uint32_t)(q1 & 0xFF) << 8 | (uint32_t)(q2 & 0xFF) << 16 | (uint32_t)q3 << 24;
        if (i % kQ8Block == 0) {
            // kept to F16 precision, as the CPU's and llama.cpp's Q8 blocks store it
            const float d16 = __half2float(__float2half_rn(d));
            ds[i / kQ8Block] = make_float2(d16, d16 * (float)sum);
        }
    }
}

__device__ inline void round_row_q8(const float* __restrict__ xr, uint32_t K, const ActQ8Norm& norm, uint32_t first,
                                    uint32_t stride, int8_t* q, float2* ds) {
    const float scale = norm.weight ? rms_scale(xr, K, norm.eps) : 1.0f;
    round_row_q8_scaled<false>(xr, K, scale, norm, first, stride, q, ds);
}

// One 32-value block held one value a lane by a whole warp (lane i: value
// i): the same bytes as round_row_q8 writes for it (the same d, reciprocal
// and rounding), to q[0..32) and *ds. Every lane of the warp calls it.
// HalfScale false: d kept in float (values ahead of their norm's scale,
// ActQ8::sumsq, whose size F16 would not bound).
template <bool HalfScale = true>
__device__ inline void round_block32_warp(float v, int8_t* q, float2* ds) {
    float amax = fabsf(v);
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    const int qi = __float2int_rn(v * id);
    int sum = qi;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    const int lane = threadIdx.x % 32;
    q[lane] = (int8_t)qi;
    if (lane == 0) {
        const float d16 = HalfScale ? __half2float(__float2half_rn(d)) : d;
        *ds = make_float2(d16, d16 * (float)sum);
    }
}

// The scale a reader of x applies to its dot products: 1, or where x was
// rounded ahead of its RMSNorm's scale (ActQ8::sumsq) 1 / sqrt(sum(x^2) / K +
// eps), the K / sumsq_rows partial sums added by the warp in a fixed order
// (every warp gets the same float). Every lane of the warp calls it.
__device__ __forceinline__ float act_scale(const ActQ8& x, int K) {
    if (!x.sumsq) return 1.0f;
    float s = 0.0f;
    const int n = K / (int)x.sumsq_rows;
    for (int i = threadIdx.x % 32; i < n; i += 32) s += x.sumsq[i];
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    return 1.0f / sqrtf(s / (float)K + x.eps);
}

}  // namespace akunu
