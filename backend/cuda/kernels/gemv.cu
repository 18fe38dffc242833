// Decode GEMV (a few tokens) for the formats real GGUF models are made of:
// Q4_0, Q8_0, Q4_K and Q6_K. One warp per output row; the warp's lanes split
// each block so that a warp step reads contiguous bytes (coalesced), every
// lane decoding its share straight into registers. The formats' meaning is
// core/quant_blocks.h (the CPU twin dequantizes with it; the per-op tests
// compare against float64 on those dequantized weights).
//
// Integers become floats without the I2F unit: OR-ing a small integer into
// the mantissa of 2^23 and subtracting 2^23 (plus the format's offset) is
// exact and runs on the FP32 pipes.
#include "gemv.h"

#include "core/dtype_descriptor.h"
#include "core/half.h"
#include "core/quant_blocks.h"

namespace akunu {
namespace {

constexpr int kWarpsPerBlock = 4;

__device__ __forceinline__ uint32_t ld_u16(const uint8_t* p) { return *reinterpret_cast<const uint16_t*>(p); }
__device__ __forceinline__ uint32_t ld_u32_from_u16(const uint8_t* p) { return ld_u16(p) | (ld_u16(p + 2) << 16); }
__device__ __forceinline__ float4 ld_x4(const float* p) { return __ldg(reinterpret_cast<const float4*>(p)); }

// v - offset as a float, for 0 <= v < 2^22.
__device__ __forceinline__ float small_int(uint32_t v, float offset) {
    return __int_as_float(0x4B000000u | v) - (8388608.0f + offset);
}

__device__ __forceinline__ float dot4(float a, float b, float c, float d, float4 x) {
    return a * x.x + b * x.y + c * x.z + d * x.w;
}

// Each format: block geometry, lanes per block, and `dot`, which adds the
// lane's share of block `blk` times x (the block's first element) for each
// of the m tokens to acc.
struct Q4_0 {
    static constexpr int kElems = 32, kBytes = 18, kLanes = 4;  // a lane: 4 bytes, 8 weights
    template <int M>
    __device__ static void dot(const uint8_t* blk, int sub, const float* x, uint32_t xs, int m, float* acc) {
        const float d = f16_to_f32((uint16_t)ld_u16(blk));
        const uint32_t q = ld_u32_from_u16(blk + 2 + 4 * sub);
        float lo[4], hi[4];
#pragma unroll
        for (int i = 0; i < 4; i++) {
            lo[i] = small_int((q >> (8 * i)) & 0xF, 8.0f);
            hi[i] = small_int((q >> (8 * i + 4)) & 0xF, 8.0f);
        }
#pragma unroll
        for (int t = 0; t < M; t++) {
            if (t >= m) break;
            const float* xt = x + (size_t)t * xs;
            const float4 a = ld_x4(xt + 4 * sub), b = ld_x4(xt + 16 + 4 * sub);
            acc[t] += d * (dot4(lo[0], lo[1], lo[2], lo[3], a) + dot4(hi[0], hi[1], hi[2], hi[3], b));
        }
    }
};

struct Q8_0 {
    static constexpr int kElems = 32, kBytes = 34, kLanes = 4;  // a lane: 8 weights
    template <int M>
    __device__ static void dot(const uint8_t* blk, int sub, const float* x, uint32_t xs, int m, float* acc) {
        const float d = f16_to_f32((uint16_t)ld_u16(blk));
        const uint32_t q0 = ld_u32_from_u16(blk + 2 + 8 * sub), q1 = ld_u32_from_u16(blk + 6 + 8 * sub);
        float w[8];
#pragma unroll
        for (int i = 0; i < 4; i++) {  // int8 -> biased by 128 -> exact float
            w[i] = small_int(((q0 >> (8 * i)) & 0xFF) ^ 0x80, 128.0f);
            w[4 + i] = small_int(((q1 >> (8 * i)) & 0xFF) ^ 0x80, 128.0f);
        }
#pragma unroll
        for (int t = 0; t < M; t++) {
            if (t >= m) break;
            const float* xt = x + (size_t)t * xs + 8 * sub;
            acc[t] += d * (dot4(w[0], w[1], w[2], w[3], ld_x4(xt)) + dot4(w[4], w[5], w[6], w[7], ld_x4(xt + 4)));
        }
    }
};

// Q4_K: d, dmin, 12 bytes of 6-bit scales/mins, 128 bytes of nibbles; four
// 64-element groups, each 32 low nibbles (scale 2g) then 32 high (2g + 1).
struct Q4_K {
    static constexpr int kElems = 256, kBytes = 144, kLanes = 16;  // a lane: 8 bytes, 16 weights
    template <int M>
    __device__ static void dot(const uint8_t* blk, int sub, const float* x, uint32_t xs, int m, float* acc) {
        const uint32_t dd = *reinterpret_cast<const uint32_t*>(blk);
        const float d = f16_to_f32((uint16_t)(dd & 0xFFFF)), dmin = f16_to_f32((uint16_t)(dd >> 16));
        const int g = sub / 4, o = 8 * (sub % 4);
        uint8_t sc_lo, m_lo, sc_hi, m_hi;
        blocks::q4k_scale_min(2 * g, blk + 4, &sc_lo, &m_lo);
        blocks::q4k_scale_min(2 * g + 1, blk + 4, &sc_hi, &m_hi);
        const uint2 q = *reinterpret_cast<const uint2*>(blk + 16 + 32 * g + o);
        float lo[8], hi[8];
#pragma unroll
        for (int i = 0; i < 4; i++) {
            lo[i] = small_int((q.x >> (8 * i)) & 0xF, 0.0f);
            hi[i] = small_int((q.x >> (8 * i + 4)) & 0xF, 0.0f);
            lo[4 + i] = small_int((q.y >> (8 * i)) & 0xF, 0.0f);
            hi[4 + i] = small_int((q.y >> (8 * i + 4)) & 0xF, 0.0f);
        }
        const float d_lo = d * sc_lo, m_lo_f = dmin * m_lo, d_hi = d * sc_hi, m_hi_f = dmin * m_hi;
#pragma unroll
        for (int t = 0; t < M; t++) {
            if (t >= m) break;
            const float* xl = x + (size_t)t * xs + 64 * g + o;
            const float4 a0 = ld_x4(xl), a1 = ld_x4(xl + 4), b0 = ld_x4(xl + 32), b1 = ld_x4(xl + 36);
            const float qa = dot4(lo[0], lo[1], lo[2], lo[3], a0) + dot4(lo[4], lo[5], lo[6], lo[7], a1);
            const float qb = dot4(hi[0], hi[1], hi[2], hi[3], b0) + dot4(hi[4], hi[5], hi[6], hi[7], b1);
            const float sa = a0.x + a0.y + a0.z + a0.w + a1.x + a1.y + a1.z + a1.w;
            const float sb = b0.x + b0.y + b0.z + b0.w + b1.x + b1.y + b1.z + b1.w;
            acc[t] += d_lo * qa - m_lo_f * sa + d_hi * qb - m_hi_f * sb;
        }
    }
};

// Q6_K: ql[128] low nibbles, qh[64] two high bits, int8 scales[16], f16 d.
// Half n (128 elements) at l: ql[64n + l] and ql[64n + 32 + l] give elements
// 128n + {0, 64} + l and 128n + {32, 96} + l through low / high nibbles.
struct Q6_K {
    static constexpr int kElems = 256, kBytes = 210, kLanes = 16;  // a lane: 4 positions l, 16 weights
    template <int M>
    __device__ static void dot(const uint8_t* blk, int sub, const float* x, uint32_t xs, int m, float* acc) {
        const int n = sub / 8, l0 = 4 * (sub % 8);
        const uint32_t qa = ld_u32_from_u16(blk + 64 * n + l0);       // elements 128n + l, + 64 (high)
        const uint32_t qb = ld_u32_from_u16(blk + 64 * n + 32 + l0);  // elements 128n + 32 + l, + 96
        const uint32_t qh = ld_u32_from_u16(blk + 128 + 32 * n + l0);
        const int8_t* sc = reinterpret_cast<const int8_t*>(blk + 192 + 8 * n + l0 / 16);
        const float d = f16_to_f32((uint16_t)ld_u16(blk + 208));
        const float s0 = d * sc[0], s1 = d * sc[2], s2 = d * sc[4], s3 = d * sc[6];
        float w0[4], w1[4], w2[4], w3[4];
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const uint32_t h = qh >> (8 * i);
            w0[i] = small_int(((qa >> (8 * i)) & 0xF) | ((h & 3) << 4), 32.0f);
            w1[i] = small_int(((qb >> (8 * i)) & 0xF) | (((h >> 2) & 3) << 4), 32.0f);
            w2[i] = small_int(((qa >> (8 * i + 4)) & 0xF) | (((h >> 4) & 3) << 4), 32.0f);
            w3[i] = small_int(((qb >> (8 * i + 4)) & 0xF) | (((h >> 6) & 3) << 4), 32.0f);
        }
#pragma unroll
        for (int t = 0; t < M; t++) {
            if (t >= m) break;
            const float* xl = x + (size_t)t * xs + 128 * n + l0;
            acc[t] += s0 * dot4(w0[0], w0[1], w0[2], w0[3], ld_x4(xl)) +
                      s1 * dot4(w1[0], w1[1], w1[2], w1[3], ld_x4(xl + 32)) +
                      s2 * dot4(w2[0], w2[1], w2[2], w2[3], ld_x4(xl + 64)) +
                      s3 * dot4(w3[0], w3[1], w3[2], w3[3], ld_x4(xl + 96));
        }
    }
};

// y[t, row] = W[row, :] . x[t, :] (+ bias[row]), one warp per row.
template <class F, int M>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    gemv_kernel(MatmulParams p, const uint8_t* __restrict__ W, const float* __restrict__ x, float* __restrict__ y,
                const float* __restrict__ bias) {
    constexpr int kBlocksPerStep = 32 / F::kLanes;
    const int lane = threadIdx.x % 32;
    const int row = blockIdx.x * kWarpsPerBlock + threadIdx.x / 32;
    if (row >= (int)p.N) return;
    const int nb = (int)p.K / F::kElems;
    const uint8_t* wr = W + (size_t)row * nb * F::kBytes;
    const int sub = lane % F::kLanes;
    const int m = (int)p.n_tokens;
    float acc[M];
#pragma unroll
    for (int t = 0; t < M; t++) acc[t] = 0.0f;
#pragma unroll 4
    for (int b = lane / F::kLanes; b < nb; b += kBlocksPerStep)
        F::template dot<M>(wr + (size_t)b * F::kBytes, sub, x + (size_t)b * F::kElems, p.x_stride, m, acc);
#pragma unroll
    for (int t = 0; t < M; t++) {
        if (t >= m) break;
        float v = acc[t];
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        if (lane == 0) y[(size_t)t * p.y_stride + row] = v + (bias ? bias[row] : 0.0f);
    }
}

template <class F>
void launch(const CudaArgs& a, const MatmulParams& p, const float* x, float* y, const float* bias) {
    const unsigned blocks = (p.N + kWarpsPerBlock - 1) / kWarpsPerBlock;
    if (p.n_tokens == 1)
        gemv_kernel<F, 1><<<blocks, kWarpsPerBlock * 32, 0, a.stream>>>(p, a.b<uint8_t>(0), x, y, bias);
    else
        gemv_kernel<F, kGemvMaxTokens><<<blocks, kWarpsPerBlock * 32, 0, a.stream>>>(p, a.b<uint8_t>(0), x, y, bias);
}

}  // namespace

bool launch_gemv(const CudaArgs& a, const MatmulParams& p, const float* x, float* y) {
    if (p.n_tokens == 0 || p.n_tokens > (uint32_t)kGemvMaxTokens) return false;
    // float4 activation loads
    if ((reinterpret_cast<uintptr_t>(x) & 15) != 0 || p.x_stride % 4 != 0) return false;
    const float* bias = p.has_bias ? a.b<float>(3) : nullptr;
    const uintptr_t w = reinterpret_cast<uintptr_t>(a.buf[0]);
    switch (p.dtype) {
        case GGML_Q4_0: if (p.K % 32 || w % 2) return false; launch<Q4_0>(a, p, x, y, bias); return true;
        case GGML_Q8_0: if (p.K % 32 || w % 2) return false; launch<Q8_0>(a, p, x, y, bias); return true;
        case GGML_Q4_K: if (p.K % 256 || w % 16) return false; launch<Q4_K>(a, p, x, y, bias); return true;
        case GGML_Q6_K: if (p.K % 256 || w % 2) return false; launch<Q6_K>(a, p, x, y, bias); return true;
        default: return false;
    }
}

}  // namespace akunu
