// y[t, n] = sum_k W[n, k] x[t, k] (+ bias[n]) for every weight format (CPU
// twin: backend/cpu/kernels/matmul.cpp). Weights are decoded block by block
// with the shared decoders (core/quant_blocks.h); activations and sums are float.
//
// gemv: few tokens (decode, speculative verification). Lanes take a row's
// blocks in turn, decode each once into thread memory and use it for every
// token, then simd_sum reduces. Three variants (book, "GEMV variant
// selection"; metal_launch.cpp picks one from ChipConfig and the shape):
//   gemv        one row a SIMD group; threadgroups of 4 SIMD groups, or 8 on
//               chips with gemv_wide_standard (Pro and larger)
//   gemv_wide   long output rows (the logits head, N > wide_gemv_threshold):
//               kWideRows rows a SIMD group sharing each activation value
//               they read, 8 SIMD groups a threadgroup
//   gemv_large  long reductions (K >= q4_small_k_threshold, the formats of
//               32-value blocks, e.g. the down projection): kLargeSplit SIMD
//               groups share a row's blocks, partial sums meet in threadgroup
//               memory
// gemm: many tokens (prefill, encoders). A threadgroup of four SIMD groups
// computes a 32-row x 32-token tile with simdgroup_matrix 8x8 products; each
// K step decodes a 32 x 32 slice of W into threadgroup memory (transposed, so
// the products need no transposed loads) next to the 32 x 32 slice of x.
#include "formats.h"

enum { kGemvMaxTokens = 8 };  // above this the device runs gemm
enum { kWideRows = 2 };       // gemv_wide: rows a SIMD group
enum { kLargeSplit = 2 };     // gemv_large: SIMD groups a row

// acc[r * kGemvMaxTokens + t] += the blocks b = first, first + step, ... of
// rows n0 .. n0 + NR - 1 (those below N) against token t's x. Each x value is
// read once for the NR rows.
// Float formats (F32 / F16 / BF16) with K % 4 == 0 take four values a step
// in one vector load (Load4), as a block of four.
template <typename F, uint NR>
inline void gemv_rows(device const uint8_t* W, device const float* xs, constant MatmulParams& p, uint n0, uint first,
                      uint step, thread float* acc) {
    const bool vec = Load4<F>::ok && p.K % 4 == 0;
    const uint be = vec ? 4 : F::be(p.dtype), bb = vec ? 4 * F::bb(p.dtype) : F::bb(p.dtype), nb = p.K / be;
    const uint m = min(p.n_tokens, (uint)kGemvMaxTokens);
    const uint rows = min((uint)NR, p.N - n0);
    float w[NR][F::MAX_BE < 4 ? 4 : F::MAX_BE];
    for (uint b = first; b < nb; b += step) {
        for (uint r = 0; r < rows; r++) {
            device const uint8_t* blk = W + ((ulong)(n0 + r) * nb + b) * bb;
            if (vec) Load4<F>::load(blk, w[r]);
            else F::decode(blk, w[r], p.dtype);
        }
        for (uint t = 0; t < m; t++) {
            device const float* xb = xs + (ulong)t * p.x_stride + (ulong)b * be;
            float s[NR];
            for (uint r = 0; r < NR; r++) s[r] = 0.0f;
            for (uint j = 0; j < be; j++) {
                const float xv = xb[j];
                for (uint r = 0; r < rows; r++) s[r] += w[r][j] * xv;
            }
            for (uint r = 0; r < rows; r++) acc[r * kGemvMaxTokens + t] += s[r];
        }
    }
}

inline void gemv_store(device float* y, device const float* bias, constant MatmulParams& p, uint n, uint t, float v) {
    y[(ulong)t * p.y_stride + n] = v + (p.has_bias ? bias[n] : 0.0f);
}

template <typename F>
kernel void gemv(device const uint8_t* W [[buffer(0)]], device const float* x [[buffer(1)]],
                 device float* y [[buffer(2)]], device const float* bias [[buffer(3)]],
                 constant MatmulParams& p [[buffer(AK_PARAMS)]], AK_THREAD_ARGS) {
    const uint n = tgpig.x * nsg + sgitg;
    if (n >= p.N) return;
    float acc[kGemvMaxTokens];
    for (uint t = 0; t < kGemvMaxTokens; t++) acc[t] = 0.0f;
    gemv_rows<F, 1>(W, x + (ulong)p.row0 * p.x_stride, p, n, tiisg, 32, acc);
    for (uint t = 0; t < min(p.n_tokens, (uint)kGemvMaxTokens); t++) {
        const float v = simd_sum(acc[t]);
        if (tiisg == 0) gemv_store(y, bias, p, n, t, v);
    }
}
AK_EXPORT_ALL_FORMATS(gemv, gemv)

template <typename F>
kernel void gemv_wide(device const uint8_t* W [[buffer(0)]], device const float* x [[buffer(1)]],
                      device float* y [[buffer(2)]], device const float* bias [[buffer(3)]],
                      constant MatmulParams& p [[buffer(AK_PARAMS)]], AK_THREAD_ARGS) {
    const uint n0 = (tgpig.x * nsg + sgitg) * kWideRows;
    if (n0 >= p.N) return;
    float acc[kWideRows * kGemvMaxTokens];
    for (uint i = 0; i < kWideRows * kGemvMaxTokens; i++) acc[i] = 0.0f;
    gemv_rows<F, kWideRows>(W, x + (ulong)p.row0 * p.x_stride, p, n0, tiisg, 32, acc);
    const uint rows = min((uint)kWideRows, p.N - n0);
    for (uint r = 0; r < rows; r++)
        for (uint t = 0; t < min(p.n_tokens, (uint)kGemvMaxTokens); t++) {
            const float v = simd_sum(acc[r * kGemvMaxTokens + t]);
            if (tiisg == 0) gemv_store(y, bias, p, n0 + r, t, v);
        }
}
AK_EXPORT_ALL_FORMATS(gemv_wide, gemv_wide)

// Threadgroup memory: one partial sum a (SIMD group, token).
template <typename F>
kernel void gemv_large(device const uint8_t* W [[buffer(0)]], device const float* x [[buffer(1)]],
                       device float* y [[buffer(2)]], device const float* bias [[buffer(3)]],
                       constant MatmulParams& p [[buffer(AK_PARAMS)]], threadgroup float* partial AK_THREADGROUP_MEMORY,
                       AK_THREAD_ARGS) {
    const uint part = sgitg % kLargeSplit, n = tgpig.x * (nsg / kLargeSplit) + sgitg / kLargeSplit;
    const uint m = min(p.n_tokens, (uint)kGemvMaxTokens);
    float acc[kGemvMaxTokens];
    for (uint t = 0; t < kGemvMaxTokens; t++) acc[t] = 0.0f;
    if (n < p.N)  // (no return before the barrier: every SIMD group reaches it)
        gemv_rows<F, 1>(W, x + (ulong)p.row0 * p.x_stride, p, n, part * 32 + tiisg, 32 * kLargeSplit, acc);
    for (uint t = 0; t < m; t++) {
        const float v = simd_sum(acc[t]);
        if (tiisg == 0) partial[sgitg * kGemvMaxTokens + t] = v;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (part != 0 || n >= p.N) return;
    for (uint t = tiisg; t < m; t += 32) {
        float v = 0.0f;
        for (uint i = 0; i < kLargeSplit; i++) v += partial[(sgitg + i) * kGemvMaxTokens + t];
        gemv_store(y, bias, p, n, t, v);
    }
}
AK_EXPORT_ALL_FORMATS(gemv_large, gemv_large)

enum { kTile = 32 };  // rows of W, tokens and K per step

// One kTile x kTile tile of y (rows n0.., tokens t0..) by a threadgroup of
// 4 SIMD groups. Threadgroup memory: Wt[k][n] and X[t][k] slices, then
// Y[t][n] for the store. A value's sum runs over k in the same order
// whatever the other rows and tokens of the tile (batch invariance).
template <typename F>
inline void gemm_tile(device const uint8_t* W, device const float* x, device float* y, device const float* bias,
                      thread const MatmulParams& p, uint n0, uint t0, threadgroup float* shared, uint tid,
                      uint n_threads, uint sg) {
    threadgroup float* wt = shared;                // [kTile k][kTile n]
    threadgroup float* xt = shared + kTile * kTile;  // [kTile t][kTile k]
    threadgroup float* yt = xt + kTile * kTile;      // [kTile t][kTile n]
    const uint be = F::be(p.dtype), bb = F::bb(p.dtype), nb = p.K / be;
    device const float* xs = x + (ulong)p.row0 * p.x_stride;
    // Loader role: thread i fills 8 consecutive k of row (or token) i / 4.
    const uint lr = tid / 4, lk = (tid % 4) * 8;
    const bool row_ok = n0 + lr < p.N, tok_ok = t0 + lr < p.n_tokens;
    device const uint8_t* wrow = W + (ulong)(row_ok ? n0 + lr : 0) * nb * bb;
    float cache[F::MAX_BE];
    uint cached = 0xFFFFFFFFu;  // block index held in cache
    // Compute role: SIMD group s owns tokens [16 (s % 2), +16) x rows [16 (s / 2), +16).
    const uint ct = (sg % 2) * 16, cn = (sg / 2) * 16;
    simdgroup_float8x8 acc[2][2];
    for (uint i = 0; i < 2; i++)
        for (uint j = 0; j < 2; j++) acc[i][j] = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
    for (uint k0 = 0; k0 < p.K; k0 += kTile) {
        for (uint j = 0; j < 8; j++) {
            const uint k = k0 + lk + j;
            float wv = 0.0f;
            if (row_ok && k < p.K) {
                const uint blk = k / be;
                if (blk != cached) {
                    F::decode(wrow + (ulong)blk * bb, cache, p.dtype);
                    cached = blk;
                }
                wv = cache[k - blk * be];
            }
            wt[(lk + j) * kTile + lr] = wv;
            xt[lr * kTile + lk + j] = (tok_ok && k < p.K) ? xs[(ulong)(t0 + lr) * p.x_stride + k] : 0.0f;
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        for (uint kk = 0; kk < kTile; kk += 8) {
            simdgroup_float8x8 a[2], b[2];
            for (uint i = 0; i < 2; i++) simdgroup_load(a[i], xt + (ct + 8 * i) * kTile + kk, kTile);
            for (uint j = 0; j < 2; j++) simdgroup_load(b[j], wt + kk * kTile + cn + 8 * j, kTile);
            for (uint i = 0; i < 2; i++)
                for (uint j = 0; j < 2; j++) simdgroup_multiply_accumulate(acc[i][j], a[i], b[j], acc[i][j]);
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    for (uint i = 0; i < 2; i++)
        for (uint j = 0; j < 2; j++) simdgroup_store(acc[i][j], yt + (ct + 8 * i) * kTile + cn + 8 * j, kTile);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint e = tid; e < kTile * kTile; e += n_threads) {
        const uint t = e / kTile, n = e % kTile;
        if (t0 + t < p.n_tokens && n0 + n < p.N)
            y[(ulong)(t0 + t) * p.y_stride + n0 + n] = yt[e] + (p.has_bias ? bias[n0 + n] : 0.0f);
    }
}

template <typename F>
kernel void gemm(device const uint8_t* W [[buffer(0)]], device const float* x [[buffer(1)]],
                 device float* y [[buffer(2)]], device const float* bias [[buffer(3)]],
                 constant MatmulParams& params [[buffer(AK_PARAMS)]], threadgroup float* shared AK_THREADGROUP_MEMORY,
                 AK_THREAD_ARGS) {
    const MatmulParams p = params;
    gemm_tile<F>(W, x, y, bias, p, tgpig.x * kTile, tgpig.y * kTile, shared, tiitg, ntg, sgitg);
}
AK_EXPORT_ALL_FORMATS(gemm, gemm)

// matmul_multi (MultiMatmulParams): up to three matrices of one format and K
// over the rows of a batch pass, in one dispatch: the grid's x runs over the
// row tiles of W0, then W1, then W2 (a threadgroup reads one matrix), each
// tile computed as gemm computes it. Buffers 0 x, 1-3 W0..W2, 4-6 y0..y2,
// then bias0 at 7 and bias1, bias2 at 9 and 10 (8 holds the parameters).
// Grid (row tiles of every matrix, token tiles).
kernel void matmul_multi(device const float* x [[buffer(0)]], device const uint8_t* W0 [[buffer(1)]],
                         device const uint8_t* W1 [[buffer(2)]], device const uint8_t* W2 [[buffer(3)]],
                         device float* y0 [[buffer(4)]], device float* y1 [[buffer(5)]], device float* y2 [[buffer(6)]],
                         device const float* b0 [[buffer(7)]], device const float* b1 [[buffer(9)]],
                         device const float* b2 [[buffer(10)]], constant MultiMatmulParams& mp [[buffer(AK_PARAMS)]],
                         threadgroup float* shared AK_THREADGROUP_MEMORY, AK_THREAD_ARGS) {
    uint tile = tgpig.x, i = 0;
    while (i + 1 < mp.n_mats && tile >= (mp.N[i] + kTile - 1) / kTile) {
        tile -= (mp.N[i] + kTile - 1) / kTile;
        i++;
    }
    MatmulParams p;
    p.N = mp.N[i];
    p.K = mp.K;
    p.n_tokens = mp.n_tokens;
    p.dtype = mp.dtype;
    p.x_stride = mp.x_stride;
    p.y_stride = mp.y_stride[i];
    p.has_bias = mp.has_bias;
    p.row0 = 0;
    p.invariant = 1;
    p.generated_rows = mp.generated_rows;
    device const uint8_t* W = i == 0 ? W0 : i == 1 ? W1 : W2;
    device float* y = i == 0 ? y0 : i == 1 ? y1 : y2;
    device const float* bias = i == 0 ? b0 : i == 1 ? b1 : b2;
    gemm_tile<FmtAny>(W, x, y, bias, p, tile * kTile, tgpig.y * kTile, shared, tiitg, ntg, sgitg);
}
AK_EXPORT_KERNEL(matmul_multi)
