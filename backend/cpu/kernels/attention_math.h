// The arithmetic of CPU attention, vectorized where AVX2 + FMA are built in:
// Q.K dots in register tiles (each the bits of dot_f32), a vector exp with
// its sum, and V rows weighted into float accumulators. Every vector path
// gives a row the same bits whatever rows it is grouped with, so a token's
// result does not depend on the batch around it.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>
#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#endif

#include "core/half.h"
#include "cpu_kernel.h"
#include "simd8.h"

namespace akunu {
namespace attention_math {

// Keys per chunk: the unit of K / V conversion, of the dots' output rows and
// of the chunked softmax (attention.cpp).
constexpr uint32_t kKeyChunk = 256;

// Where the dots and the weighted sums read key / value rows: float rows
// converted from the cache (FloatRows), or an F16 cache's rows in place
// (HalfRows: one pointer a key, each value widened as it is loaded). F16 to
// float is exact, so both give the same bits; in place skips writing and
// reading back 128 KiB of floats a 256-key chunk of 128-value heads.
struct FloatRows {
    const float* base;
    uint32_t hd;
    const float* row(uint32_t j) const { return base + (size_t)j * hd; }
};
struct HalfRows {
    const uint16_t* const* rows;
    const uint16_t* row(uint32_t j) const { return rows[j]; }
};
inline float load1(const float* p) { return *p; }
inline float load1(const uint16_t* p) { return f16_to_f32(*p); }

#if defined(__AVX2__) && defined(__FMA__)
// dot_f32's reduction of its 8 lane sums, on a register.
inline float reduce_like_dot_f32(__m256 v) {
    alignas(32) float s[8];
    _mm256_store_ps(s, v);
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

// reduce_like_dot_f32 of a[0..7] at once, lane i of the result a[i]'s: the
// eight accumulators transposed (vector l holds lane l of each), then added
// in reduce_like_dot_f32's tree, so every sum is the same bits.
inline __m256 reduce8_like_dot_f32(const __m256 a[8]) {
    __m256 l[8];
    simd8::transpose(a, l);
    return _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(l[0], l[1]), _mm256_add_ps(l[2], l[3])),
                         _mm256_add_ps(_mm256_add_ps(l[4], l[5]), _mm256_add_ps(l[6], l[7])));
}

using simd8::in_register;

inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
#if defined(__F16C__)
inline __m256 load8(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
#endif

// Rows read in place are a few cache lines each, a whole cache row (every KV
// head) apart: a stride the hardware prefetchers do not follow far enough, so
// the dots ask for the key rows some keys ahead (Gemma 3 270M's global layer
// at depth 32768, 2 threads: 2.3-2.7 ms before, 1.1-2.0 with; the same for
// the V rows measured no better). Float rows were just written: nothing to ask for.
inline void prefetch_row(const FloatRows&, uint32_t, uint32_t) {}
inline void prefetch_row(const HalfRows& rows, uint32_t j, uint32_t hd) {
    const char* p = reinterpret_cast<const char*>(rows.row(j));
    for (uint32_t b = 0; b < hd * 2; b += 64) _mm_prefetch(p + b, _MM_HINT_T0);
}
constexpr uint32_t kPrefetchKeys = 16;  // how far ahead

// R queries x C keys (from key j) of 8-lane FMA accumulators in registers;
// keys past n repeat the last one and are not stored.
template <int R, int C, class Rows>
inline void dot_tile(const float* const* qs, const Rows& rows, uint32_t j, uint32_t n, uint32_t hd, float* const* out) {
    decltype(rows.row(0)) ks[C];
    for (int c = 0; c < C; c++) ks[c] = rows.row(std::min<uint32_t>(j + c, n - 1));
    if (j + kPrefetchKeys + C <= n)
        for (int c = 0; c < C; c++) prefetch_row(rows, j + kPrefetchKeys + c, hd);
    __m256 a[R][C];
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) a[r][c] = _mm256_setzero_ps();
    for (uint32_t d = 0; d < hd; d += 8) {
        __m256 kv[C];
        for (int c = 0; c < C; c++) {
            kv[c] = load8(ks[c] + d);
            in_register(kv[c]);
        }
        for (int r = 0; r < R; r++) {
            __m256 qv = _mm256_loadu_ps(qs[r] + d);
            in_register(qv);
            for (int c = 0; c < C; c++) a[r][c] = _mm256_fmadd_ps(qv, kv[c], a[r][c]);
        }
    }
    if constexpr (R * C % 8 == 0) {  // transposed reductions, eight sums at a time
        alignas(32) float sums[R * C];
        for (int g = 0; g < R * C / 8; g++) _mm256_store_ps(sums + 8 * g, reduce8_like_dot_f32(&a[0][0] + 8 * g));
        for (int r = 0; r < R; r++)
            for (int c = 0; c < C && j + c < n; c++) out[r][j + c] = sums[r * C + c];
    } else {
        for (int r = 0; r < R; r++)
            for (int c = 0; c < C && j + c < n; c++) out[r][j + c] = reduce_like_dot_f32(a[r][c]);
    }
}

// exp(x) for 8 floats: 2^n * p(r), r = x - n ln2 (Cody-Waite split), p a degree-6
// polynomial; within 2 ulp of expf on the softmax's range (x <= 0), 0 below -87.
inline __m256 exp8(__m256 x) {
    x = _mm256_max_ps(x, _mm256_set1_ps(-87.0f));
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}
#endif

// A key's score from its dot product with the query: dot * scale, or with a
// soft cap (Gemma 2: cap > 0) cap * tanh(dot * (scale / cap)).
struct Score {
    float scale;
    float cap;
};

// sc[j] = the score of dots[j] for j < n; returns the largest (a NaN never
// wins, as with std::max; -inf for n = 0). Uncapped, each value one rounding,
// as the scalar loop.
inline float scale_and_max(const float* dots, Score score, uint32_t n, float* sc) {
    float m = -INFINITY;
    uint32_t j = 0;
    if (score.cap > 0.0f) {
        const float k = score.scale / score.cap;
        for (; j < n; j++) {
            sc[j] = score.cap * std::tanh(dots[j] * k);
            m = std::max(m, sc[j]);
        }
        return m;
    }
    const float scale = score.scale;
#if defined(__AVX2__) && defined(__FMA__)
    const __m256 f = _mm256_set1_ps(scale);
    __m256 mv = _mm256_set1_ps(-INFINITY);
    for (; j + 8 <= n; j += 8) {
        const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(dots + j), f);
        _mm256_storeu_ps(sc + j, v);
        mv = _mm256_max_ps(v, mv);  // (maxps gives its second operand where the first is NaN)
    }
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, mv);
    for (float v : lanes) m = std::max(m, v);
#endif
    for (; j < n; j++) {
        sc[j] = dots[j] * scale;
        m = std::max(m, sc[j]);
    }
    return m;
}

// w[j] = f16(e[j] * f) as a float for j < n: a key's softmax weight rounded
// to F16 (round to nearest even, the bits of f32_to_f16), 8 at a time with F16C.
inline void f16_weights(const float* e, float f, uint32_t n, float* w) {
    uint32_t j = 0;
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
    const __m256 fv = _mm256_set1_ps(f);
    for (; j + 8 <= n; j += 8)
        _mm256_storeu_ps(w + j, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_mul_ps(_mm256_loadu_ps(e + j), fv), 0)));
#endif
    for (; j < n; j++) w[j] = f16_to_f32(f32_to_f16(e[j] * f));
}

// v[j] = exp(v[j] - mx) for j in [lo, hi]; returns their sum (accumulated in
// double). Same lanes and order for a token whatever block it is in.
inline double exp_and_sum(float* v, uint32_t lo, uint32_t hi, float mx) {
#if defined(__AVX2__) && defined(__FMA__)
    const __m256 m = _mm256_set1_ps(mx);
    __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
    uint32_t j = lo;
    for (; j + 8 <= hi + 1; j += 8) {
        const __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(v + j), m));
        _mm256_storeu_ps(v + j, e);
        s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
        s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
    }
    alignas(32) double t[8];
    _mm256_store_pd(t, s0);
    _mm256_store_pd(t + 4, s1);
    double sum = ((t[0] + t[1]) + (t[2] + t[3])) + ((t[4] + t[5]) + (t[6] + t[7]));
    if (j <= hi) {  // the tail through the same vector exp
        alignas(32) float tail[8] = {};
        const uint32_t n = hi + 1 - j;
        for (uint32_t k = 0; k < n; k++) tail[k] = v[j + k];
        _mm256_store_ps(tail, exp8(_mm256_sub_ps(_mm256_load_ps(tail), m)));
        for (uint32_t k = 0; k < n; k++) {
            v[j + k] = tail[k];
            sum += tail[k];
        }
    }
    return sum;
#else
    double sum = 0;
    for (uint32_t j = lo; j <= hi; j++) {
        v[j] = std::exp(v[j] - mx);
        sum += v[j];
    }
    return sum;
#endif
}

// dots[i][j] = q_i . row_j for nq queries and n key rows, each equal to
// dot_f32(q_i, row_j) of the row as floats: with AVX2, register tiles of 4
// queries x 2 keys, 2 x 4 for a pair left over (a GQA group of two), 1 x 4
// for a last single query (decode's without GQA).
#if defined(__AVX512VL__)
constexpr uint32_t kDotKeys = 4;  // 16 accumulators of the 32 vector registers
#else
constexpr uint32_t kDotKeys = 2;
#endif
template <class Rows>
inline void block_dots(const float* q, uint32_t nq, const Rows& rows, uint32_t n, uint32_t hd, float* dots) {
#if defined(__AVX2__) && defined(__FMA__)
    if (hd % 8 == 0) {
        uint32_t i = 0;
        for (; i + 4 <= nq; i += 4) {
            const float* qs[4];
            float* out[4];
            for (int r = 0; r < 4; r++) {
                qs[r] = q + (size_t)(i + r) * hd;
                out[r] = dots + (size_t)(i + r) * kKeyChunk;
            }
            for (uint32_t j = 0; j < n; j += kDotKeys) dot_tile<4, kDotKeys>(qs, rows, j, n, hd, out);
        }
        if (i + 2 <= nq) {
            const float* qs[2] = {q + (size_t)i * hd, q + (size_t)(i + 1) * hd};
            float* out[2] = {dots + (size_t)i * kKeyChunk, dots + (size_t)(i + 1) * kKeyChunk};
            for (uint32_t j = 0; j < n; j += 4) dot_tile<2, 4>(qs, rows, j, n, hd, out);
            i += 2;
        }
        for (; i < nq; i++) {
            const float* qs[1] = {q + (size_t)i * hd};
            float* out[1] = {dots + (size_t)i * kKeyChunk};
            for (uint32_t j = 0; j < n; j += 4) dot_tile<1, 4>(qs, rows, j, n, hd, out);
        }
        return;
    }
#endif
    for (uint32_t i = 0; i < nq; i++)
        for (uint32_t j = 0; j < n; j++) {
            float* d = dots + (size_t)i * kKeyChunk + j;
            if constexpr (std::is_same_v<Rows, FloatRows>) {
                *d = dot_f32(q + (size_t)i * hd, rows.row(j), (int)hd);
            } else {  // dot_f32's arithmetic on the widened values
                const float* qi = q + (size_t)i * hd;
                const auto* r = rows.row(j);
                float l[8] = {0, 0, 0, 0, 0, 0, 0, 0};
                uint32_t e = 0;
                for (; e + 8 <= hd; e += 8)
                    for (int k = 0; k < 8; k++) l[k] += qi[e + k] * load1(r + e + k);
                float t = ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
                for (; e < hd; e++) t += qi[e] * load1(r + e);
                *d = t;
            }
        }
}

// acc[d] += w_j * rows[j][d] over keys j in [j0, j1) in order (weights[j]
// already rounded): with AVX2 the accumulators stay in registers, 64 lanes at a time.
template <class Rows>
inline void weighted_rows(const float* weights, const Rows& rows, uint32_t j0, uint32_t j1, uint32_t hd, float* acc) {
#if defined(__AVX2__) && defined(__FMA__)
    if (hd % 8 == 0) {
        for (uint32_t d0 = 0; d0 < hd; d0 += 64) {
            const uint32_t nb = std::min<uint32_t>(8, (hd - d0) / 8);
            __m256 a[8];
            for (uint32_t b = 0; b < nb; b++) a[b] = _mm256_loadu_ps(acc + d0 + 8 * b);
            for (uint32_t j = j0; j < j1; j++) {
                const __m256 w = _mm256_set1_ps(weights[j]);
                const auto* v = rows.row(j) + d0;
                for (uint32_t b = 0; b < nb; b++) a[b] = _mm256_fmadd_ps(w, load8(v + 8 * b), a[b]);
            }
            for (uint32_t b = 0; b < nb; b++) _mm256_storeu_ps(acc + d0 + 8 * b, a[b]);
        }
        return;
    }
#endif
    for (uint32_t j = j0; j < j1; j++)
        for (uint32_t d = 0; d < hd; d++) acc[d] += weights[j] * load1(rows.row(j) + d);
}

#if defined(__AVX2__) && defined(__FMA__)
constexpr bool kHaveRowsN = true;
// weighted_rows for N rows (2 or 4) over the same keys [j0, j1), hd in 16s:
// each V load serves the N, and every (row, lane) sum takes the same FMAs in
// the same key order as weighted_rows gives it.
template <int N, int B, class Rows>  // B: 8-lane vectors of the head a pass takes
inline void weighted_rows_span(const float* const w[], const Rows& rows, uint32_t j0, uint32_t j1, uint32_t d0,
                               uint32_t hd, float* const acc[]) {
    __m256 a[N][B];
    for (int r = 0; r < N; r++)
        for (int b = 0; b < B; b++) a[r][b] = _mm256_loadu_ps(acc[r] + d0 + 8 * b);
    for (uint32_t j = j0; j < j1; j++) {
        const auto* v = rows.row(j) + d0;
        __m256 vb[B];
        for (int b = 0; b < B; b++) {
            vb[b] = load8(v + 8 * b);
            in_register(vb[b]);
        }
        for (int r = 0; r < N; r++) {
            const __m256 wr = _mm256_set1_ps(w[r][j]);
            for (int b = 0; b < B; b++) a[r][b] = _mm256_fmadd_ps(wr, vb[b], a[r][b]);
        }
    }
    for (int r = 0; r < N; r++)
        for (int b = 0; b < B; b++) _mm256_storeu_ps(acc[r] + d0 + 8 * b, a[r][b]);
}

template <int N, class Rows>
inline void weighted_rows_n(const float* const w[], const Rows& rows, uint32_t j0, uint32_t j1, uint32_t hd,
                            float* const acc[]) {
    static_assert(N == 2 || N == 4, "two or four rows");
    uint32_t d0 = 0;
#if defined(__AVX512VL__)
    for (; N == 4 && d0 + 32 <= hd; d0 += 32) weighted_rows_span<N, 4>(w, rows, j0, j1, d0, hd, acc);  // 16 accumulators
#endif
    for (; N == 2 && d0 + 32 <= hd; d0 += 32) weighted_rows_span<N, 4>(w, rows, j0, j1, d0, hd, acc);  // 8 of them
    for (; d0 < hd; d0 += 16) weighted_rows_span<N, 2>(w, rows, j0, j1, d0, hd, acc);
}
#else
constexpr bool kHaveRowsN = false;
template <int N, class Rows>
inline void weighted_rows_n(const float* const*, const Rows&, uint32_t, uint32_t, uint32_t, float* const*) {}
#endif

// F16 rows read in place (HalfRows) where F16C widens them 8 at a time.
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
constexpr bool kHaveHalfRows = true;
#else
constexpr bool kHaveHalfRows = false;
#endif

}  // namespace attention_math
}  // namespace akunu
