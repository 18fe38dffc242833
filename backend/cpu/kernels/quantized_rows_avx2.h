// AVX2 versions of the quantized matmul rows (same arithmetic as
// quantized_dot.h, which stays the portable reference). Each weight block is
// unpacked once into 32-byte int8 vectors and reused for every token of the
// pass; products use maddubs (|w| * sign-adjusted x) into int32 lanes.
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

// 16 bytes of nibbles -> 32 int8: low nibbles first, then high nibbles.
inline __m256i unpack_nibbles(const uint8_t* q) {
    const __m128i b = _mm_loadu_si128((const __m128i*)q);
    const __m128i m = _mm_set1_epi8(0x0F);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(b, 4), m), _mm_and_si128(b, m));
}

struct Q8_0 {
    static constexpr int BB = 34;
    static __m256i unpack(const uint8_t* w) { return load32(w + 2); }
};
struct Q4_0 {
    static constexpr int BB = 18;
    static __m256i unpack(const uint8_t* w) { return _mm256_sub_epi8(unpack_nibbles(w + 2), _mm256_set1_epi8(8)); }
};
struct Q5_0 {
    static constexpr int BB = 22;
    static __m256i unpack(const uint8_t* w) {
        uint32_t qh;
        std::memcpy(&qh, w + 2, 4);
        alignas(32) int8_t hb[32];
        for (int j = 0; j < 32; j++) hb[j] = (int8_t)(((qh >> j) & 1) << 4);
        __m256i v = _mm256_or_si256(unpack_nibbles(w + 6), _mm256_load_si256((const __m256i*)hb));
        return _mm256_sub_epi8(v, _mm256_set1_epi8(16));
    }
};

// y[t, n] for rows [n0, n1) of a 32-block format; xq/xd: Q8_0 activations.
template <class F>
void rows_q32(const MatmulParams& p, const uint8_t* W, const int8_t* xq, const float* xd, float* y,
              const float* bias, int n0, int n1) {
    const int K = (int)p.K, m = (int)p.n_tokens, nb = K / 32;
    __m256 acc[64];
    for (int n = n0; n < n1; n++) {
        const uint8_t* row = W + (size_t)n * nb * F::BB;
        for (int t = 0; t < m; t++) acc[t] = _mm256_setzero_ps();
        for (int b = 0; b < nb; b++) {
            const uint8_t* blk = row + (size_t)b * F::BB;
            const __m256i w = F::unpack(blk);
            const float dw = blocks::h(blk);
            for (int t = 0; t < m; t++) {
                const __m256i x = load32(xq + (size_t)t * K + b * 32);
                const __m256 d = _mm256_set1_ps(dw * xd[(size_t)t * nb + b]);
                acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot32(w, x)), d, acc[t]);
            }
        }
        for (int t = 0; t < m; t++) y[(size_t)t * p.y_stride + n] = hsum(acc[t]) + (bias ? bias[n] : 0.0f);
    }
}

// Q4_K rows against Q8_K activations (bsums give the per-32 sums for the mins).
inline void rows_q4_k(const MatmulParams& p, const uint8_t* W, const int8_t* xq, const float* xd,
                      const int16_t* bsums, float* y, const float* bias, int n0, int n1) {
    const int K = (int)p.K, m = (int)p.n_tokens, nb = K / 256;
    __m256 acc[64];
    float accm[64];
    for (int n = n0; n < n1; n++) {
        const uint8_t* row = W + (size_t)n * nb * 144;
        for (int t = 0; t < m; t++) { acc[t] = _mm256_setzero_ps(); accm[t] = 0; }
        for (int b = 0; b < nb; b++) {
            const uint8_t* blk = row + (size_t)b * 144;
            const float d = blocks::h(blk), dmin = blocks::h(blk + 2);
            __m256i w[8], sc[8];
            int mins[8];
            // 32 bytes per 64 values: low nibbles are sub-block 2j, high nibbles 2j+1
            for (int j = 0; j < 4; j++) {
                const __m256i q = load32(blk + 16 + 32 * j);
                const __m256i mask = _mm256_set1_epi8(0x0F);
                w[2 * j] = _mm256_and_si256(q, mask);
                w[2 * j + 1] = _mm256_and_si256(_mm256_srli_epi16(q, 4), mask);
            }
            for (int j = 0; j < 8; j++) {
                uint8_t s, mn;
                blocks::q4k_scale_min(j, blk + 4, &s, &mn);
                sc[j] = _mm256_set1_epi32(s);
                mins[j] = mn;
            }
            for (int t = 0; t < m; t++) {
                const int8_t* x = xq + (size_t)t * K + b * 256;
                __m256i isum = _mm256_setzero_si256();
                for (int j = 0; j < 8; j++)
                    isum = _mm256_add_epi32(isum, _mm256_mullo_epi32(dot32(w[j], load32(x + 32 * j)), sc[j]));
                const float dx = xd[(size_t)t * nb + b];
                acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(d * dx), acc[t]);
                const int16_t* bs = bsums + ((size_t)t * nb + b) * 16;
                int msum = 0;
                for (int j = 0; j < 8; j++) msum += mins[j] * (bs[2 * j] + bs[2 * j + 1]);
                accm[t] += dmin * dx * (float)msum;
            }
        }
        for (int t = 0; t < m; t++)
            y[(size_t)t * p.y_stride + n] = hsum(acc[t]) - accm[t] + (bias ? bias[n] : 0.0f);
    }
}

// Q6_K rows against Q8_K activations: 16 sub-blocks of 16, each with an int8 scale.
inline void rows_q6_k(const MatmulParams& p, const uint8_t* W, const int8_t* xq, const float* xd, float* y,
                      const float* bias, int n0, int n1) {
    const int K = (int)p.K, m = (int)p.n_tokens, nb = K / 256;
    __m256 acc[64];
    for (int n = n0; n < n1; n++) {
        const uint8_t* row = W + (size_t)n * nb * 210;
        for (int t = 0; t < m; t++) acc[t] = _mm256_setzero_ps();
        for (int b = 0; b < nb; b++) {
            const uint8_t* blk = row + (size_t)b * 210;
            const int8_t* scl = (const int8_t*)(blk + 192);
            const float d = blocks::h(blk + 208);
            __m256i w[8], sc[8];
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
                w[4 * half + 0] = _mm256_sub_epi8(w0, k32);
                w[4 * half + 1] = _mm256_sub_epi8(w1, k32);
                w[4 * half + 2] = _mm256_sub_epi8(w2, k32);
                w[4 * half + 3] = _mm256_sub_epi8(w3, k32);
            }
            for (int j = 0; j < 8; j++)
                sc[j] = _mm256_setr_epi32(scl[2 * j], scl[2 * j], scl[2 * j], scl[2 * j], scl[2 * j + 1],
                                          scl[2 * j + 1], scl[2 * j + 1], scl[2 * j + 1]);
            for (int t = 0; t < m; t++) {
                const int8_t* x = xq + (size_t)t * K + b * 256;
                __m256i isum = _mm256_setzero_si256();
                for (int j = 0; j < 8; j++)
                    isum = _mm256_add_epi32(isum, _mm256_mullo_epi32(dot32(w[j], load32(x + 32 * j)), sc[j]));
                acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(d * xd[(size_t)t * nb + b]), acc[t]);
            }
        }
        for (int t = 0; t < m; t++) y[(size_t)t * p.y_stride + n] = hsum(acc[t]) + (bias ? bias[n] : 0.0f);
    }
}

}  // namespace avx2
}  // namespace akunu
#endif
