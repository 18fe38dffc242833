// Weight formats as integer decode-GEMV lane work against 8-bit activations
// (act_q8.h), shared by gemv.cuh and gemv_multi.cuh: per format, the block
// geometry, how many lanes share a block, and `dot`, which adds the lane's
// share of one block times each token's activations to its accumulators.
// Four weights and four activations meet in one dp4a; the weight scale, the
// activation scale d and the block sum d * sum(q) (for offsets and mins)
// apply once per block share. Meaning: core/quant_blocks.h.
#pragma once
#include <cstdint>

#include "core/dtype_descriptor.h"
#include "core/half.h"
#include "core/quant_blocks.h"
#include "gemv_formats.cuh"

namespace akunu {
namespace gemv_q8 {

using gemv_formats::ld_u16;
using gemv_formats::ld_u32_from_u16;

constexpr uint32_t kNibbles = 0x0F0F0F0Fu;

__device__ __forceinline__ int dp4a(uint32_t a, int b, int c) { return __dp4a((int)a, b, c); }
__device__ __forceinline__ int dp4a4(const uint32_t* w, int4 x) {
    return dp4a(w[0], x.x, dp4a(w[1], x.y, dp4a(w[2], x.z, dp4a(w[3], x.w, 0))));
}
__device__ __forceinline__ int4 ld_i4(const int8_t* p) { return *reinterpret_cast<const int4*>(p); }

// Every `dot` gets this block's activations of token 0 (xq: its first value,
// ds: its first {d, d * sum}) and the token stride K; token t's are K values
// and K / 32 scales further on.

// The 32-blocks of nibbles: f16 d, [f16 m], [u32 qh: bit j is element j's
// fifth], nibbles at QsAt (byte j: elements j (low) and j + 16 (high));
// x = d * (q - Offset) [+ m]. Q4_0, and Q4_1 / Q5_0 / Q5_1 (llama.cpp's
// fallbacks where a row is not a multiple of 256, e.g. Gemma 3 270M's 640).
// A lane: bytes 8 sub.., 16 weights (elements 8 sub.. and 16 + 8 sub..).
// Without a min or fifth bits the code is Q4_0's alone (the lean kernel's
// 32-register budget: checked with ptxas).
template <int Bytes, int QhAt, int QsAt, bool HasMin, int Offset>
struct Nibble32 {
    static constexpr int kElems = 32, kBytes = Bytes, kLanes = 2, kInFlight = 1;
    // Bits 0..3 of n as bit 4 of bytes 0..3 (the fifth bits of four values).
    __device__ static uint32_t fifth_bits(uint32_t n) { return (((n & 0xFu) * 0x00204081u) & 0x01010101u) << 4; }
    struct Regs {
        uint32_t dm, q0, q1, qh;  // d (and m above it), the lane's 8 nibble bytes, the fifth bits
    };
    __device__ static Regs load(const uint8_t* blk, int sub) {
        Regs r;
        r.dm = HasMin ? ld_u32_from_u16(blk) : ld_u16(blk);
        r.q0 = ld_u32_from_u16(blk + QsAt + 8 * sub);
        r.q1 = ld_u32_from_u16(blk + QsAt + 4 + 8 * sub);
        r.qh = 0u;
        if constexpr (QhAt >= 0) r.qh = ld_u32_from_u16(blk + QhAt);
        return r;
    }
    template <int M>
    __device__ static void apply(const Regs& r, int sub, const int8_t* xq, const float2* ds, int K, int m,
                                 float* acc) {
        const float d = f16_to_f32((uint16_t)(r.dm & 0xFFFFu));
        float mn = 0.0f;
        if constexpr (HasMin) mn = f16_to_f32((uint16_t)(r.dm >> 16));
        uint32_t lo0 = r.q0 & kNibbles, lo1 = r.q1 & kNibbles, hi0 = (r.q0 >> 4) & kNibbles, hi1 = (r.q1 >> 4) & kNibbles;
        if constexpr (QhAt >= 0) {
            const uint32_t l = r.qh >> (8 * sub), h = r.qh >> (16 + 8 * sub);
            lo0 |= fifth_bits(l), lo1 |= fifth_bits(l >> 4), hi0 |= fifth_bits(h), hi1 |= fifth_bits(h >> 4);
        }
#pragma unroll
        for (int t = 0; t < M; t++) {
            if (t >= m) break;
            const int8_t* xt = xq + (size_t)t * K + 8 * sub;
            const int2 a = *reinterpret_cast<const int2*>(xt), b = *reinterpret_cast<const int2*>(xt + 16);
            const int s = dp4a(lo0, a.x, dp4a(lo1, a.y, dp4a(hi0, b.x, dp4a(hi1, b.y, 0))));
            const float2 e = ds[(size_t)t * (K / 32)];
            // the offset and the min over this lane's half of the block's d * sum(q)
            if constexpr (HasMin)
                acc[t] += d * (e.x * (float)s - (0.5f * Offset) * e.y) + 0.5f * mn * e.y;
            else
                acc[t] += d * (e.x * (float)s - (0.5f * Offset) * e.y);
        }
    }
};
using Q4_0 = Nibble32<18, -1, 2, false, 8>;
using Q4_1 = Nibble32<20, -1, 4, true, 0>;
using Q5_0 = Nibble32<22, 2, 6, false, 16>;
using Q5_1 = Nibble32<24, 4, 8, true, 0>;

struct Q8_0 {
    static constexpr int kElems = 32, kBytes = 34, kLanes = 2, kInFlight = 4;  // a lane: 16 weights
    struct Regs {
        uint32_t d, w[4];
    };
    __device__ static Regs load(const uint8_t* blk, int sub) {
        Regs r;
        r.d = ld_u16(blk);
#pragma unroll
        for (int i = 0; i < 4; i++) r.w[i] = ld_u32_from_u16(blk + 2 + 16 * sub + 4 * i);
        return r;
    }
    template <int M>
    __device__ static void apply(const Regs& r, int sub, const int8_t* xq, const float2* ds, int K, int m,
                                 float* acc) {
        const float d = f16_to_f32((uint16_t)r.d);
#pragma unroll
        for (int t = 0; t < M; t++) {
            if (t >= m) break;
            const int s = dp4a4(r.w, ld_i4(xq + (size_t)t * K + 16 * sub));
            acc[t] += d * ds[(size_t)t * (K / 32)].x * (float)s;
        }
    }
};

// MXFP4 (layout: gemv_formats::MXFP4): the codes looked up as int8 for dp4a,
// times half the E8M0 scale. A lane: bytes 8 sub.., 16 weights (elements
// 8 sub.. and 16 + 8 sub..), read a byte at a time (blocks at any offset).
struct MXFP4 {
    static constexpr int kElems = 32, kBytes = 17, kLanes = 2, kInFlight = 1;
    struct Regs {
        uint32_t e, q0, q1;
    };
    __device__ static Regs load(const uint8_t* blk, int sub) {
        return Regs{blk[0], gemv_formats::ld_u32_bytes(blk + 1 + 8 * sub), gemv_formats::ld_u32_bytes(blk + 5 + 8 * sub)};
    }
    template <int M>
    __device__ static void apply(const Regs& r, int sub, const int8_t* xq, const float2* ds, int K, int m,
                                 float* acc) {
        const float d = blocks::e8m0_half(r.e);
        const uint32_t lo0 = gemv_formats::mxfp4_lut4(r.q0 & kNibbles), lo1 = gemv_formats::mxfp4_lut4(r.q1 & kNibbles);
        const uint32_t hi0 = gemv_formats::mxfp4_lut4((r.q0 >> 4) & kNibbles);
        const uint32_t hi1 = gemv_formats::mxfp4_lut4((r.q1 >> 4) & kNibbles);
#pragma unroll
        for (int t = 0; t < M; t++) {
            if (t >= m) break;
            const int8_t* xt = xq + (size_t)t * K + 8 * sub;
            const int2 a = *reinterpret_cast<const int2*>(xt), b = *reinterpret_cast<const int2*>(xt + 16);
            const int s = dp4a(lo0, a.x, dp4a(lo1, a.y, dp4a(hi0, b.x, dp4a(hi1, b.y, 0))));
            acc[t] += d * ds[(size_t)t * (K / 32)].x * (float)s;
        }
    }
};

// Q4_K (layout: gemv_formats::Q4_K).
struct Q4_K {
    static constexpr int kElems = 256, kBytes = 144, kLanes = 8, kInFlight = 1;  // a lane: 16 bytes, 32 weights
    struct Regs {
        uint4 head, q;  // d, dmin and the packed scales; the lane's nibbles
    };
    __device__ static Regs load(const uint8_t* blk, int sub) {
        const int g = sub / 2, o = 16 * (sub % 2);
        return Regs{*reinterpret_cast<const uint4*>(blk), *reinterpret_cast<const uint4*>(blk + 16 + 32 * g + o)};
    }
    template <int M>
    __device__ static void apply(const Regs& r, int sub, const int8_t* xq, const float2* ds, int K, int m,
                                 float* acc) {
        const int g = sub / 2, o = 16 * (sub % 2);
        const gemv_formats::Q4KGroup s = gemv_formats::q4k_group(r.head, g);
        const uint4 q = r.q;
        const uint32_t lo[4] = {q.x & kNibbles, q.y & kNibbles, q.z & kNibbles, q.w & kNibbles};
        const uint32_t hi[4] = {(q.x >> 4) & kNibbles, (q.y >> 4) & kNibbles, (q.z >> 4) & kNibbles,
                                (q.w >> 4) & kNibbles};
        const float m_lo = 0.5f * s.m_lo, m_hi = 0.5f * s.m_hi;  // the min over this lane's half of the 32
#pragma unroll
        for (int t = 0; t < M; t++) {
            if (t >= m) break;
            const int8_t* xt = xq + (size_t)t * K + 64 * g + o;
            const int sl = dp4a4(lo, ld_i4(xt)), sh = dp4a4(hi, ld_i4(xt + 32));
            const float2 el = ds[(size_t)t * (K / 32) + 2 * g], eh = ds[(size_t)t * (K / 32) + 2 * g + 1];
            acc[t] += s.d_lo * el.x * (float)sl + s.d_hi * eh.x * (float)sh - m_lo * el.y - m_hi * eh.y;
        }
    }
};

// Q4_0_X8 / Q8_0_X8 (dtype_descriptor.h): 8 blocks a group, scales first;
// a lane a block: its d, then its quants in one (Q4_0) or two (Q8_0) aligned
// 16-byte loads, where the GGUF layouts take 2-byte loads.
struct Q4_0X8 {
    static constexpr int kElems = 256, kBytes = 144, kLanes = 8, kInFlight = 1;  // a lane: block `sub` of the group
    struct Regs {
        uint32_t d;
        uint4 q;
    };
    __device__ static Regs load(const uint8_t* grp, int sub) {
        return Regs{ld_u16(grp + 2 * sub), *reinterpret_cast<const uint4*>(grp + 16 + 16 * sub)};
    }
    template <int M>
    __device__ static void apply(const Regs& r, int sub, const int8_t* xq, const float2* ds, int K, int m,
                                 float* acc) {
        const float d = f16_to_f32((uint16_t)r.d);
        const uint4 q = r.q;
        const uint32_t lo[4] = {q.x & kNibbles, q.y & kNibbles, q.z & kNibbles, q.w & kNibbles};
        const uint32_t hi[4] = {(q.x >> 4) & kNibbles, (q.y >> 4) & kNibbles, (q.z >> 4) & kNibbles,
                                (q.w >> 4) & kNibbles};
#pragma unroll
        for (int t = 0; t < M; t++) {
            if (t >= m) break;
            const int8_t* xt = xq + (size_t)t * K + 32 * sub;  // low nibbles: elements 0..15, high: 16..31
            const int s = dp4a4(lo, ld_i4(xt)) + dp4a4(hi, ld_i4(xt + 16));
            const float2 e = ds[(size_t)t * (K / 32) + sub];
            acc[t] += d * (e.x * (float)s - 8.0f * e.y);
        }
    }
};

struct Q8_0X8 {
    static constexpr int kElems = 256, kBytes = 272, kLanes = 8, kInFlight = 2;  // a lane: block `sub` of the group
    struct Regs {
        uint32_t d;
        uint4 q0, q1;
    };
    __device__ static Regs load(const uint8_t* grp, int sub) {
        return Regs{ld_u16(grp + 2 * sub), *reinterpret_cast<const uint4*>(grp + 16 + 32 * sub),
                    *reinterpret_cast<const uint4*>(grp + 32 + 32 * sub)};
    }
    template <int M>
    __device__ static void apply(const Regs& r, int sub, const int8_t* xq, const float2* ds, int K, int m,
                                 float* acc) {
        const float d = f16_to_f32((uint16_t)r.d);
        const uint32_t w0[4] = {r.q0.x, r.q0.y, r.q0.z, r.q0.w}, w1[4] = {r.q1.x, r.q1.y, r.q1.z, r.q1.w};
#pragma unroll
        for (int t = 0; t < M; t++) {
            if (t >= m) break;
            const int8_t* xt = xq + (size_t)t * K + 32 * sub;
            const int s = dp4a4(w0, ld_i4(xt)) + dp4a4(w1, ld_i4(xt + 16));
            acc[t] += d * ds[(size_t)t * (K / 32) + sub].x * (float)s;
        }
    }
};

// Bytes b - 32 of four 6-bit values (0..63), as signed bytes: no borrow
// crosses a byte once each has its top bit set.
__device__ __forceinline__ uint32_t minus32(uint32_t w) { return ((w | 0x80808080u) - 0x20202020u) ^ 0x80808080u; }

// Q6_K: ql[128] low nibbles, qh[64] two high bits, int8 scales[16], f16 d.
// Half n (128 elements) at l: ql[64n + l] and ql[64n + 32 + l] give elements
// 128n + {0, 64} + l and 128n + {32, 96} + l through low / high nibbles.
struct Q6_K {
    static constexpr int kElems = 256, kBytes = 210, kLanes = 16, kInFlight = 1;  // a lane: 4 positions l, 16 weights
    struct Regs {
        uint32_t qa, qb, qh;  // elements 128n + {0, 64} + l; 128n + {32, 96} + l; their high bits
        uint32_t sc;          // the int8 scales 2j of the lane's half (bytes j = 0..3)
        uint32_t d;
    };
    __device__ static Regs load(const uint8_t* blk, int sub) {
        const int n = sub / 8, l0 = 4 * (sub % 8);
        const uint8_t* sc = blk + 192 + 8 * n + l0 / 16;
        Regs r;
        r.qa = ld_u32_from_u16(blk + 64 * n + l0);
        r.qb = ld_u32_from_u16(blk + 64 * n + 32 + l0);
        r.qh = ld_u32_from_u16(blk + 128 + 32 * n + l0);
        r.sc = (uint32_t)sc[0] | (uint32_t)sc[2] << 8 | (uint32_t)sc[4] << 16 | (uint32_t)sc[6] << 24;
        r.d = ld_u16(blk + 208);
        return r;
    }
    template <int M>
    __device__ static void apply(const Regs& r, int sub, const int8_t* xq, const float2* ds, int K, int m,
                                 float* acc) {
        const int n = sub / 8, l0 = 4 * (sub % 8);
        const uint32_t qa = r.qa, qb = r.qb, qh = r.qh;
        const float d = f16_to_f32((uint16_t)r.d);
        const float s[4] = {d * (float)(int8_t)(r.sc & 0xFF), d * (float)(int8_t)(r.sc >> 8),
                            d * (float)(int8_t)(r.sc >> 16), d * (float)(int8_t)(r.sc >> 24)};
        const uint32_t w[4] = {minus32((qa & kNibbles) | ((qh << 4) & 0x30303030u)),
                               minus32((qb & kNibbles) | ((qh << 2) & 0x30303030u)),
                               minus32(((qa >> 4) & kNibbles) | (qh & 0x30303030u)),
                               minus32(((qb >> 4) & kNibbles) | ((qh >> 2) & 0x30303030u))};
#pragma unroll
        for (int t = 0; t < M; t++) {
            if (t >= m) break;
            const int8_t* xt = xq + (size_t)t * K + 128 * n + l0;
            const float2* et = ds + (size_t)t * (K / 32) + 4 * n;
            float v = 0.0f;
#pragma unroll
            for (int j = 0; j < 4; j++)
                v += s[j] * et[j].x * (float)dp4a(w[j], *reinterpret_cast<const int*>(xt + 32 * j), 0);
            acc[t] += v;
        }
    }
};

// Q6_K_X8 (dtype_descriptor.h): 8 Q6_K blocks as [ql x 8][qh x 8][scales x 8]
// [d x 8], every part 16-byte aligned. A lane: block sub / 4, half n, 16
// positions l = 16 k.. of that half: its quants are three aligned 16-byte
// loads (GGUF's Q6_K above: six 2-byte ones for a quarter of the weights),
// 64 weights in four runs of 16 (one scale each, j = 0..3 at 32 j).
struct Q6_KX8 {
    static constexpr int kElems = 2048, kBytes = 1680, kLanes = 32, kInFlight = 1;
    struct Regs {
        uint4 qa, qb, qh;  // j = 0 low, 2 high; j = 1 low, 3 high; the high bits
        uint2 sc8;         // scales 8n .. 8n + 7 of block i
        uint32_t d;
    };
    __device__ static Regs load(const uint8_t* grp, int sub) {
        const int i = sub / 4, n = (sub / 2) % 2, k = sub % 2;
        return Regs{*reinterpret_cast<const uint4*>(grp + 128 * i + 64 * n + 16 * k),
                    *reinterpret_cast<const uint4*>(grp + 128 * i + 64 * n + 32 + 16 * k),
                    *reinterpret_cast<const uint4*>(grp + 1024 + 64 * i + 32 * n + 16 * k),
                    *reinterpret_cast<const uint2*>(grp + 1536 + 16 * i + 8 * n), ld_u16(grp + 1664 + 2 * i)};
    }
    template <int M>
    __device__ static void apply(const Regs& r, int sub, const int8_t* xq, const float2* ds, int K, int m,
                                 float* acc) {
        const int i = sub / 4, n = (sub / 2) % 2, k = sub % 2;
        const uint2 sc8 = r.sc8;
        const float d = f16_to_f32((uint16_t)r.d);
        // scale of run j: byte 2j + k of sc8
        const float s[4] = {d * (float)(int8_t)(sc8.x >> (8 * k)), d * (float)(int8_t)(sc8.x >> (8 * k + 16)),
                            d * (float)(int8_t)(sc8.y >> (8 * k)), d * (float)(int8_t)(sc8.y >> (8 * k + 16))};
        const uint32_t a[4] = {r.qa.x, r.qa.y, r.qa.z, r.qa.w}, b[4] = {r.qb.x, r.qb.y, r.qb.z, r.qb.w};
        const uint32_t h[4] = {r.qh.x, r.qh.y, r.qh.z, r.qh.w};
        // run by run: one run's 16 weights decoded at a time, fewer registers
        // live than all four at once
#pragma unroll
        for (int j = 0; j < 4; j++) {
            uint32_t w[4];
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const uint32_t q = j % 2 ? b[e] : a[e];
                const uint32_t hj = j == 0 ? h[e] << 4 : j == 1 ? h[e] << 2 : j == 2 ? h[e] : h[e] >> 2;
                w[e] = minus32(((j < 2 ? q : q >> 4) & kNibbles) | (hj & 0x30303030u));
            }
#pragma unroll
            for (int t = 0; t < M; t++) {
                if (t >= m) break;
                const int8_t* xt = xq + (size_t)t * K + 256 * i + 128 * n + 16 * k + 32 * j;
                const float e = ds[(size_t)t * (K / 32) + 8 * i + 4 * n + j].x;
                acc[t] += s[j] * e * (float)dp4a4(w, ld_i4(xt));
            }
        }
    }
};

// Whether `dtype` has a lane layout here.
inline bool has_q8_layout(uint32_t dtype) {
    return dtype == GGML_Q4_0 || dtype == GGML_Q8_0 || dtype == GGML_Q4_K || dtype == GGML_Q6_K ||
           dtype == AKUNU_Q4_0_X8 || dtype == AKUNU_Q8_0_X8 || dtype == AKUNU_Q6_K_X8 || dtype == GGML_Q4_1 ||
           dtype == GGML_Q5_0 || dtype == GGML_Q5_1;
}

// Row steps a warp keeps in flight, their weight loads issued together
// (F::kInFlight): 4 for Q8_0 (16-byte lane steps), 2 for Q8_0_X8 (32), 1
// (a step's load, then its dot) for the rest: Q8_0's short lane steps gain
// from more loads in flight, while batching the others' steps costs the
// registers that keep a block more resident on each SM.
template <class F>
__host__ __device__ constexpr int steps_in_flight() {
    return F::kInFlight;
}

// One row's dot products with the m tokens' 8-bit activations, the warp's
// lanes splitting the row (acc is per lane: the caller reduces over the warp).
// With parts > 1 the row is split among that many warps, interleaved by warp
// steps (each warp's step still reads one contiguous span): this warp does
// part `part`, and the caller adds the parts.
// Each batch of steps_in_flight<F>() steps issues every weight load before
// the first dot product. A loop of load-and-dot steps, even unrolled, had
// each step wait on its own load (its trip count is known only at run
// time: the SASS checked each bound between steps), so a warp kept one 16-byte
// load a lane in flight; rows of 2 to 4 steps (Llama-3.2-1B's K = 2048) were
// latency-bound on it.
template <class F, int M>
__device__ __forceinline__ void row_dot(const uint8_t* row, int K, const int8_t* xq, const float2* ds, int m,
                                        float* acc, int part = 0, int parts = 1) {
    constexpr int kBlocksPerStep = 32 / F::kLanes, kInFlight = steps_in_flight<F>();
    const int lane = threadIdx.x % 32;
    const int nb = K / F::kElems, sub = lane % F::kLanes, stride = parts * kBlocksPerStep;
    for (int b = lane / F::kLanes + part * kBlocksPerStep; b < nb; b += kInFlight * stride) {
        typename F::Regs r[kInFlight];
#pragma unroll
        for (int i = 0; i < kInFlight; i++)
            if (b + i * stride < nb) r[i] = F::load(row + (size_t)(b + i * stride) * F::kBytes, sub);
#pragma unroll
        for (int i = 0; i < kInFlight; i++) {
            const int bi = b + i * stride;
            if (bi < nb)
                F::template apply<M>(r[i], sub, xq + (size_t)bi * F::kElems, ds + (size_t)bi * (F::kElems / 32), K,
                                     m, acc);
        }
    }
}

// Two rows of one format against the same x (gate and up): each step loads
// both rows' weights, then the two dots read x's values once between them
// (the same loads, which the compiler merges). The lean gate + up GEMV at
// Llama-3.2-1B's shape was bound by its load / store pipe (ncu: SM 72% busy,
// DRAM 23%), where a warp a matrix row loads x twice for every output row.
template <class F>
__device__ __forceinline__ void row_dot_pair(const uint8_t* row0, const uint8_t* row1, int K, const int8_t* xq,
                                             const float2* ds, float* acc0, float* acc1) {
    constexpr int kBlocksPerStep = 32 / F::kLanes;
    const int lane = threadIdx.x % 32;
    const int nb = K / F::kElems, sub = lane % F::kLanes;
#pragma unroll 1  // (unrolled, the lean kernels' register budgets spilled)
    for (int b = lane / F::kLanes; b < nb; b += kBlocksPerStep) {
        const typename F::Regs r0 = F::load(row0 + (size_t)b * F::kBytes, sub);
        const typename F::Regs r1 = F::load(row1 + (size_t)b * F::kBytes, sub);
        const int8_t* x = xq + (size_t)b * F::kElems;
        const float2* d = ds + (size_t)b * (F::kElems / 32);
        F::template apply<1>(r0, sub, x, d, K, 1, acc0);
        F::template apply<1>(r1, sub, x, d, K, 1, acc1);
    }
}

// row_dot for a format chosen at run time (has_q8_layout(dtype) holds).
template <int M>
__device__ __forceinline__ void any_row_dot(uint32_t dtype, const uint8_t* row, int K, const int8_t* xq,
                                            const float2* ds, int m, float* acc, int part = 0, int parts = 1) {
    switch (dtype) {
        case GGML_Q4_0: row_dot<Q4_0, M>(row, K, xq, ds, m, acc, part, parts); break;
        case GGML_Q8_0: row_dot<Q8_0, M>(row, K, xq, ds, m, acc, part, parts); break;
        case GGML_Q4_K: row_dot<Q4_K, M>(row, K, xq, ds, m, acc, part, parts); break;
        case AKUNU_Q4_0_X8: row_dot<Q4_0X8, M>(row, K, xq, ds, m, acc, part, parts); break;
        case AKUNU_Q8_0_X8: row_dot<Q8_0X8, M>(row, K, xq, ds, m, acc, part, parts); break;
        case AKUNU_Q6_K_X8: row_dot<Q6_KX8, M>(row, K, xq, ds, m, acc, part, parts); break;
        case GGML_Q4_1: row_dot<Q4_1, M>(row, K, xq, ds, m, acc, part, parts); break;
        case GGML_Q5_0: row_dot<Q5_0, M>(row, K, xq, ds, m, acc, part, parts); break;
        case GGML_Q5_1: row_dot<Q5_1, M>(row, K, xq, ds, m, acc, part, parts); break;
        default: row_dot<Q6_K, M>(row, K, xq, ds, m, acc, part, parts); break;
    }
}

}  // namespace gemv_q8
}  // namespace akunu
