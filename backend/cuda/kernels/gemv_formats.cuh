// Weight formats as decode-GEMV lane work (shared by gemv.cuh and gemv_multi.cuh):
// per format, the block geometry, how many lanes share a block, and `dot`,
// which adds a lane's share of one block times the activations to its
// per-token accumulators. Meaning: core/quant_blocks.h (the CPU twin's decoders).
//
// Integers become floats without the I2F unit: OR-ing a small integer into
// the mantissa of 2^23 and subtracting 2^23 (plus the format's offset) is
// exact and runs on the FP32 pipes.
#pragma once
#include <cstdint>

#include "core/half.h"
#include "core/quant_blocks.h"

namespace akunu {
namespace gemv_formats {

__device__ __forceinline__ uint32_t ld_u16(const uint8_t* p) { return *reinterpret_cast<const uint16_t*>(p); }
__device__ __forceinline__ uint32_t ld_u32_from_u16(const uint8_t* p) { return ld_u16(p) | (ld_u16(p + 2) << 16); }
__device__ __forceinline__ float4 ld_x4(const float* p) { return *reinterpret_cast<const float4*>(p); }

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
// Group g's weights are d_lo * q - m_lo (low nibbles), d_hi * q - m_hi (high).
struct Q4KGroup {
    float d_lo, m_lo, d_hi, m_hi;
};
// Sub-blocks 2g and 2g + 1 of a Q4_K block (16-byte aligned): d, dmin and
// the 12 packed scale bytes are its first 16 bytes, one load; the two 6-bit
// scales and mins come out of the words by shifts and masks, the same for
// every g (blocks::q4k_scale_min's byte reads branch on the sub-block, so
// a warp's lanes of different g split there).
__device__ __forceinline__ Q4KGroup q4k_group(const uint4 head, int g) {
    const float d = f16_to_f32((uint16_t)(head.x & 0xFFFF)), dmin = f16_to_f32((uint16_t)(head.x >> 16));
    const int sh = 16 * (g % 2);  // this g's byte pair within a scale word
    const uint32_t s0 = head.y >> sh, s1 = head.z >> sh, s2 = head.w >> sh;
    // sub-blocks 0..3: the low 6 bits of bytes j (scale) and j + 4 (min);
    // 4..7: the nibbles of byte j + 4 below the top 2 bits of bytes j - 4 / j
    const uint32_t sc = g < 2 ? s0 & 0x3F3Fu : (s2 & 0x0F0Fu) | ((s0 >> 2) & 0x3030u);
    const uint32_t mn = g < 2 ? s1 & 0x3F3Fu : ((s2 >> 4) & 0x0F0Fu) | ((s1 >> 2) & 0x3030u);
    return Q4KGroup{d * (float)(sc & 0xFF), dmin * (float)(mn & 0xFF), d * (float)((sc >> 8) & 0xFF),
                    dmin * (float)((mn >> 8) & 0xFF)};
}
__device__ __forceinline__ Q4KGroup q4k_group(const uint8_t* blk, int g) {
    return q4k_group(*reinterpret_cast<const uint4*>(blk), g);
}

struct Q4_K {
    static constexpr int kElems = 256, kBytes = 144, kLanes = 16;  // a lane: 8 bytes, 16 weights
    template <int M>
    __device__ static void dot(const uint8_t* blk, int sub, const float* x, uint32_t xs, int m, float* acc) {
        const int g = sub / 4, o = 8 * (sub % 4);
        const Q4KGroup s = q4k_group(blk, g);
        const uint2 q = *reinterpret_cast<const uint2*>(blk + 16 + 32 * g + o);
        float lo[8], hi[8];
#pragma unroll
        for (int i = 0; i < 4; i++) {
            lo[i] = small_int((q.x >> (8 * i)) & 0xF, 0.0f);
            hi[i] = small_int((q.x >> (8 * i + 4)) & 0xF, 0.0f);
            lo[4 + i] = small_int((q.y >> (8 * i)) & 0xF, 0.0f);
            hi[4 + i] = small_int((q.y >> (8 * i + 4)) & 0xF, 0.0f);
        }
#pragma unroll
        for (int t = 0; t < M; t++) {
            if (t >= m) break;
            const float* xl = x + (size_t)t * xs + 64 * g + o;
            const float4 a0 = ld_x4(xl), a1 = ld_x4(xl + 4), b0 = ld_x4(xl + 32), b1 = ld_x4(xl + 36);
            const float qa = dot4(lo[0], lo[1], lo[2], lo[3], a0) + dot4(lo[4], lo[5], lo[6], lo[7], a1);
            const float qb = dot4(hi[0], hi[1], hi[2], hi[3], b0) + dot4(hi[4], hi[5], hi[6], hi[7], b1);
            const float sa = a0.x + a0.y + a0.z + a0.w + a1.x + a1.y + a1.z + a1.w;
            const float sb = b0.x + b0.y + b0.z + b0.w + b1.x + b1.y + b1.z + b1.w;
            acc[t] += s.d_lo * qa - s.m_lo * sa + s.d_hi * qb - s.m_hi * sb;
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

// Four bytes at any address, as a little-endian word: MXFP4's 17-byte blocks
// put its quants at every byte offset (llama.cpp reads them so too), and
// byte loads read nothing past the bytes asked for.
__device__ __forceinline__ uint32_t ld_u32_bytes(const uint8_t* p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

// The doubled E2M1 values (blocks::kMXFP4Values) of four MXFP4 codes, one in
// bits 0..3 of each byte of idx, as four int8 in one word: two byte permutes
// pick each code's value among codes 0..7 and among their negatives 8..15,
// then bit 3 of the code chooses between them.
__device__ __forceinline__ uint32_t mxfp4_lut4(uint32_t idx) {
    const uint32_t sel = (idx & 0x7u) | ((idx >> 4) & 0x70u) | ((idx >> 8) & 0x700u) | ((idx >> 12) & 0x7000u);
    const uint32_t pos = __byte_perm(0x03020100u, 0x0C080604u, sel);  // 0 1 2 3 | 4 6 8 12
    const uint32_t neg = __byte_perm(0xFDFEFF00u, 0xF4F8FAFCu, sel);  // 0 -1 -2 -3 | -4 -6 -8 -12
    const uint32_t m = ((idx >> 3) & 0x01010101u) * 0xFFu;
    return (pos & ~m) | (neg & m);
}

// MXFP4: an E8M0 byte e, then nibbles q[16] as Q4_0's (low: elements 0..15,
// high: 16..31); x = 2^(e - 128) * kMXFP4Values[q] (core/quant_blocks.h).
struct MXFP4 {
    static constexpr int kElems = 32, kBytes = 17, kLanes = 4;  // a lane: 4 bytes, 8 weights
    template <int M>
    __device__ static void dot(const uint8_t* blk, int sub, const float* x, uint32_t xs, int m, float* acc) {
        const float d = blocks::e8m0_half(blk[0]);
        const uint32_t q = ld_u32_bytes(blk + 1 + 4 * sub);
        const uint32_t vl = mxfp4_lut4(q & 0x0F0F0F0Fu), vh = mxfp4_lut4((q >> 4) & 0x0F0F0F0Fu);
        float lo[4], hi[4];
#pragma unroll
        for (int i = 0; i < 4; i++) {  // int8 -> biased by 128 -> exact float
            lo[i] = small_int(((vl >> (8 * i)) & 0xFF) ^ 0x80, 128.0f);
            hi[i] = small_int(((vh >> (8 * i)) & 0xFF) ^ 0x80, 128.0f);
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

// 16 weight bytes read once: not kept in L1 (x, read by every warp, stays).
// No "memory" clobber: the compiler may move it, even above pdl_wait, which
// is safe for weights alone (they never change during a step).
__device__ __forceinline__ uint4 ld_stream_u4(const uint8_t* p) {
    uint4 v;
    asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
        : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
        : "l"(p));
    return v;
}

// Half-precision and float rows: a lane's "block" is 16 bytes, `load`ed then
// `apply`ed to one token's x (the lean kernel issues a few loads first).
// Stream: the weights bypass L1 (ld_stream_u4).
template <bool Bf16, bool Stream = false>
struct Half {
    static constexpr int kElems = 8, kBytes = 16, kLanes = 1;
    __device__ static uint4 load(const uint8_t* blk) {
        return Stream ? ld_stream_u4(blk) : *reinterpret_cast<const uint4*>(blk);
    }
    __device__ static float apply(uint4 w, const float* xt) {
        const uint16_t* h = reinterpret_cast<const uint16_t*>(&w);
        float v[8];
#pragma unroll
        for (int i = 0; i < 8; i++) v[i] = Bf16 ? bf16_to_f32(h[i]) : f16_to_f32(h[i]);
        return dot4(v[0], v[1], v[2], v[3], ld_x4(xt)) + dot4(v[4], v[5], v[6], v[7], ld_x4(xt + 4));
    }
    // (the general kernels' step, written out apart from load / apply: as
    // one, the 128-register general kernel compiled differently)
    template <int M>
    __device__ static void dot(const uint8_t* blk, int, const float* x, uint32_t xs, int m, float* acc) {
        const uint4 w = *reinterpret_cast<const uint4*>(blk);
        const uint16_t* h = reinterpret_cast<const uint16_t*>(&w);
        float v[8];
#pragma unroll
        for (int i = 0; i < 8; i++) v[i] = Bf16 ? bf16_to_f32(h[i]) : f16_to_f32(h[i]);
#pragma unroll
        for (int t = 0; t < M; t++) {
            if (t >= m) break;
            const float* xt = x + (size_t)t * xs;
            acc[t] += dot4(v[0], v[1], v[2], v[3], ld_x4(xt)) + dot4(v[4], v[5], v[6], v[7], ld_x4(xt + 4));
        }
    }
};

struct F32 {
    static constexpr int kElems = 4, kBytes = 16, kLanes = 1;
    __device__ static uint4 load(const uint8_t* blk) { return *reinterpret_cast<const uint4*>(blk); }
    __device__ static float apply(uint4 w, const float* xt) {
        return dot4(__uint_as_float(w.x), __uint_as_float(w.y), __uint_as_float(w.z), __uint_as_float(w.w),
                    ld_x4(xt));
    }
    template <int M>
    __device__ static void dot(const uint8_t* blk, int, const float* x, uint32_t xs, int m, float* acc) {
        const float4 w = *reinterpret_cast<const float4*>(blk);
#pragma unroll
        for (int t = 0; t < M; t++) {
            if (t >= m) break;
            acc[t] += dot4(w.x, w.y, w.z, w.w, ld_x4(x + (size_t)t * xs));
        }
    }
};

// One token's dot of a float-format row (kLanes 1) split among `parts` warps
// by warp steps, four steps' loads issued before their arithmetic: with the
// split's stride known only at run time the compiler's own unrolling had
// each step wait on its load in turn.
template <class F>
__device__ __forceinline__ void float_row_dot(const uint8_t* row, int K, const float* x, float* acc, int part,
                                              int parts) {
    static_assert(F::kLanes == 1, "a lane a block");
    const int nb = K / F::kElems, stride = 32 * parts;
    int b = threadIdx.x % 32 + 32 * part;
    for (; b + 3 * stride < nb; b += 4 * stride) {
        uint4 w[4];
#pragma unroll
        for (int i = 0; i < 4; i++) w[i] = F::load(row + (size_t)(b + i * stride) * F::kBytes);
#pragma unroll
        for (int i = 0; i < 4; i++) *acc += F::apply(w[i], x + (size_t)(b + i * stride) * F::kElems);
    }
    for (; b < nb; b += stride) *acc += F::apply(F::load(row + (size_t)b * F::kBytes), x + (size_t)b * F::kElems);
}

// Two float-format rows' dots with the same x (gate and up rows: a warp
// takes both, so x is read once for the two), two steps of each row's loads
// issued before their arithmetic, as many loads in flight as float_row_dot.
template <class F>
__device__ __forceinline__ void float_row_dot_pair(const uint8_t* r0, const uint8_t* r1, int K, const float* x,
                                                   float* acc0, float* acc1) {
    static_assert(F::kLanes == 1, "a lane a block");
    const int nb = K / F::kElems;
    int b = threadIdx.x % 32;
    for (; b + 32 < nb; b += 64) {
        const uint4 w0 = F::load(r0 + (size_t)b * F::kBytes), w1 = F::load(r1 + (size_t)b * F::kBytes);
        const uint4 w2 = F::load(r0 + (size_t)(b + 32) * F::kBytes), w3 = F::load(r1 + (size_t)(b + 32) * F::kBytes);
        *acc0 += F::apply(w0, x + (size_t)b * F::kElems);
        *acc1 += F::apply(w1, x + (size_t)b * F::kElems);
        *acc0 += F::apply(w2, x + (size_t)(b + 32) * F::kElems);
        *acc1 += F::apply(w3, x + (size_t)(b + 32) * F::kElems);
    }
    for (; b < nb; b += 32) {
        *acc0 += F::apply(F::load(r0 + (size_t)b * F::kBytes), x + (size_t)b * F::kElems);
        *acc1 += F::apply(F::load(r1 + (size_t)b * F::kBytes), x + (size_t)b * F::kElems);
    }
}

// One row's dot products with x for the m tokens, the warp's lanes splitting
// the row (acc is per lane: the caller reduces over the warp).
template <class F, int M>
__device__ __forceinline__ void row_dot(const uint8_t* row, int K, const float* x, uint32_t xs, int m, float* acc) {
    constexpr int kBlocksPerStep = 32 / F::kLanes;
    const int lane = threadIdx.x % 32;
    const int nb = K / F::kElems, sub = lane % F::kLanes;
#pragma unroll 4
    for (int b = lane / F::kLanes; b < nb; b += kBlocksPerStep)
        F::template dot<M>(row + (size_t)b * F::kBytes, sub, x + (size_t)b * F::kElems, xs, m, acc);
}

// The sum of v over the warp, in every lane.
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

}  // namespace gemv_formats
}  // namespace akunu
