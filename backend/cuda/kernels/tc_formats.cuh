// Weight formats for the tensor-core prefill paths, decoded to F16: each is a
// `load` of one 16-element unit (u = 0 or 1) of the 32 elements at k0 from
// global memory into raw registers, and a `store` that decodes those raw
// registers into 16 F16 values at dst + (the unit's place in the 32). Used by
// gemm_tc.cuh (into shared-memory tiles, the loads in flight during the
// previous step's products) and gemm_blas.cu (into a dequantized F16 copy of
// weight rows for cuBLAS). Meaning: core/quant_blocks.h (the CPU twin).
#pragma once
#include <cuda_fp16.h>

#include <cstdint>

#include "gemv_formats.cuh"
#include "mma.cuh"

namespace akunu {
namespace tc_formats {

using gemv_formats::ld_u16;
using gemv_formats::ld_u32_from_u16;
using gemv_formats::small_int;  // exact integer -> float on the FP32 pipes

// Eight floats as eight F16 values in one 16-byte shared-memory store.
__device__ __forceinline__ void store8(__half* dst, const float* v) {
    *reinterpret_cast<uint4*>(dst) = make_uint4(pack_half2(v[0], v[1]), pack_half2(v[2], v[3]),
                                                pack_half2(v[4], v[5]), pack_half2(v[6], v[7]));
}

__device__ __forceinline__ float f16_bits(uint32_t h) { return __half2float(__ushort_as_half((unsigned short)h)); }

// --- formats: load one 16-element unit (u = 0 or 1) of the 32-wide k step at k0, then decode it ---

struct TcF16 {
    static constexpr int kElems = 1, kBytes = 2;
    struct Raw {
        uint4 a, b;
    };
    __device__ static Raw load(const uint8_t* row, int k0, int u) {
        const uint4* p = reinterpret_cast<const uint4*>(row + (size_t)(k0 + 16 * u) * 2);
        return {p[0], p[1]};
    }
    __device__ static void store(const Raw& r, __half* dst, int, int u) {
        reinterpret_cast<uint4*>(dst + 16 * u)[0] = r.a;
        reinterpret_cast<uint4*>(dst + 16 * u)[1] = r.b;
    }
};

struct TcBF16 : TcF16 {
    __device__ static void store(const Raw& r, __half* dst, int, int u) {
        const uint32_t w[8] = {r.a.x, r.a.y, r.a.z, r.a.w, r.b.x, r.b.y, r.b.z, r.b.w};
        float v[16];
#pragma unroll
        for (int i = 0; i < 8; i++) {
            v[2 * i] = __uint_as_float(w[i] << 16);
            v[2 * i + 1] = __uint_as_float(w[i] & 0xFFFF0000u);
        }
        store8(dst + 16 * u, v);
        store8(dst + 16 * u + 8, v + 8);
    }
};

struct TcF32 {
    static constexpr int kElems = 1, kBytes = 4;
    struct Raw {
        float4 v[4];
    };
    __device__ static Raw load(const uint8_t* row, int k0, int u) {
        const float4* p = reinterpret_cast<const float4*>(row + (size_t)(k0 + 16 * u) * 4);
        return {{p[0], p[1], p[2], p[3]}};
    }
    __device__ static void store(const Raw& r, __half* dst, int, int u) {
        const float* v = reinterpret_cast<const float*>(r.v);
        store8(dst + 16 * u, v);
        store8(dst + 16 * u + 8, v + 8);
    }
};

// n (2 or 4) 32-bit words starting at a 2-byte aligned address: aligned
// loads, shifted by 16 bits when the address is not 4-byte aligned (the
// last half-word read alone, so nothing past the bytes asked for is read).
template <int W>
__device__ __forceinline__ void load_words(const uint8_t* p, uint32_t* out) {
    const uintptr_t a = reinterpret_cast<uintptr_t>(p);
    if ((a & 3) == 0) {
#pragma unroll
        for (int i = 0; i < W; i++) out[i] = reinterpret_cast<const uint32_t*>(p)[i];
    } else {
        const uint32_t* w = reinterpret_cast<const uint32_t*>(a - 2);
        uint32_t v[W + 1];
#pragma unroll
        for (int i = 0; i < W; i++) v[i] = w[i];
        v[W] = ld_u16(p + 4 * W - 2);
#pragma unroll
        for (int i = 0; i < W; i++) out[i] = __funnelshift_r(v[i], v[i + 1], 16);
    }
}

// The 32-block formats decode in half pairs: an integer v < 1024 OR-ed into
// the mantissa of 1024.0 (0x6400) is 1024 + v exactly; subtracting the
// offset and multiplying by d (F16) rounds once, to the value the float
// path would round to (d * q is exact in float).
__device__ __forceinline__ uint32_t scaled_pair(uint32_t biased, __half2 offset, __half2 d) {
    return half2_bits(__hmul2(__hsub2(as_half2(biased), offset), d));
}

// A 32-block with an F16 d first (Q8_0, Q4_0): d and W words of quants
// from byte `at` of the block holding element k0.
template <int W>
struct DQuants {
    uint32_t d, q[W];
};
template <int W, int Bytes>
__device__ __forceinline__ DQuants<W> load_d_quants(const uint8_t* row, int k0, int at) {
    const uint8_t* blk = row + (size_t)(k0 / 32) * Bytes;
    DQuants<W> r;
    r.d = ld_u16(blk);
    load_words<W>(blk + at, r.q);
    return r;
}

// Q8_0: f16 d, int8 q[32]; a unit is q[16u .. 16u + 16).
struct TcQ8_0 {
    static constexpr int kElems = 32, kBytes = 34;
    using Raw = DQuants<4>;
    __device__ static Raw load(const uint8_t* row, int k0, int u) { return load_d_quants<4, kBytes>(row, k0, 2 + 16 * u); }
    __device__ static void store(const Raw& r, __half* dst, int, int u) {
        const __half2 d = __half2half2(__ushort_as_half((unsigned short)r.d));
        const __half2 offset = __float2half2_rn(1152.0f);  // 1024 + the 128 of int8 -> biased byte
        uint32_t h[8];
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const uint32_t b = r.q[i] ^ 0x80808080u;  // bytes q + 128
            h[2 * i] = scaled_pair(__byte_perm(b, 0x64646464u, 0x4140), offset, d);
            h[2 * i + 1] = scaled_pair(__byte_perm(b, 0x64646464u, 0x4342), offset, d);
        }
        reinterpret_cast<uint4*>(dst + 16 * u)[0] = make_uint4(h[0], h[1], h[2], h[3]);
        reinterpret_cast<uint4*>(dst + 16 * u)[1] = make_uint4(h[4], h[5], h[6], h[7]);
    }
};

// Q4_0: f16 d, nibbles q[16] (low: elements 0..15, high: 16..31); a unit is
// bytes q[8u .. 8u + 8): elements 8u.. (low) and 16 + 8u.. (high).
struct TcQ4_0 {
    static constexpr int kElems = 32, kBytes = 18;
    using Raw = DQuants<2>;
    __device__ static Raw load(const uint8_t* row, int k0, int u) { return load_d_quants<2, kBytes>(row, k0, 2 + 8 * u); }
    __device__ static void store(const Raw& r, __half* dst, int, int u) {
        const __half2 d = __half2half2(__ushort_as_half((unsigned short)r.d));
        const __half2 offset = __float2half2_rn(1032.0f);  // 1024 + the 8 of the format
        uint32_t lo[4], hi[4];
#pragma unroll
        for (int i = 0; i < 2; i++)
#pragma unroll
            for (int j = 0; j < 2; j++) {  // bytes 2j, 2j + 1 of word i, one per half
                const uint32_t t = __byte_perm(r.q[i], 0, j ? 0x4342 : 0x4140);
                lo[2 * i + j] = scaled_pair((t & 0x000F000Fu) | 0x64006400u, offset, d);
                hi[2 * i + j] = scaled_pair(((t >> 4) & 0x000F000Fu) | 0x64006400u, offset, d);
            }
        *reinterpret_cast<uint4*>(dst + 8 * u) = make_uint4(lo[0], lo[1], lo[2], lo[3]);
        *reinterpret_cast<uint4*>(dst + 16 + 8 * u) = make_uint4(hi[0], hi[1], hi[2], hi[3]);
    }
};

// Q4_0_X8 / Q8_0_X8 (dtype_descriptor.h): the same units from the regrouped
// layout, where block j of a 256-weight group has its d at 2j and its quants
// (16-byte aligned) at 16 + j * QBytes.
template <int W, int SuperBytes, int QBytes>
__device__ __forceinline__ DQuants<W> load_x8_d_quants(const uint8_t* row, int k0, int at) {
    const uint8_t* group = row + (size_t)(k0 / 256) * SuperBytes;
    const int j = (k0 % 256) / 32;
    DQuants<W> r;
    r.d = ld_u16(group + 2 * j);
    load_words<W>(group + 16 + QBytes * j + at, r.q);
    return r;
}
struct TcQ8_0X8 : TcQ8_0 {
    static constexpr int kElems = 256, kBytes = 272;
    __device__ static Raw load(const uint8_t* row, int k0, int u) { return load_x8_d_quants<4, kBytes, 32>(row, k0, 16 * u); }
};
struct TcQ4_0X8 : TcQ4_0 {
    static constexpr int kElems = 256, kBytes = 144;
    __device__ static Raw load(const uint8_t* row, int k0, int u) { return load_x8_d_quants<2, kBytes, 16>(row, k0, 8 * u); }
};

// Q4_1 / Q5_0 / Q5_1 (gemv_q8_formats.cuh's Nibble32): Q4_0's units, the
// fifth bits from qh, x = d * (q - Offset) [+ m] in float, rounded to F16 once.
template <int Bytes, int QhAt, int QsAt, bool HasMin, int Offset>
struct TcNibble32 {
    static constexpr int kElems = 32, kBytes = Bytes;
    struct Raw {
        uint32_t d, m, qh, q[2];
    };
    __device__ static Raw load(const uint8_t* row, int k0, int u) {
        const uint8_t* blk = row + (size_t)(k0 / 32) * kBytes;
        Raw r;
        r.d = ld_u16(blk);
        r.m = HasMin ? ld_u16(blk + 2) : 0u;
        r.qh = QhAt >= 0 ? ld_u32_from_u16(blk + QhAt) : 0u;
        load_words<2>(blk + QsAt + 8 * u, r.q);
        return r;
    }
    __device__ static void store(const Raw& r, __half* dst, int, int u) {
        const float d = f16_bits(r.d), m = HasMin ? f16_bits(r.m) : 0.0f;
        float lo[8], hi[8];
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const uint32_t b = (r.q[i / 4] >> (8 * (i % 4))) & 0xFF;
            const uint32_t l = (b & 0xF) | (((r.qh >> (8 * u + i)) & 1) << 4);
            const uint32_t h = (b >> 4) | (((r.qh >> (16 + 8 * u + i)) & 1) << 4);
            lo[i] = d * small_int(l, (float)Offset) + m;
            hi[i] = d * small_int(h, (float)Offset) + m;
        }
        store8(dst + 8 * u, lo);
        store8(dst + 16 + 8 * u, hi);
    }
};
using TcQ4_1 = TcNibble32<20, -1, 4, true, 0>;
using TcQ5_0 = TcNibble32<22, 2, 6, false, 16>;
using TcQ5_1 = TcNibble32<24, 4, 8, true, 0>;

// MXFP4: an E8M0 byte e, nibbles q[16] as Q4_0's; a unit is bytes
// q[8u .. 8u + 8) (elements 8u.. low, 16 + 8u.. high), read a byte at a time
// (the 17-byte blocks lie at any offset). x = 2^(e - 128) * code value,
// exact in float, rounded once to F16 (exactly, where the scale keeps the
// values in F16's range, as real weights' do).
struct TcMXFP4 {
    static constexpr int kElems = 32, kBytes = 17;
    struct Raw {
        uint32_t e, q[2];
    };
    __device__ static Raw load(const uint8_t* row, int k0, int u) {
        const uint8_t* blk = row + (size_t)(k0 / 32) * kBytes;
        return Raw{blk[0], {gemv_formats::ld_u32_bytes(blk + 1 + 8 * u), gemv_formats::ld_u32_bytes(blk + 5 + 8 * u)}};
    }
    __device__ static void store(const Raw& r, __half* dst, int, int u) {
        const float d = blocks::e8m0_half(r.e);
        float lo[8], hi[8];
#pragma unroll
        for (int w = 0; w < 2; w++) {
            const uint32_t vl = gemv_formats::mxfp4_lut4(r.q[w] & 0x0F0F0F0Fu);
            const uint32_t vh = gemv_formats::mxfp4_lut4((r.q[w] >> 4) & 0x0F0F0F0Fu);
#pragma unroll
            for (int i = 0; i < 4; i++) {
                lo[4 * w + i] = d * (float)(int8_t)(vl >> (8 * i));
                hi[4 * w + i] = d * (float)(int8_t)(vh >> (8 * i));
            }
        }
        store8(dst + 8 * u, lo);
        store8(dst + 16 + 8 * u, hi);
    }
};

// Byte i of the 12 scale bytes held as three words.
__device__ __forceinline__ uint32_t scale_byte(uint32_t s0, uint32_t s1, uint32_t s2, int i) {
    const uint32_t w = i < 4 ? s0 : (i < 8 ? s1 : s2);
    return (w >> (8 * (i & 3))) & 0xFF;
}

// Q4_K: 256-element super-block; k step j = 0..7 is 32 elements with 6-bit
// scale/min j, nibbles (low for even j, high for odd) of bytes q[32 (j / 2) ..].
struct TcQ4_K {
    static constexpr int kElems = 256, kBytes = 144;
    struct Raw {
        uint32_t dd, s0, s1, s2;
        uint4 q;
    };
    __device__ static Raw load(const uint8_t* row, int k0, int u) {
        const uint8_t* blk = row + (size_t)(k0 / 256) * kBytes;
        const int j = (k0 % 256) / 32;
        const uint4 head = *reinterpret_cast<const uint4*>(blk);  // d, dmin, 12 scale bytes
        return {head.x, head.y, head.z, head.w, *reinterpret_cast<const uint4*>(blk + 16 + 32 * (j / 2) + 16 * u)};
    }
    __device__ static void store(const Raw& r, __half* dst, int k0, int u) {
        const int j = (k0 % 256) / 32;
        uint32_t sc, m;
        if (j < 4) {
            sc = scale_byte(r.s0, r.s1, r.s2, j) & 63;
            m = scale_byte(r.s0, r.s1, r.s2, j + 4) & 63;
        } else {
            sc = (scale_byte(r.s0, r.s1, r.s2, j + 4) & 0xF) | ((scale_byte(r.s0, r.s1, r.s2, j - 4) >> 6) << 4);
            m = (scale_byte(r.s0, r.s1, r.s2, j + 4) >> 4) | ((scale_byte(r.s0, r.s1, r.s2, j) >> 6) << 4);
        }
        const float dl = f16_bits(r.dd & 0xFFFF) * (float)sc, ml = f16_bits(r.dd >> 16) * (float)m;
        const uint32_t q[4] = {r.q.x, r.q.y, r.q.z, r.q.w};
        const int shift = 4 * (j % 2);
        float v[16];
#pragma unroll
        for (int i = 0; i < 16; i++) v[i] = dl * small_int((q[i / 4] >> (8 * (i % 4) + shift)) & 0xF, 0.0f) - ml;
        store8(dst + 16 * u, v);
        store8(dst + 16 * u + 8, v + 8);
    }
};

// Q6_K: ql[128], qh[64], int8 scales[16], f16 d. k step j: half n = j / 4,
// quarter r = j % 4 takes ql[64n + 32 (r % 2) + l] (high nibbles for r >= 2)
// and bits 2r of qh[32n + l], l = 0..31, scale 8n + 2r + l / 16.
struct TcQ6_K {
    static constexpr int kElems = 256, kBytes = 210;
    struct Raw {
        uint32_t ql[4], qh[4], d;
        int sc;
    };
    // From the block's parts (ql, qh, scales, d) wherever they lie; with
    // Aligned (Q6_K_X8) the quants are whole 16-byte words.
    template <bool Aligned>
    __device__ static Raw load_parts(const uint8_t* ql, const uint8_t* qh, const int8_t* sc, const uint8_t* dp,
                                     int k0, int u) {
        const int j = (k0 % 256) / 32, n = j / 4, r = j % 4;
        Raw w;
        if constexpr (Aligned) {
            const uint4 l = *reinterpret_cast<const uint4*>(ql + 64 * n + 32 * (r % 2) + 16 * u);
            const uint4 h = *reinterpret_cast<const uint4*>(qh + 32 * n + 16 * u);
            w.ql[0] = l.x, w.ql[1] = l.y, w.ql[2] = l.z, w.ql[3] = l.w;
            w.qh[0] = h.x, w.qh[1] = h.y, w.qh[2] = h.z, w.qh[3] = h.w;
        } else {
#pragma unroll
            for (int i = 0; i < 4; i++) {
                w.ql[i] = ld_u32_from_u16(ql + 64 * n + 32 * (r % 2) + 16 * u + 4 * i);
                w.qh[i] = ld_u32_from_u16(qh + 32 * n + 16 * u + 4 * i);
            }
        }
        w.d = ld_u16(dp);
        w.sc = sc[8 * n + 2 * r + u];
        return w;
    }
    __device__ static Raw load(const uint8_t* row, int k0, int u) {
        const uint8_t* blk = row + (size_t)(k0 / 256) * kBytes;
        return load_parts<false>(blk, blk + 128, reinterpret_cast<const int8_t*>(blk + 192), blk + 208, k0, u);
    }
    __device__ static void store(const Raw& w, __half* dst, int k0, int u) {
        const int r = ((k0 % 256) / 32) % 4;
        const float s = f16_bits(w.d) * (float)w.sc;
        const int lshift = 4 * (r / 2), hshift = 2 * r;
        float v[16];
#pragma unroll
        for (int i = 0; i < 16; i++) {
            const int b = 8 * (i % 4);
            const uint32_t q = ((w.ql[i / 4] >> (b + lshift)) & 0xF) | (((w.qh[i / 4] >> (b + hshift)) & 3) << 4);
            v[i] = s * small_int(q, 32.0f);
        }
        store8(dst + 16 * u, v);
        store8(dst + 16 * u + 8, v + 8);
    }
};

// Q6_K_X8 (dtype_descriptor.h): block i of a 2048-weight group has its ql at
// 128 i, qh at 1024 + 64 i, scales at 1536 + 16 i, d at 1664 + 2 i.
struct TcQ6_KX8 : TcQ6_K {
    static constexpr int kElems = 2048, kBytes = 1680;
    __device__ static Raw load(const uint8_t* row, int k0, int u) {
        const uint8_t* g = row + (size_t)(k0 / 2048) * kBytes;
        const int i = (k0 % 2048) / 256;
        return load_parts<true>(g + 128 * i, g + 1024 + 64 * i, reinterpret_cast<const int8_t*>(g + 1536 + 16 * i),
                                g + 1664 + 2 * i, k0, u);
    }
};

__device__ __forceinline__ float saturate_f16(float v) { return fminf(fmaxf(v, -65504.0f), 65504.0f); }

}  // namespace tc_formats
}  // namespace akunu
