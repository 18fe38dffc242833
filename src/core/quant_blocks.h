// GGML block layouts and their decoding to float, one block at a time. These
// define what each weight format means; the CPU kernels decode a block into
// registers/stack and use it at once, never a whole row.
// The same header compiles as Metal Shading Language (AKUNU_MSL, from
// backend/metal/kernels/akunu_msl.h): weight pointers then live in the `device`
// address space (AKUNU_GLOBAL) and decoded values in `thread` memory
// (AKUNU_PRIVATE), so the Metal kernels decode with this very code too.
#pragma once
#if defined(AKUNU_MSL)
#define AKUNU_HD
#else
#include <cstdint>
#include <cstring>

#include "core/half.h"
#endif
#ifndef AKUNU_GLOBAL
#define AKUNU_GLOBAL
#endif
#ifndef AKUNU_PRIVATE
#define AKUNU_PRIVATE
#endif

namespace akunu {
namespace blocks {

// Little-endian loads from byte addresses (blocks are only 2-byte aligned).
AKUNU_HD inline uint32_t load_u16(const AKUNU_GLOBAL uint8_t* p) { return (uint32_t)p[0] | ((uint32_t)p[1] << 8); }
AKUNU_HD inline uint32_t load_u32(const AKUNU_GLOBAL uint8_t* p) {
    return load_u16(p) | (load_u16(p + 2) << 16);
}
AKUNU_HD inline float load_f32(const AKUNU_GLOBAL uint8_t* p) { return f32_from_bits(load_u32(p)); }
AKUNU_HD inline float h(const AKUNU_GLOBAL uint8_t* p) { return f16_to_f32((uint16_t)load_u16(p)); }

// Q8_0: f16 d, int8 q[32]; x = d * q
AKUNU_HD inline void dequant_q8_0(const AKUNU_GLOBAL uint8_t* b, AKUNU_PRIVATE float* y) {
    float d = h(b);
    const AKUNU_GLOBAL int8_t* q = (const AKUNU_GLOBAL int8_t*)(b + 2);
    for (int j = 0; j < 32; j++) y[j] = d * (float)q[j];
}

// Q4_0: f16 d, nibbles q[16]; low nibbles are x[0..15], high x[16..31]; x = d * (q - 8)
AKUNU_HD inline void dequant_q4_0(const AKUNU_GLOBAL uint8_t* b, AKUNU_PRIVATE float* y) {
    float d = h(b);
    const AKUNU_GLOBAL uint8_t* q = b + 2;
    for (int j = 0; j < 16; j++) {
        y[j] = d * (float)((int)(q[j] & 0xF) - 8);
        y[j + 16] = d * (float)((int)(q[j] >> 4) - 8);
    }
}

// Q4_0_X8 / Q8_0_X8 (dtype_descriptor.h): 8 Q4_0 / Q8_0 blocks as one, the
// 8 f16 scales first, then the 8 blocks' quants (16 / 32 bytes each).
AKUNU_HD inline void dequant_q4_0_x8(const AKUNU_GLOBAL uint8_t* b, AKUNU_PRIVATE float* y) {
    for (int i = 0; i < 8; i++) {
        const float d = h(b + 2 * i);
        const AKUNU_GLOBAL uint8_t* q = b + 16 + 16 * i;
        for (int j = 0; j < 16; j++) {
            y[32 * i + j] = d * (float)((int)(q[j] & 0xF) - 8);
            y[32 * i + j + 16] = d * (float)((int)(q[j] >> 4) - 8);
        }
    }
}
AKUNU_HD inline void dequant_q8_0_x8(const AKUNU_GLOBAL uint8_t* b, AKUNU_PRIVATE float* y) {
    for (int i = 0; i < 8; i++) {
        const float d = h(b + 2 * i);
        const AKUNU_GLOBAL int8_t* q = (const AKUNU_GLOBAL int8_t*)(b + 16 + 32 * i);
        for (int j = 0; j < 32; j++) y[32 * i + j] = d * (float)q[j];
    }
}

// Q5_0: f16 d, u32 qh (5th bits), nibbles q[16]; x = d * (q5 - 16)
AKUNU_HD inline void dequant_q5_0(const AKUNU_GLOBAL uint8_t* b, AKUNU_PRIVATE float* y) {
    float d = h(b);
    const uint32_t qh = load_u32(b + 2);
    const AKUNU_GLOBAL uint8_t* q = b + 6;
    for (int j = 0; j < 16; j++) {
        int lo = (q[j] & 0xF) | (int)(((qh >> j) << 4) & 0x10);
        int hi = (q[j] >> 4) | (int)((qh >> (j + 12)) & 0x10);
        y[j] = d * (float)(lo - 16);
        y[j + 16] = d * (float)(hi - 16);
    }
}

// Q4_K super-block of 256: f16 d, f16 dmin, 12 bytes of packed 6-bit scales and
// mins for 8 sub-blocks of 32, nibbles q[128]; x = d*sc*q - dmin*m
AKUNU_HD inline void q4k_scale_min(int j, const AKUNU_GLOBAL uint8_t* s, AKUNU_PRIVATE uint8_t* sc, AKUNU_PRIVATE uint8_t* m) {
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (uint8_t)((s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4));
        *m = (uint8_t)((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
    }
}

AKUNU_HD inline void dequant_q4_k(const AKUNU_GLOBAL uint8_t* b, AKUNU_PRIVATE float* y) {
    float d = h(b), dmin = h(b + 2);
    const AKUNU_GLOBAL uint8_t* scales = b + 4;
    const AKUNU_GLOBAL uint8_t* q = b + 16;
    for (int j = 0, is = 0; j < 256; j += 64, is += 2) {
        uint8_t sc, m;
        q4k_scale_min(is, scales, &sc, &m);
        float d1 = d * sc, m1 = dmin * m;
        q4k_scale_min(is + 1, scales, &sc, &m);
        float d2 = d * sc, m2 = dmin * m;
        for (int l = 0; l < 32; l++) y[j + l] = d1 * (float)(q[l] & 0xF) - m1;
        for (int l = 0; l < 32; l++) y[j + 32 + l] = d2 * (float)(q[l] >> 4) - m2;
        q += 32;
    }
}

// Q6_K super-block of 256: ql[128] low nibbles, qh[64] high 2 bits, int8
// scales[16], f16 d; x = d * scale * (q6 - 32)
// Q6_K from its parts, wherever they lie: ql[128] low nibbles, qh[64] two
// high bits, int8 sc[16] scales, f16 d.
AKUNU_HD inline void dequant_q6_k_parts(const AKUNU_GLOBAL uint8_t* ql, const AKUNU_GLOBAL uint8_t* qh,
                                        const AKUNU_GLOBAL int8_t* sc, const AKUNU_GLOBAL uint8_t* dp,
                                        AKUNU_PRIVATE float* y) {
    float d = h(dp);
    for (int n = 0; n < 256; n += 128) {
        for (int l = 0; l < 32; l++) {
            int is = l / 16;
            int q1 = (int)((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
            int q2 = (int)((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
            int q3 = (int)((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
            int q4 = (int)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
            y[n + l] = d * sc[is] * q1;
            y[n + l + 32] = d * sc[is + 2] * q2;
            y[n + l + 64] = d * sc[is + 4] * q3;
            y[n + l + 96] = d * sc[is + 6] * q4;
        }
        ql += 64;
        qh += 32;
        sc += 8;
    }
}
AKUNU_HD inline void dequant_q6_k(const AKUNU_GLOBAL uint8_t* b, AKUNU_PRIVATE float* y) {
    dequant_q6_k_parts(b, b + 128, (const AKUNU_GLOBAL int8_t*)(b + 192), b + 208, y);
}

// Q6_K_X8 (dtype_descriptor.h): block i (0..7, 256 weights) of a 2048-weight
// group, whose parts lie at [ql x 8: 0][qh x 8: 1024][scales x 8: 1536][d x 8: 1664].
AKUNU_HD inline void dequant_q6_k_x8_block(const AKUNU_GLOBAL uint8_t* g, int i, AKUNU_PRIVATE float* y) {
    dequant_q6_k_parts(g + 128 * i, g + 1024 + 64 * i, (const AKUNU_GLOBAL int8_t*)(g + 1536 + 16 * i),
                       g + 1664 + 2 * i, y);
}
AKUNU_HD inline void dequant_q6_k_x8(const AKUNU_GLOBAL uint8_t* g, AKUNU_PRIVATE float* y) {
    for (int i = 0; i < 8; i++) dequant_q6_k_x8_block(g, i, y + 256 * i);
}

// Q4_1: f16 d, f16 m, nibbles q[16]; x = d * q + m
AKUNU_HD inline void dequant_q4_1(const AKUNU_GLOBAL uint8_t* b, AKUNU_PRIVATE float* y) {
    float d = h(b), m = h(b + 2);
    const AKUNU_GLOBAL uint8_t* q = b + 4;
    for (int j = 0; j < 16; j++) {
        y[j] = d * (float)(q[j] & 0xF) + m;
        y[j + 16] = d * (float)(q[j] >> 4) + m;
    }
}

// Q5_1: f16 d, f16 m, u32 qh, nibbles q[16]; x = d * q5 + m
AKUNU_HD inline void dequant_q5_1(const AKUNU_GLOBAL uint8_t* b, AKUNU_PRIVATE float* y) {
    float d = h(b), m = h(b + 2);
    const uint32_t qh = load_u32(b + 4);
    const AKUNU_GLOBAL uint8_t* q = b + 8;
    for (int j = 0; j < 16; j++) {
        int lo = (q[j] & 0xF) | (int)(((qh >> j) << 4) & 0x10);
        int hi = (q[j] >> 4) | (int)((qh >> (j + 12)) & 0x10);
        y[j] = d * (float)lo + m;
        y[j + 16] = d * (float)hi + m;
    }
}

// Q2_K: scales[16] (low nibble scale, high nibble min), q[64] (2 bits), f16 d, f16 dmin.
// Value v = 128*g + 32*s + l takes bits 2s of q[32g + l]; sub-block v/16.
AKUNU_HD inline void dequant_q2_k(const AKUNU_GLOBAL uint8_t* b, AKUNU_PRIVATE float* y) {
    const AKUNU_GLOBAL uint8_t* sc = b;
    const AKUNU_GLOBAL uint8_t* q = b + 16;
    const float d = h(b + 80), dmin = h(b + 82);
    for (int g = 0; g < 2; g++)
        for (int s = 0; s < 4; s++)
            for (int hb = 0; hb < 2; hb++) {
                const int sb = 8 * g + 2 * s + hb;  // sub-block of 16
                const float dl = d * (float)(sc[sb] & 0xF), ml = dmin * (float)(sc[sb] >> 4);
                AKUNU_PRIVATE float* o = y + 128 * g + 32 * s + 16 * hb;
                const AKUNU_GLOBAL uint8_t* qq = q + 32 * g + 16 * hb;
                for (int l = 0; l < 16; l++) o[l] = dl * (float)((qq[l] >> (2 * s)) & 3) - ml;
            }
}

// Q3_K: hmask[32], q[64] (2 low bits), 12 bytes of 6-bit scales, f16 d.
// Low bits as Q2_K; the high bit of value v is bit v/32 of hmask[v%32], and a
// clear bit subtracts 4. Scales: low nibbles from bytes 0..7, 2 high bits from 8..11.
AKUNU_HD inline void dequant_q3_k(const AKUNU_GLOBAL uint8_t* b, AKUNU_PRIVATE float* y) {
    const AKUNU_GLOBAL uint8_t* hm = b;
    const AKUNU_GLOBAL uint8_t* q = b + 32;
    const AKUNU_GLOBAL uint8_t* sc = b + 96;
    const float d = h(b + 108);
    int scales[16];
    for (int i = 0; i < 16; i++) {
        int lo = i < 8 ? (sc[i] & 0xF) : (sc[i - 8] >> 4);
        int hi = (sc[8 + i % 4] >> (2 * (i / 4))) & 3;
        scales[i] = (lo | (hi << 4)) - 32;
    }
    for (int g = 0; g < 2; g++)
        for (int s = 0; s < 4; s++) {
            const int j = 4 * g + s;  // which 32-run: also the hmask bit
            for (int hb = 0; hb < 2; hb++) {
                const float dl = d * (float)scales[2 * j + hb];
                AKUNU_PRIVATE float* o = y + 32 * j + 16 * hb;
                const AKUNU_GLOBAL uint8_t* qq = q + 32 * g + 16 * hb;
                const AKUNU_GLOBAL uint8_t* hh = hm + 16 * hb;
                for (int l = 0; l < 16; l++) {
                    int lo = (qq[l] >> (2 * s)) & 3;
                    int hbit = (hh[l] >> j) & 1;
                    o[l] = dl * (float)(lo - 4 + 4 * hbit);
                }
            }
        }
}

// Q5_K: f16 d, f16 dmin, 12 bytes of scales/mins (as Q4_K), qh[32], q[128].
// Value v = 64*g + 32*s + l: nibble s of q[32g + l], 5th bit = bit v/32 of qh[l].
AKUNU_HD inline void dequant_q5_k(const AKUNU_GLOBAL uint8_t* b, AKUNU_PRIVATE float* y) {
    const float d = h(b), dmin = h(b + 2);
    const AKUNU_GLOBAL uint8_t* scales = b + 4;
    const AKUNU_GLOBAL uint8_t* qh = b + 16;
    const AKUNU_GLOBAL uint8_t* q = b + 48;
    for (int g = 0; g < 4; g++)
        for (int s = 0; s < 2; s++) {
            const int j = 2 * g + s;
            uint8_t sc, m;
            q4k_scale_min(j, scales, &sc, &m);
            const float dl = d * sc, ml = dmin * m;
            AKUNU_PRIVATE float* o = y + 32 * j;
            const AKUNU_GLOBAL uint8_t* qq = q + 32 * g;
            for (int l = 0; l < 32; l++) o[l] = dl * (float)(((qq[l] >> (4 * s)) & 0xF) | (((qh[l] >> j) & 1) << 4)) - ml;
        }
}

// The non-linear 4-bit grid of IQ4_NL / IQ4_XS.
// The IQ4 grid (host table for the SIMD kernels; iq4_value also works in device code).
#if !defined(AKUNU_MSL)
constexpr int8_t kIQ4Values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
#endif
AKUNU_HD inline int8_t iq4_value(int i) {
    const int8_t v[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
    return v[i];
}

// IQ4_NL: f16 d, nibbles q[16] indexing the grid; low nibbles x[0..15], high x[16..31].
AKUNU_HD inline void dequant_iq4_nl(const AKUNU_GLOBAL uint8_t* b, AKUNU_PRIVATE float* y) {
    float d = h(b);
    const AKUNU_GLOBAL uint8_t* q = b + 2;
    for (int j = 0; j < 16; j++) {
        y[j] = d * iq4_value(q[j] & 0xF);
        y[j + 16] = d * iq4_value(q[j] >> 4);
    }
}

// IQ4_XS: f16 d, u16 scales_h, scales_l[4], q[128]; 8 sub-blocks of 32 with
// 6-bit scales (low nibble from scales_l, 2 high bits from scales_h) minus 32.
AKUNU_HD inline void dequant_iq4_xs(const AKUNU_GLOBAL uint8_t* b, AKUNU_PRIVATE float* y) {
    float d = h(b);
    const uint32_t sh = load_u16(b + 2);
    const AKUNU_GLOBAL uint8_t* sl = b + 4;
    const AKUNU_GLOBAL uint8_t* q = b + 8;
    for (int ib = 0; ib < 8; ib++) {
        int ls = ((sl[ib / 2] >> (4 * (ib % 2))) & 0xF) | (((sh >> (2 * ib)) & 3) << 4);
        float dl = d * (float)(ls - 32);
        for (int j = 0; j < 16; j++) {
            y[32 * ib + j] = dl * iq4_value(q[16 * ib + j] & 0xF);
            y[32 * ib + j + 16] = dl * iq4_value(q[16 * ib + j] >> 4);
        }
    }
}

// MXFP4 (OCP microscaling FP4, gpt-oss's expert weights): u8 e, an E8M0
// scale 2^(e - 127), then nibbles q[16] of E2M1 codes (sign in bit 3, values
// 0, 0.5, 1, 1.5, 2, 3, 4, 6); low nibbles x[0..15], high x[16..31]. As in
// llama.cpp and gguf-py the codes are read as integers doubled, so that the
// integer matmuls can take them as int8, against half the scale:
// x = 2^(e - 128) * kMXFP4Values[q]: the half scale is a float for every e
// (e < 2: a subnormal; e = 255, NaN in the OCP spec, is 2^127 as in gguf-py),
// and the product exact wherever it is in float range (from e = 254 the
// largest codes overflow to inf, as in gguf-py).
#if !defined(AKUNU_MSL)
constexpr int8_t kMXFP4Values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
#endif
AKUNU_HD inline int8_t mxfp4_value(int i) {
    const int8_t v[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
    return v[i];
}
// Half the E8M0 scale, 2^(e - 128), built from its float bits.
AKUNU_HD inline float e8m0_half(uint32_t e) { return f32_from_bits(e < 2 ? 0x00200000u << e : (e - 1) << 23); }

AKUNU_HD inline void dequant_mxfp4(const AKUNU_GLOBAL uint8_t* b, AKUNU_PRIVATE float* y) {
    const float d = e8m0_half(b[0]);
    const AKUNU_GLOBAL uint8_t* q = b + 1;
    for (int j = 0; j < 16; j++) {
        y[j] = d * (float)mxfp4_value(q[j] & 0xF);
        y[j + 16] = d * (float)mxfp4_value(q[j] >> 4);
    }
}

AKUNU_HD inline void dequant_f32(const AKUNU_GLOBAL uint8_t* b, AKUNU_PRIVATE float* y) { *y = load_f32(b); }
AKUNU_HD inline void dequant_f16(const AKUNU_GLOBAL uint8_t* b, AKUNU_PRIVATE float* y) { *y = h(b); }
#if !defined(AKUNU_MSL)
inline void dequant_f16_row(const AKUNU_GLOBAL uint8_t* b, float* y, int n) {
    f16_row_to_f32(reinterpret_cast<const uint16_t*>(b), y, n);  // GGUF data is little-endian, 2-aligned
}
#endif
AKUNU_HD inline void dequant_bf16(const AKUNU_GLOBAL uint8_t* b, AKUNU_PRIVATE float* y) {
    *y = bf16_to_f32((uint16_t)load_u16(b));
}

// MLX group (repacked, see dtype_descriptor.h): f32 scale, f32 bias, then
// `group` values of `bits` bits as a little-endian bit stream; x = scale * q + bias.
AKUNU_HD inline void dequant_mlx(const AKUNU_GLOBAL uint8_t* b, AKUNU_PRIVATE float* y, int bits, int group) {
    const float scale = load_f32(b), bias = load_f32(b + 4);
    const AKUNU_GLOBAL uint8_t* q = b + 8;
    const uint32_t mask = (1u << bits) - 1;
    for (int i = 0; i < group; i++) {
        const int bit = i * bits, byte = bit >> 3, shift = bit & 7;
        uint32_t v = q[byte];
        if (shift + bits > 8) v |= (uint32_t)q[byte + 1] << 8;  // a value spans two bytes
        y[i] = scale * (float)((v >> shift) & mask) + bias;
    }
}

#if !defined(AKUNU_MSL)
// Decode `n_blocks` consecutive blocks of a row (used by embedding lookup and tests).
void dequantize_row(uint32_t dtype, const AKUNU_GLOBAL uint8_t* src, float* dst, int64_t n_elems);
// Rows of Q4_0 / Q8_0 / Q6_K (`dtype`) regrouped into their x8 layouts (a
// byte permutation within each 8-block group: cols a multiple of 8 blocks),
// and back.
void regroup_x8(uint32_t dtype, const uint8_t* src, uint8_t* dst, int64_t rows, int64_t cols);
void ungroup_x8(uint32_t dtype, const uint8_t* src, uint8_t* dst, int64_t rows, int64_t cols);
#endif

}  // namespace blocks
}  // namespace akunu
