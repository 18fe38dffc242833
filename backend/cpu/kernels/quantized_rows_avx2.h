// AVX2 quantized matmul rows (same arithmetic as quantized_dot.h, which stays
// the portable reference). Each weight block is unpacked once into 32-byte
// int8 vectors and reused for every token of the pass; products use maddubs
// (|w| * sign-adjusted x) into int32 lanes.
//
// Two shapes of format:
// - 32-blocks (Q8_0, Q4_0, Q5_0, Q4_1, Q5_1, IQ4_NL) against Q8_0 activations:
//   x = d * q (+ m), one vector per block;
// - 256-super-blocks (Q2_K..Q6_K, IQ4_XS) against Q8_K activations: eight
//   vectors per block, each with an int32 scale per lane (so 16-value
//   sub-blocks can carry their own scale), plus optional integer mins.
#pragma once
#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "core/kernel_params.h"
#include "core/quant_blocks.h"

namespace akunu {
namespace avx2 {

inline __m256i dot32(__m256i w, __m256i x) {
    const __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
    return _mm256_madd_epi16(p16, _mm256_set1_epi16(1));  // 8 x int32, lane i = bytes 4i..4i+3
}

inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

inline __m256i load32(const void* p) { return _mm256_loadu_si256((const __m256i*)p); }

// 16 bytes of nibbles -> 32 bytes: low nibbles first, then high nibbles.
inline __m256i unpack_nibbles(const uint8_t* q) {
    const __m128i b = _mm_loadu_si128((const __m128i*)q);
    const __m128i m = _mm_set1_epi8(0x0F);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(b, 4), m), _mm_and_si128(b, m));
}

// 32 fifth bits (u32 little-endian) -> bytes of 0 or 16.
inline __m256i fifth_bits(const uint8_t* qh4) {
    uint32_t qh;
    std::memcpy(&qh, qh4, 4);
    const __m256i shuf = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2,
                                          3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32((int)qh), shuf);
    const __m256i bit = _mm256_set1_epi64x(0x8040201008040201LL);
    const __m256i is_set = _mm256_cmpeq_epi8(_mm256_and_si256(bytes, bit), bit);
    return _mm256_and_si256(is_set, _mm256_set1_epi8(16));
}

inline __m256i iq4_lookup(__m256i idx) {
    const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i*)blocks::kIQ4Values));
    return _mm256_shuffle_epi8(table, idx);
}

// ---- 32-blocks ------------------------------------------------------------
struct Q8_0 {
    static constexpr int BB = 34;
    static constexpr bool kMin = false;
    static __m256i unpack(const uint8_t* w) { return load32(w + 2); }
};
struct Q4_0 {
    static constexpr int BB = 18;
    static constexpr bool kMin = false;
    static __m256i unpack(const uint8_t* w) { return _mm256_sub_epi8(unpack_nibbles(w + 2), _mm256_set1_epi8(8)); }
};
struct Q5_0 {
    static constexpr int BB = 22;
    static constexpr bool kMin = false;
    static __m256i unpack(const uint8_t* w) {
        return _mm256_sub_epi8(_mm256_or_si256(unpack_nibbles(w + 6), fifth_bits(w + 2)), _mm256_set1_epi8(16));
    }
};
struct Q4_1 {
    static constexpr int BB = 20;
    static constexpr bool kMin = true;  // x = d*q + m, m at byte 2
    static __m256i unpack(const uint8_t* w) { return unpack_nibbles(w + 4); }
};
struct Q5_1 {
    static constexpr int BB = 24;
    static constexpr bool kMin = true;
    static __m256i unpack(const uint8_t* w) { return _mm256_or_si256(unpack_nibbles(w + 8), fifth_bits(w + 4)); }
};
struct IQ4_NL {
    static constexpr int BB = 18;
    static constexpr bool kMin = false;
    static __m256i unpack(const uint8_t* w) { return iq4_lookup(unpack_nibbles(w + 2)); }
};

// xsum: per activation block, the sum of its int8 values (for the mins).
// Decode (one token): accumulators stay in registers, two blocks in flight.
// The many-token path below adds in exactly this order (even blocks into one
// accumulator, odd into another, mins one block at a time), so a row's result
// does not depend on how many tokens share the pass: speculative verification
// sees the same logits as plain decoding.
template <class F>
void rows_q32_single(const MatmulParams& p, const uint8_t* W, const int8_t* xq, const float* xd,
                     const int16_t* xsum, float* y, const float* bias, int n0, int n1) {
    const int nb = (int)p.K / 32;
    for (int n = n0; n < n1; n++) {
        const uint8_t* row = W + (size_t)n * nb * F::BB;
        __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
        float accm = 0;
        int b = 0;
        for (; b + 2 <= nb; b += 2) {
            const uint8_t* b0 = row + (size_t)b * F::BB;
            const uint8_t* b1 = b0 + F::BB;
            const __m256i p0 = dot32(F::unpack(b0), load32(xq + b * 32));
            const __m256i p1 = dot32(F::unpack(b1), load32(xq + b * 32 + 32));
            acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p0), _mm256_set1_ps(blocks::h(b0) * xd[b]), acc0);
            acc1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p1), _mm256_set1_ps(blocks::h(b1) * xd[b + 1]), acc1);
            if constexpr (F::kMin) {
                accm += blocks::h(b0 + 2) * xd[b] * (float)xsum[b];
                accm += blocks::h(b1 + 2) * xd[b + 1] * (float)xsum[b + 1];
            }
        }
        for (; b < nb; b++) {
            const uint8_t* b0 = row + (size_t)b * F::BB;
            acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot32(F::unpack(b0), load32(xq + b * 32))),
                                   _mm256_set1_ps(blocks::h(b0) * xd[b]), acc0);
            if constexpr (F::kMin) accm += blocks::h(b0 + 2) * xd[b] * (float)xsum[b];
        }
        y[n] = hsum(_mm256_add_ps(acc0, acc1)) + accm + (bias ? bias[n] : 0.0f);
    }
}

template <class F>
void rows_q32(const MatmulParams& p, const uint8_t* W, const int8_t* xq, const float* xd, const int16_t* xsum,
              float* y, const float* bias, int n0, int n1) {
    const int K = (int)p.K, m = (int)p.n_tokens, nb = K / 32;
    if (m == 1) return rows_q32_single<F>(p, W, xq, xd, xsum, y, bias, n0, n1);
    __m256 acc[2 * 64];  // per token: even blocks, odd blocks (the odd last block joins the even ones)
    float accm[64];
    const int paired = nb & ~1;
    for (int n = n0; n < n1; n++) {
        const uint8_t* row = W + (size_t)n * nb * F::BB;
        for (int t = 0; t < m; t++) { acc[2 * t] = acc[2 * t + 1] = _mm256_setzero_ps(); accm[t] = 0; }
        for (int b = 0; b < nb; b++) {
            const uint8_t* blk = row + (size_t)b * F::BB;
            const __m256i w = F::unpack(blk);
            const float dw = blocks::h(blk);
            const float mw = F::kMin ? blocks::h(blk + 2) : 0.0f;
            const int lane = b < paired ? (b & 1) : 0;
            for (int t = 0; t < m; t++) {
                const size_t xb = (size_t)t * nb + b;
                const __m256i x = load32(xq + (size_t)t * K + b * 32);
                __m256& a = acc[2 * t + lane];
                a = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot32(w, x)), _mm256_set1_ps(dw * xd[xb]), a);
                if constexpr (F::kMin) accm[t] += mw * xd[xb] * (float)xsum[xb];
            }
        }
        for (int t = 0; t < m; t++)
            y[(size_t)t * p.y_stride + n] =
                hsum(_mm256_add_ps(acc[2 * t], acc[2 * t + 1])) + accm[t] + (bias ? bias[n] : 0.0f);
    }
}

// ---- 256-super-blocks -----------------------------------------------------
struct KBlock {
    __m256i w[8];   // 8 runs of 32 values
    __m256i sc[8];  // int32 scale per lane (lanes 0-3: first 16 values, 4-7: last 16)
    float d = 0, dmin = 0;
    int mins[16];   // per 16 values (used when the format has mins)
};

inline __m256i scale_pair(int a, int b) { return _mm256_setr_epi32(a, a, a, a, b, b, b, b); }

// The 6-bit scales and mins shared by Q4_K and Q5_K (8 sub-blocks of 32).
inline void k4_scales_mins(const uint8_t* packed, KBlock& k) {
    for (int j = 0; j < 8; j++) {
        uint8_t s, mn;
        blocks::q4k_scale_min(j, packed, &s, &mn);
        k.sc[j] = _mm256_set1_epi32(s);
        k.mins[2 * j] = k.mins[2 * j + 1] = mn;
    }
}

struct Q4_K {
    static constexpr int BB = 144;
    static constexpr bool kMin = true;
    static void unpack(const uint8_t* blk, KBlock& k) {
        k.d = blocks::h(blk);
        k.dmin = blocks::h(blk + 2);
        const __m256i m4 = _mm256_set1_epi8(0x0F);
        for (int j = 0; j < 4; j++) {
            const __m256i q = load32(blk + 16 + 32 * j);
            k.w[2 * j] = _mm256_and_si256(q, m4);
            k.w[2 * j + 1] = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
        }
        k4_scales_mins(blk + 4, k);
    }
};

struct Q5_K {
    static constexpr int BB = 176;
    static constexpr bool kMin = true;
    static void unpack(const uint8_t* blk, KBlock& k) {
        k.d = blocks::h(blk);
        k.dmin = blocks::h(blk + 2);
        const __m256i m4 = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
        const __m256i qh = load32(blk + 16);
        for (int g = 0; g < 4; g++) {
            const __m256i q = load32(blk + 48 + 32 * g);
            for (int s = 0; s < 2; s++) {
                const int j = 2 * g + s;
                const __m256i lo = s ? _mm256_and_si256(_mm256_srli_epi16(q, 4), m4) : _mm256_and_si256(q, m4);
                const __m256i hb = _mm256_and_si256(_mm256_srli_epi16(qh, j), one);
                k.w[j] = _mm256_or_si256(lo, _mm256_slli_epi16(hb, 4));
            }
        }
        k4_scales_mins(blk + 4, k);
    }
};

struct Q6_K {
    static constexpr int BB = 210;
    static constexpr bool kMin = false;
    static void unpack(const uint8_t* blk, KBlock& k) {
        const int8_t* scl = (const int8_t*)(blk + 192);
        k.d = blocks::h(blk + 208);
        const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30), k32 = _mm256_set1_epi8(32);
        for (int half = 0; half < 2; half++) {
            // 64 bytes of low nibbles + 32 bytes of 2-bit highs -> 128 six-bit values
            const __m256i q1 = load32(blk + 64 * half), q2 = load32(blk + 64 * half + 32);
            const __m256i h = load32(blk + 128 + 32 * half);
            const __m256i w0 = _mm256_or_si256(_mm256_and_si256(q1, m4), _mm256_and_si256(_mm256_slli_epi16(h, 4), m30));
            const __m256i w1 = _mm256_or_si256(_mm256_and_si256(q2, m4), _mm256_and_si256(_mm256_slli_epi16(h, 2), m30));
            const __m256i w2 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q1, 4), m4), _mm256_and_si256(h, m30));
            const __m256i w3 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q2, 4), m4),
                                               _mm256_and_si256(_mm256_srli_epi16(h, 2), m30));
            k.w[4 * half + 0] = _mm256_sub_epi8(w0, k32);
            k.w[4 * half + 1] = _mm256_sub_epi8(w1, k32);
            k.w[4 * half + 2] = _mm256_sub_epi8(w2, k32);
            k.w[4 * half + 3] = _mm256_sub_epi8(w3, k32);
        }
        for (int j = 0; j < 8; j++) k.sc[j] = scale_pair(scl[2 * j], scl[2 * j + 1]);
    }
};

// Q2_K / Q3_K share the 2-bit layout: run j = 4g + s holds bits 2s of q[32g..32g+31].
inline __m256i two_bits(const uint8_t* q, int j) {
    return _mm256_and_si256(_mm256_srli_epi16(load32(q + 32 * (j / 4)), 2 * (j % 4)), _mm256_set1_epi8(3));
}

struct Q2_K {
    static constexpr int BB = 84;
    static constexpr bool kMin = true;
    static void unpack(const uint8_t* blk, KBlock& k) {
        const uint8_t* sc = blk;
        k.d = blocks::h(blk + 80);
        k.dmin = blocks::h(blk + 82);
        for (int j = 0; j < 8; j++) {
            k.w[j] = two_bits(blk + 16, j);
            k.sc[j] = scale_pair(sc[2 * j] & 0xF, sc[2 * j + 1] & 0xF);
        }
        for (int i = 0; i < 16; i++) k.mins[i] = sc[i] >> 4;
    }
};

struct Q3_K {
    static constexpr int BB = 110;
    static constexpr bool kMin = false;
    static void unpack(const uint8_t* blk, KBlock& k) {
        const uint8_t* sc = blk + 96;
        k.d = blocks::h(blk + 108);
        const __m256i hm = load32(blk), one = _mm256_set1_epi8(1), four = _mm256_set1_epi8(4);
        int scales[16];
        for (int i = 0; i < 16; i++) {
            int lo = i < 8 ? (sc[i] & 0xF) : (sc[i - 8] >> 4);
            int hi = (sc[8 + i % 4] >> (2 * (i / 4))) & 3;
            scales[i] = (lo | (hi << 4)) - 32;
        }
        for (int j = 0; j < 8; j++) {
            // value = low2 - 4 + 4 * hbit
            const __m256i hb = _mm256_and_si256(_mm256_srli_epi16(hm, j), one);
            k.w[j] = _mm256_sub_epi8(_mm256_or_si256(two_bits(blk + 32, j), _mm256_slli_epi16(hb, 2)), four);
            k.sc[j] = scale_pair(scales[2 * j], scales[2 * j + 1]);
        }
    }
};

struct IQ4_XS {
    static constexpr int BB = 136;
    static constexpr bool kMin = false;
    static void unpack(const uint8_t* blk, KBlock& k) {
        k.d = blocks::h(blk);
        uint16_t sh;
        std::memcpy(&sh, blk + 2, 2);
        const uint8_t* sl = blk + 4;
        for (int ib = 0; ib < 8; ib++) {
            int ls = ((sl[ib / 2] >> (4 * (ib % 2))) & 0xF) | (((sh >> (2 * ib)) & 3) << 4);
            k.w[ib] = iq4_lookup(unpack_nibbles(blk + 8 + 16 * ib));
            k.sc[ib] = _mm256_set1_epi32(ls - 32);
        }
    }
};

// Decode (one token): accumulators in registers.
template <class F>
void rows_k_single(const MatmulParams& p, const uint8_t* W, const int8_t* xq, const float* xd,
                   const int16_t* bsums, float* y, const float* bias, int n0, int n1) {
    const int nb = (int)p.K / 256;
    KBlock k;
    for (int n = n0; n < n1; n++) {
        const uint8_t* row = W + (size_t)n * nb * F::BB;
        __m256 acc = _mm256_setzero_ps();
        float accm = 0;
        for (int b = 0; b < nb; b++) {
            F::unpack(row + (size_t)b * F::BB, k);
            const int8_t* x = xq + b * 256;
            __m256i isum0 = _mm256_setzero_si256(), isum1 = _mm256_setzero_si256();
            for (int j = 0; j < 8; j += 2) {
                isum0 = _mm256_add_epi32(isum0, _mm256_mullo_epi32(dot32(k.w[j], load32(x + 32 * j)), k.sc[j]));
                isum1 = _mm256_add_epi32(isum1, _mm256_mullo_epi32(dot32(k.w[j + 1], load32(x + 32 * j + 32)), k.sc[j + 1]));
            }
            acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(isum0, isum1)), _mm256_set1_ps(k.d * xd[b]), acc);
            if constexpr (F::kMin) {
                const int16_t* bs = bsums + (size_t)b * 16;
                int msum = 0;
                for (int i = 0; i < 16; i++) msum += k.mins[i] * bs[i];
                accm += k.dmin * xd[b] * (float)msum;
            }
        }
        y[n] = hsum(acc) - accm + (bias ? bias[n] : 0.0f);
    }
}

// bsums: per activation super-block, the sums of each 16 int8 values.
template <class F>
void rows_k(const MatmulParams& p, const uint8_t* W, const int8_t* xq, const float* xd, const int16_t* bsums,
            float* y, const float* bias, int n0, int n1) {
    const int K = (int)p.K, m = (int)p.n_tokens, nb = K / 256;
    if (m == 1) return rows_k_single<F>(p, W, xq, xd, bsums, y, bias, n0, n1);
    __m256 acc[64];
    float accm[64];
    KBlock k;
    for (int n = n0; n < n1; n++) {
        const uint8_t* row = W + (size_t)n * nb * F::BB;
        for (int t = 0; t < m; t++) { acc[t] = _mm256_setzero_ps(); accm[t] = 0; }
        for (int b = 0; b < nb; b++) {
            F::unpack(row + (size_t)b * F::BB, k);
            for (int t = 0; t < m; t++) {
                const int8_t* x = xq + (size_t)t * K + b * 256;
                __m256i isum = _mm256_setzero_si256();
                for (int j = 0; j < 8; j++)
                    isum = _mm256_add_epi32(isum, _mm256_mullo_epi32(dot32(k.w[j], load32(x + 32 * j)), k.sc[j]));
                const float dx = xd[(size_t)t * nb + b];
                acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(k.d * dx), acc[t]);
                if constexpr (F::kMin) {
                    const int16_t* bs = bsums + ((size_t)t * nb + b) * 16;
                    int msum = 0;
                    for (int i = 0; i < 16; i++) msum += k.mins[i] * bs[i];
                    accm[t] += k.dmin * dx * (float)msum;
                }
            }
        }
        for (int t = 0; t < m; t++)
            y[(size_t)t * p.y_stride + n] = hsum(acc[t]) - accm[t] + (bias ? bias[n] : 0.0f);
    }
}

}  // namespace avx2
}  // namespace akunu
#endif
