// GEMV (decode, one token) and GEMM (prefill, a pass of tokens) for every
// weight format: y[t, n] = W[n, :] . x[t, :] (+ bias[n]). Rows of W are split
// across threads. Quantized formats use integer dot products against 8-bit
// activations (quantized_dot.h); float formats decode 64 values at a time.
// No row is ever dequantized whole.
#include <algorithm>
#include <type_traits>
#include <vector>

#include "core/quant_blocks.h"
#include "../thread_pool.h"
#include "core/dtype_descriptor.h"
#include "core/kernel_params.h"
#include "cpu_kernel.h"
#include "int8_matmul.h"
#include "quantized_dot.h"
#include "quantized_rows_avx2.h"
#include "simd8.h"

namespace akunu {
namespace {

constexpr int kMaxTokens = 64;

// Rows of W split into chunks of 16 across the pool, so threads balance on
// small matrices too.
template <typename F>
void parallel_rows(const MatmulParams& p, ThreadPool* pool, F&& rows) {
    const int chunk = 16;
    int n_chunks = ((int)p.N + chunk - 1) / chunk;
    pool->parallel_for(n_chunks, [&](int c0, int c1) { rows(c0 * chunk, std::min((int)p.N, c1 * chunk)); });
}

// Float formats: "blocks" of 32 elements with a scalar tail, since K need not
// be a multiple of anything.
struct F32 { static void dec(const uint8_t* b, float* y, int n) { std::memcpy(y, b, (size_t)n * 4); } static constexpr int ES = 4; static constexpr bool kDirect = true; };
struct F16 { static void dec(const uint8_t* b, float* y, int n) { blocks::dequant_f16_row(b, y, n); } static constexpr int ES = 2; static constexpr bool kDirect = false; };
struct BF16 { static void dec(const uint8_t* b, float* y, int n) { for (int i = 0; i < n; i++) blocks::dequant_bf16(b + 2 * i, y + i); } static constexpr int ES = 2; static constexpr bool kDirect = false; };

// Activations rounded to 8 bits once per call, shared by all threads. The
// buffer grows on first use and is then reused: no allocation per token.
struct QuantizedX {
    std::vector<int8_t> q;
    std::vector<float> d;
    std::vector<int16_t> bsums;
};

QuantizedX& quantized_x_buffer(size_t n_values) {
    thread_local QuantizedX buf;
    if (buf.q.size() < n_values) {
        buf.q.resize(n_values);
        buf.d.resize(n_values / 32 + 1);
        buf.bsums.resize(n_values / 16 + 1);
    }
    return buf;
}

// Each token's activations rounded to Q8_0 blocks of 32 (with each block's
// int sum, for the formats with offsets or mins), for 32-block formats; tokens
// split across the pool, each rounded by the instruction set's quantizer
// (the same numbers as quantized_dot.h's).
QuantizedX& activations_q8_0(const MatmulParams& p, const float* x, ThreadPool* pool) {
    const int K = (int)p.K, m = (int)p.n_tokens, nb = K / 32;
    QuantizedX& qx = quantized_x_buffer((size_t)m * K);
    const int8mm::QuantizeFn quantize = int8mm::kernels_for(int8mm::selected_isa()).quantize_q8_0;
    pool->parallel_for(m, [&](int t0, int t1) {
        for (int t = t0; t < t1; t++)
            quantize(x + (size_t)t * p.x_stride, K, qx.q.data() + (size_t)t * K, qx.d.data() + (size_t)t * nb,
                     qx.bsums.data() + (size_t)t * nb);
    });
    return qx;
}

// Each token's activations rounded to Q8_K super-blocks of 256 (with sums of
// each 16), for K-quants and IQ4_XS.
QuantizedX& activations_q8_k(const MatmulParams& p, const float* x, ThreadPool* pool) {
    const int K = (int)p.K, m = (int)p.n_tokens, nb = K / 256;
    QuantizedX& qx = quantized_x_buffer((size_t)m * K);
    const int8mm::QuantizeFn quantize = int8mm::kernels_for(int8mm::selected_isa()).quantize_q8_k;
    pool->parallel_for(m, [&](int t0, int t1) {
        for (int t = t0; t < t1; t++)
            quantize(x + (size_t)t * p.x_stride, K, qx.q.data() + (size_t)t * K, qx.d.data() + (size_t)t * nb,
                     qx.bsums.data() + (size_t)t * nb * 16);
    });
    return qx;
}

// Portable integer rows (the reference for the AVX2 rows): BlockDot(block,
// xq, xd, bsums) is one weight block against one activation block; BS is the
// number of activation sums per block.
template <int BE, int BB, int BS, typename BlockDot>
void portable_int_rows(const MatmulParams& p, const uint8_t* W, const QuantizedX& qx, float* y, const float* bias,
                       ThreadPool* pool, BlockDot dot) {
    const int K = (int)p.K, m = (int)p.n_tokens, nb = K / BE;
    parallel_rows(p, pool, [&](int n0, int n1) {
        for (int n = n0; n < n1; n++) {
            const uint8_t* row = W + (size_t)n * nb * BB;
            for (int t = 0; t < m; t++) {
                const int8_t* xq = qx.q.data() + (size_t)t * K;
                const float* xd = qx.d.data() + (size_t)t * nb;
                const int16_t* bs = qx.bsums.data() + (size_t)t * nb * BS;
                float acc = 0;
                for (int b = 0; b < nb; b++) acc += dot(row + (size_t)b * BB, xq + b * BE, xd[b], bs + b * BS);
                y[(size_t)t * p.y_stride + n] = acc + (bias ? bias[n] : 0.0f);
            }
        }
    });
}

template <float (*Block)(const uint8_t*, const int8_t*, float), int BB>
void q32_matmul(const MatmulParams& p, const uint8_t* W, const float* x, float* y, const float* bias,
                ThreadPool* pool) {
    portable_int_rows<32, BB, 1>(p, W, activations_q8_0(p, x, pool), y, bias, pool,
                                 [](const uint8_t* w, const int8_t* xq, float xd, const int16_t*) {
                                     return Block(w, xq, xd);
                                 });
}

template <int BB, bool UsesMins>
void k_matmul(const MatmulParams& p, const uint8_t* W, const float* x, float* y, const float* bias,
              ThreadPool* pool) {
    portable_int_rows<256, BB, 16>(p, W, activations_q8_k(p, x, pool), y, bias, pool,
                                   [](const uint8_t* w, const int8_t* xq, float xd, const int16_t* bs) {
                                       if constexpr (UsesMins) return qdot::q4_k_block(w, xq, xd, bs);
                                       else return qdot::q6_k_block(w, xq, xd);
                                   });
}

template <class F>
void float_rows(const MatmulParams& p, const uint8_t* W, const float* x, float* y, const float* bias, int n0, int n1) {
    const int K = (int)p.K;
    const int m = (int)p.n_tokens;
    alignas(64) float tmp[64];
    for (int n = n0; n < n1; n++) {
        const uint8_t* row = W + (size_t)n * K * F::ES;
        float acc[kMaxTokens] = {};
        for (int k = 0; k < K; k += 64) {
            int len = std::min(64, K - k);
            F::dec(row + (size_t)k * F::ES, tmp, len);
            for (int t = 0; t < m; t++) acc[t] += dot_f32(tmp, x + (size_t)t * p.x_stride + k, len);
        }
        float bn = bias ? bias[n] : 0.0f;
        for (int t = 0; t < m; t++) y[(size_t)t * p.y_stride + n] = acc[t] + bn;
    }
}

#if defined(__AVX2__) && defined(__FMA__)
// Float formats with AVX2: register tiles of 4 weight rows x up to 6 tokens
// (24 accumulators with AVX-512's 32 vector registers, else 2 tokens). Each
// (row, token) sum is kChains chains of 8-lane FMAs over K (chain c takes the
// columns k with k / 8 % kChains == c), the chains added, then the same
// horizontal sum, whatever the number of tokens or the tile it falls in:
// one-token decode and many-token verification stay bit-identical
// (speculative decoding needs it), and a row does not depend on its batch.
// With AVX-512 a tile's accumulator is one 16-lane register holding both
// chains, and decode runs the two as 8-lane registers side by side (the same
// FMA in each lane); without it, one chain.
#if defined(__AVX512F__) && defined(__AVX512VL__)
constexpr int kChains = 2;
#else
constexpr int kChains = 1;
#endif
constexpr int kAccLanes = 8 * kChains;

inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
    return _mm_cvtss_f32(s);
}

// hsum8 of eight vectors at once (lane i of the result is hsum8(a[i])): the
// vectors transposed (l[k] holds lane k of each), then added in hsum8's tree.
inline __m256 hsum8x8(const float* a) {
    __m256 v[8], l[8];
    for (int i = 0; i < 8; i++) v[i] = _mm256_load_ps(a + 8 * i);
    simd8::transpose(v, l);
    return _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(l[0], l[4]), _mm256_add_ps(l[2], l[6])),
                         _mm256_add_ps(_mm256_add_ps(l[1], l[5]), _mm256_add_ps(l[3], l[7])));
}

constexpr int kTileRows = 4;
constexpr int kTileK = 512;       // K chunk decoded once per 4 rows and reused by every token of the block
constexpr int kTokenBlock = 256;  // tokens whose activations (a K chunk of each) stay in L2 while rows pass
#if defined(__AVX512F__) && defined(__AVX512VL__)
constexpr int kTileTokens = 6;
#else
constexpr int kTileTokens = 2;  // 8 accumulators + 4 weights + 1 activation of the 16 registers
#endif

// acc[j][r] (kAccLanes lanes) += w[r][kk..] * x_j[kk..] over the chunk (which
// starts at a multiple of 16), tokens j < T.
#if defined(__AVX512F__) && defined(__AVX512VL__)
template <int T>
inline void float_tile(const float* x, size_t x_stride, const float* const (&w)[kTileRows], int len,
                       float (*acc)[kTileRows][kAccLanes]) {
    __m512 a[T][kTileRows];
    for (int j = 0; j < T; j++)
        for (int r = 0; r < kTileRows; r++) a[j][r] = _mm512_load_ps(acc[j][r]);
    int kk = 0;
    for (; kk + 16 <= len; kk += 16) {
        __m512 wv[kTileRows];
        for (int r = 0; r < kTileRows; r++) wv[r] = _mm512_loadu_ps(w[r] + kk);
        for (int j = 0; j < T; j++) {
            __m512 v = _mm512_loadu_ps(x + (size_t)j * x_stride + kk);
            simd8::in_register(v);  // one load for the 4 rows
            for (int r = 0; r < kTileRows; r++) a[j][r] = _mm512_fmadd_ps(wv[r], v, a[j][r]);
        }
    }
    if (kk < len) {  // the last 8 columns: chain 0's lanes only, chain 1's kept as they are
        const __mmask16 lo = 0x00FF;
        for (int j = 0; j < T; j++) {
            const __m512 v = _mm512_maskz_loadu_ps(lo, x + (size_t)j * x_stride + kk);
            for (int r = 0; r < kTileRows; r++)
                a[j][r] = _mm512_mask3_fmadd_ps(_mm512_maskz_loadu_ps(lo, w[r] + kk), v, a[j][r], lo);
        }
    }
    for (int j = 0; j < T; j++)
        for (int r = 0; r < kTileRows; r++) _mm512_store_ps(acc[j][r], a[j][r]);
}

// The two chains of a 16-lane accumulator added (chain 0 + chain 1, as decode).
inline __m256 chains_added(const float* a) { return _mm256_add_ps(_mm256_load_ps(a), _mm256_load_ps(a + 8)); }
#else
template <int T>
inline void float_tile(const float* x, size_t x_stride, const float* const (&w)[kTileRows], int len,
                       float (*acc)[kTileRows][kAccLanes]) {
    __m256 a[T][kTileRows];
    for (int j = 0; j < T; j++)
        for (int r = 0; r < kTileRows; r++) a[j][r] = _mm256_load_ps(acc[j][r]);
    for (int kk = 0; kk < len; kk += 8) {
        __m256 wv[kTileRows];
        for (int r = 0; r < kTileRows; r++) wv[r] = _mm256_loadu_ps(w[r] + kk);
        for (int j = 0; j < T; j++) {
            __m256 v = _mm256_loadu_ps(x + (size_t)j * x_stride + kk);
            simd8::in_register(v);  // one load for the 4 rows
            for (int r = 0; r < kTileRows; r++) a[j][r] = _mm256_fmadd_ps(wv[r], v, a[j][r]);
        }
    }
    for (int j = 0; j < T; j++)
        for (int r = 0; r < kTileRows; r++) _mm256_store_ps(acc[j][r], a[j][r]);
}

inline __m256 chains_added(const float* a) { return _mm256_load_ps(a); }
#endif

// Eight weights of a row from column k, as floats (exact conversions).
inline __m256 load8(F32, const uint8_t* row, int k) { return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + k); }
inline __m256 load8(BF16, const uint8_t* row, int k) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * (size_t)k));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
#if defined(__F16C__)
inline __m256 load8(F16, const uint8_t* row, int k) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * (size_t)k)));
}
template <class F> constexpr bool kOneTokenRows = true;
#else
template <class F> constexpr bool kOneTokenRows = !std::is_same<F, F16>::value;
#endif

// Decode (one token, K a multiple of 8): each row read start to end, one
// sequential stream the hardware prefetcher follows, its FMA chains in
// flight together; the tile path's FMAs, chain sum and tree (hsum8x8's lane
// is hsum8), so the bits are the same. Eight rows read in lockstep were
// eight short interleaved streams: 2 threads on a 2-core AMD EPYC VM (32
// GB/s read bandwidth), F16 rows of 1024 / 2048 columns streamed at 21-22
// GB/s that way, at 28-30 one row at a time (two chains). The rows are one
// range read forward, so each step also asks L2 for the bytes
// kRowsPrefetchAhead past it, as the integer GEMVs do (int8_tiles_x86.h).
constexpr size_t kRowsPrefetchAhead = 24 * 1024;

template <class F>
void one_token_rows(const MatmulParams& p, const uint8_t* W, const float* x, float* y, const float* bias, int n0,
                    int n1) {
    const int K = (int)p.K, K16 = K / 16 * 16;
    const size_t row_bytes = (size_t)K * F::ES;
    for (int n = n0; n < n1; n++) {
        const uint8_t* w = W + (size_t)n * row_bytes;
        __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
        for (int k = 0; k < K16; k += 16) {
            // (may pass the matrix's end: a prefetch never faults)
            _mm_prefetch((const char*)((uintptr_t)w + (size_t)k * F::ES + kRowsPrefetchAhead), _MM_HINT_T1);
            a0 = _mm256_fmadd_ps(load8(F{}, w, k), _mm256_loadu_ps(x + k), a0);
            if constexpr (kChains == 2) a1 = _mm256_fmadd_ps(load8(F{}, w, k + 8), _mm256_loadu_ps(x + k + 8), a1);
            else a0 = _mm256_fmadd_ps(load8(F{}, w, k + 8), _mm256_loadu_ps(x + k + 8), a0);
        }
        if (K16 < K) a0 = _mm256_fmadd_ps(load8(F{}, w, K16), _mm256_loadu_ps(x + K16), a0);
        const __m256 v = kChains == 2 ? _mm256_add_ps(a0, a1) : a0;
        y[n] = hsum8(v) + (bias ? bias[n] : 0.0f);
    }
}

// Rows [n0, n1) for every token of the pass: token blocks outside, rows
// inside, so a block's activations are read from L2 by every row group.
template <class F>
void float_tile_rows(const MatmulParams& p, const uint8_t* W, const float* x, float* y, const float* bias, int n0,
                     int n1) {
    const int K = (int)p.K, K8 = K / 8 * 8, M = (int)p.n_tokens;
    if constexpr (kOneTokenRows<F>)
        if (M == 1 && K8 == K) return one_token_rows<F>(p, W, x, y, bias, n0, n1);
    alignas(32) float wbuf[kTileRows][kTileK];
    alignas(64) float acc[kTokenBlock][kTileRows][kAccLanes];  // lane accumulators per (token, row), across chunks
    alignas(32) float sums[kTokenBlock][kTileRows][8];         // their chains added
    for (int t0 = 0; t0 < M; t0 += kTokenBlock) {
        const int m = std::min(kTokenBlock, M - t0);
        const float* xb = x + (size_t)t0 * p.x_stride;
        for (int n = n0; n < n1; n += kTileRows) {
            const int rows = std::min(kTileRows, n1 - n);
            std::memset(acc, 0, sizeof(acc[0]) * (size_t)m);
            for (int k0 = 0; k0 < K8; k0 += kTileK) {
                const int len = std::min(kTileK, K8 - k0);
                const float* w[kTileRows];  // F32 rows read in place, others decoded (missing rows: zeros)
                for (int r = 0; r < kTileRows; r++) {
                    w[r] = wbuf[r];
                    if (r >= rows) std::memset(wbuf[r], 0, sizeof(float) * (size_t)len);
                    else if (F::kDirect) w[r] = reinterpret_cast<const float*>(W) + (size_t)(n + r) * K + k0;
                    else F::dec(W + ((size_t)(n + r) * K + k0) * F::ES, wbuf[r], len);
                }
                const float* xk = xb + k0;
                int t = 0;
                for (; t + kTileTokens <= m; t += kTileTokens)
                    float_tile<kTileTokens>(xk + (size_t)t * p.x_stride, p.x_stride, w, len, acc + t);
                for (; t + 2 <= m; t += 2) float_tile<2>(xk + (size_t)t * p.x_stride, p.x_stride, w, len, acc + t);
                for (; t < m; t++) float_tile<1>(xk + (size_t)t * p.x_stride, p.x_stride, w, len, acc + t);
            }
            for (int t = 0; t < m; t++)
                for (int r = 0; r < kTileRows; r++)
                    _mm256_store_ps(sums[t][r], chains_added(acc[t][r]));
            int t_first = 0;
            if (rows == kTileRows && K8 == K) {  // two tokens' four rows a reduction
                const __m256 b = bias ? _mm256_set_m128(_mm_loadu_ps(bias + n), _mm_loadu_ps(bias + n))
                                      : _mm256_setzero_ps();
                for (; t_first + 2 <= m; t_first += 2) {
                    const __m256 v = _mm256_add_ps(hsum8x8(&sums[t_first][0][0]), b);
                    _mm_storeu_ps(y + (size_t)(t0 + t_first) * p.y_stride + n, _mm256_castps256_ps128(v));
                    _mm_storeu_ps(y + (size_t)(t0 + t_first + 1) * p.y_stride + n, _mm256_extractf128_ps(v, 1));
                }
            }
            float tail_w[8];
            for (int r = 0; r < rows; r++) {
                if (K8 < K) F::dec(W + ((size_t)(n + r) * K + K8) * F::ES, tail_w, K - K8);
                for (int t = t_first; t < m; t++) {
                    const float* xt = xb + (size_t)t * p.x_stride;
                    float v = hsum8(_mm256_load_ps(sums[t][r]));
                    for (int k = K8; k < K; k++) v += tail_w[k - K8] * xt[k];
                    y[(size_t)(t0 + t) * p.y_stride + n + r] = v + (bias ? bias[n + r] : 0.0f);
                }
            }
        }
    }
}
#endif

// Formats without integer kernels yet: each weight block is decoded to floats
// once and dotted with every token's float activations.
template <void (*Dec)(const uint8_t*, float*), int BE, int BB>
void dequant_block_matmul(const MatmulParams& p, const uint8_t* W, const float* x, float* y, const float* bias,
                          ThreadPool* pool) {
    const int nb = (int)p.K / BE, m = (int)p.n_tokens;
    parallel_rows(p, pool, [&](int n0, int n1) {
        alignas(64) float tmp[BE];
        for (int n = n0; n < n1; n++) {
            const uint8_t* row = W + (size_t)n * nb * BB;
            float acc[kMaxTokens] = {};
            for (int b = 0; b < nb; b++) {
                Dec(row + (size_t)b * BB, tmp);
                for (int t = 0; t < m; t++) acc[t] += dot_f32(tmp, x + (size_t)t * p.x_stride + (size_t)b * BE, BE);
            }
            for (int t = 0; t < m; t++) y[(size_t)t * p.y_stride + n] = acc[t] + (bias ? bias[n] : 0.0f);
        }
    });
}

#if defined(__AVX2__) && defined(__FMA__)
// 32-block formats, AVX2, against Q8_0 activations.
template <class F>
void q32_avx2(const MatmulParams& p, const uint8_t* W, const float* x, float* y, const float* bias,
              ThreadPool* pool) {
    const QuantizedX& qx = activations_q8_0(p, x, pool);
    parallel_rows(p, pool, [&](int n0, int n1) {
        avx2::rows_q32<F>(p, W, qx.q.data(), qx.d.data(), qx.bsums.data(), y, bias, n0, n1);
    });
}

// 256-super-block formats, AVX2, against Q8_K activations.
template <class F>
void k_avx2(const MatmulParams& p, const uint8_t* W, const float* x, float* y, const float* bias, ThreadPool* pool) {
    const QuantizedX& qx = activations_q8_k(p, x, pool);
    parallel_rows(p, pool, [&](int n0, int n1) {
        avx2::rows_k<F>(p, W, qx.q.data(), qx.d.data(), qx.bsums.data(), y, bias, n0, n1);
    });
}
#endif

// Q8_0, Q4_0, Q5_0, Q4_1, Q5_1, IQ4_NL, MXFP4 and the K-quants but IQ4_XS: int8_matmul.h's kernels on tiles of 8 rows, for
// decode and prefill alike (one arithmetic for both), the instruction set
// chosen at run time. Row groups split evenly across the pool, so the
// logits head (the largest matrix) keeps every thread busy to the end.
template <int8mm::GroupFn int8mm::Kernels::*Fn, bool KQuant>
void int8_matmul(const MatmulParams& p, const uint8_t* W, const float* x, float* y, const float* bias,
                 ThreadPool* pool) {
    const QuantizedX& qx = KQuant ? activations_q8_k(p, x, pool) : activations_q8_0(p, x, pool);
    const int8mm::Pass pass{W, (int)p.K, (int)p.N, (int)p.n_tokens, qx.q.data(), qx.d.data(), qx.bsums.data(),
                            y, p.y_stride, bias};
    const int8mm::GroupFn fn = int8mm::kernels_for(int8mm::selected_isa()).*Fn;
    pool->parallel_for((pass.N + int8mm::kTileRows - 1) / int8mm::kTileRows,
                       [&](int g0, int g1) { fn(pass, g0, g1); });
}

using MatmulFn = void (*)(const MatmulParams&, const uint8_t*, const float*, float*, const float*, ThreadPool*);

template <void (*Rows)(const MatmulParams&, const uint8_t*, const float*, float*, const float*, int, int)>
void float_matmul(const MatmulParams& p, const uint8_t* W, const float* x, float* y, const float* bias,
                  ThreadPool* pool) {
    parallel_rows(p, pool, [&](int n0, int n1) { Rows(p, W, x, y, bias, n0, n1); });
}

// MLX groups: each group decoded to floats once and dotted with every token.
void mlx_matmul(const MatmulParams& p, const uint8_t* W, const float* x, float* y, const float* bias,
                ThreadPool* pool) {
    const int bits = mlx_bits(p.dtype), g = mlx_group(p.dtype);
    const int nb = (int)p.K / g, bb = 8 + g * bits / 8, m = (int)p.n_tokens;
    parallel_rows(p, pool, [&](int n0, int n1) {
        alignas(64) float tmp[128];
        for (int n = n0; n < n1; n++) {
            const uint8_t* row = W + (size_t)n * nb * bb;
            float acc[kMaxTokens] = {};
            for (int b = 0; b < nb; b++) {
                blocks::dequant_mlx(row + (size_t)b * bb, tmp, bits, g);
                for (int t = 0; t < m; t++) acc[t] += dot_f32(tmp, x + (size_t)t * p.x_stride + (size_t)b * g, g);
            }
            for (int t = 0; t < m; t++) y[(size_t)t * p.y_stride + n] = acc[t] + (bias ? bias[n] : 0.0f);
        }
    });
}

#if defined(__AVX2__) && defined(__FMA__)
// The whole pass in one call (the float tiles, which block tokens themselves).
void run_matmul_whole(const CpuArgs& a, MatmulFn fn) {
    const MatmulParams p = a.p<MatmulParams>();
    fn(p, a.buf[0], a.b<float>(1) + (size_t)p.row0 * p.x_stride, a.b<float>(2), p.has_bias ? a.b<float>(3) : nullptr,
       a.pool);
}
#endif

// Passes longer than `slice` tokens (encoder sequences, long prompt passes)
// run as slices of it.
template <uint32_t Slice = kMaxTokens>
void run_matmul(const CpuArgs& a, MatmulFn fn) {
    MatmulParams p = a.p<MatmulParams>();
    const float* x = a.b<float>(1) + (size_t)p.row0 * p.x_stride;
    float* y = a.b<float>(2);
    const uint32_t total = p.n_tokens;
    for (uint32_t t0 = 0; t0 < total; t0 += Slice) {
        p.n_tokens = std::min<uint32_t>(Slice, total - t0);
        fn(p, a.buf[0], x + (size_t)t0 * p.x_stride, y + (size_t)t0 * p.y_stride,
           p.has_bias ? a.b<float>(3) : nullptr, a.pool);
    }
}

#define AKUNU_MATMUL(fmt, rowfn)                                   \
    void gemv_##fmt(const CpuArgs& a) { run_matmul(a, rowfn); }    \
    void gemm_##fmt(const CpuArgs& a) { run_matmul(a, rowfn); }
// int8_matmul.h's formats: slices as long as its passes.
#define AKUNU_MATMUL_INT8(fmt, kquant)                                                                            \
    void gemv_##fmt(const CpuArgs& a) {                                                                          \
        run_matmul<int8mm::kMaxPassTokens>(a, int8_matmul<&int8mm::Kernels::fmt, kquant>);                       \
    }                                                                                                             \
    void gemm_##fmt(const CpuArgs& a) {                                                                          \
        run_matmul<int8mm::kMaxPassTokens>(a, int8_matmul<&int8mm::Kernels::fmt, kquant>);                       \
    }

#if defined(__AVX2__) && defined(__FMA__)
#define AKUNU_MATMUL_WHOLE(fmt, rowfn)                                 \
    void gemv_##fmt(const CpuArgs& a) { run_matmul_whole(a, rowfn); }  \
    void gemm_##fmt(const CpuArgs& a) { run_matmul_whole(a, rowfn); }
AKUNU_MATMUL_WHOLE(f32, (float_matmul<float_tile_rows<F32>>))
AKUNU_MATMUL_WHOLE(f16, (float_matmul<float_tile_rows<F16>>))
AKUNU_MATMUL_WHOLE(bf16, (float_matmul<float_tile_rows<BF16>>))
#else
AKUNU_MATMUL(f32, (float_matmul<float_rows<F32>>))
AKUNU_MATMUL(f16, (float_matmul<float_rows<F16>>))
AKUNU_MATMUL(bf16, (float_matmul<float_rows<BF16>>))
#endif
AKUNU_MATMUL(mlx, mlx_matmul)
AKUNU_MATMUL_INT8(q8_0, false)
AKUNU_MATMUL_INT8(q4_0, false)
AKUNU_MATMUL_INT8(q5_0, false)
AKUNU_MATMUL_INT8(q4_k, true)
AKUNU_MATMUL_INT8(q5_k, true)
AKUNU_MATMUL_INT8(q6_k, true)
AKUNU_MATMUL_INT8(q2_k, true)
AKUNU_MATMUL_INT8(q3_k, true)
AKUNU_MATMUL_INT8(q4_1, false)
AKUNU_MATMUL_INT8(q5_1, false)
AKUNU_MATMUL_INT8(iq4_nl, false)
AKUNU_MATMUL_INT8(mxfp4, false)
// The GPU layouts of Q4_0 / Q8_0 / Q6_K (dtype_descriptor.h): their meaning, for the tests.
AKUNU_MATMUL(q4_0_x8, (dequant_block_matmul<blocks::dequant_q4_0_x8, 256, 144>))
AKUNU_MATMUL(q8_0_x8, (dequant_block_matmul<blocks::dequant_q8_0_x8, 256, 272>))
AKUNU_MATMUL(q6_k_x8, (dequant_block_matmul<blocks::dequant_q6_k_x8, 2048, 1680>))
#if defined(__AVX2__) && defined(__FMA__)
AKUNU_MATMUL(iq4_xs, k_avx2<avx2::IQ4_XS>)
#else
AKUNU_MATMUL(iq4_xs, (dequant_block_matmul<blocks::dequant_iq4_xs, 256, 136>))
#endif

}  // namespace

extern const CpuKernelEntry kMatmulKernels[] = {
    {"gemv_f32", gemv_f32},   {"gemm_f32", gemm_f32},   {"gemv_f16", gemv_f16},   {"gemm_f16", gemm_f16},
    {"gemv_bf16", gemv_bf16}, {"gemm_bf16", gemm_bf16}, {"gemv_q8_0", gemv_q8_0}, {"gemm_q8_0", gemm_q8_0},
    {"gemv_q4_0", gemv_q4_0}, {"gemm_q4_0", gemm_q4_0}, {"gemv_q5_0", gemv_q5_0}, {"gemm_q5_0", gemm_q5_0},
    {"gemv_q4_k", gemv_q4_k}, {"gemm_q4_k", gemm_q4_k}, {"gemv_q6_k", gemv_q6_k}, {"gemm_q6_k", gemm_q6_k},
    {"gemv_q4_1", gemv_q4_1}, {"gemm_q4_1", gemm_q4_1}, {"gemv_q5_1", gemv_q5_1}, {"gemm_q5_1", gemm_q5_1},
    {"gemv_q2_k", gemv_q2_k}, {"gemm_q2_k", gemm_q2_k}, {"gemv_q3_k", gemv_q3_k}, {"gemm_q3_k", gemm_q3_k},
    {"gemv_q5_k", gemv_q5_k}, {"gemm_q5_k", gemm_q5_k}, {"gemv_iq4_nl", gemv_iq4_nl},
    {"gemm_iq4_nl", gemm_iq4_nl}, {"gemv_iq4_xs", gemv_iq4_xs}, {"gemm_iq4_xs", gemm_iq4_xs},
    {"gemv_mxfp4", gemv_mxfp4}, {"gemm_mxfp4", gemm_mxfp4},
    {"gemv_mlx", gemv_mlx},   {"gemm_mlx", gemm_mlx},
    {"gemv_q4_0_x8", gemv_q4_0_x8}, {"gemm_q4_0_x8", gemm_q4_0_x8},
    {"gemv_q8_0_x8", gemv_q8_0_x8}, {"gemm_q8_0_x8", gemm_q8_0_x8},
    {"gemv_q6_k_x8", gemv_q6_k_x8}, {"gemm_q6_k_x8", gemm_q6_k_x8},
    {nullptr, nullptr},
};

}  // namespace akunu
