// y[t, n] = sum_k W[n, k] x[t, k] (+ bias[n]) for every weight format (CPU
// twin: backend/cpu/kernels/matmul.cpp). Weights are decoded block by block
// with the shared decoders (core/quant_blocks.h); activations and sums are float.
//
// gemv: few tokens (decode, speculative verification). One SIMD group per
// output row: lanes take the row's blocks in turn, decode each once into
// thread memory and use it for every token, then simd_sum reduces.
// gemm: many tokens (prefill, encoders). A threadgroup of four SIMD groups
// computes a 32-row x 32-token tile with simdgroup_matrix 8x8 products; each
// K step decodes a 32 x 32 slice of W into threadgroup memory (transposed, so
// the products need no transposed loads) next to the 32 x 32 slice of x.
#include "formats.h"

enum { kGemvMaxTokens = 8 };  // above this the device runs gemm

template <typename F>
kernel void gemv(device const uint8_t* W [[buffer(0)]], device const float* x [[buffer(1)]],
                 device float* y [[buffer(2)]], device const float* bias [[buffer(3)]],
                 constant MatmulParams& p [[buffer(AK_PARAMS)]], AK_THREAD_ARGS) {
    const uint n = tgpig.x * nsg + sgitg;
    if (n >= p.N) return;
    const uint be = F::be(p.dtype), bb = F::bb(p.dtype), nb = p.K / be;
    const uint m = min(p.n_tokens, (uint)kGemvMaxTokens);
    device const uint8_t* row = W + (ulong)n * nb * bb;
    device const float* xs = x + (ulong)p.row0 * p.x_stride;
    float acc[kGemvMaxTokens];
    for (uint t = 0; t < kGemvMaxTokens; t++) acc[t] = 0.0f;
    float w[F::MAX_BE];
    for (uint b = tiisg; b < nb; b += 32) {
        F::decode(row + (ulong)b * bb, w, p.dtype);
        for (uint t = 0; t < m; t++) {
            device const float* xb = xs + (ulong)t * p.x_stride + (ulong)b * be;
            float s = 0.0f;
            for (uint j = 0; j < be; j++) s += w[j] * xb[j];
            acc[t] += s;
        }
    }
    for (uint t = 0; t < m; t++) {
        const float v = simd_sum(acc[t]);
        if (tiisg == 0) y[(ulong)t * p.y_stride + n] = v + (p.has_bias ? bias[n] : 0.0f);
    }
}
AK_EXPORT_ALL_FORMATS(gemv, gemv)

enum { kTile = 32 };  // rows of W, tokens and K per step

// Threadgroup memory: Wt[k][n] and X[t][k] slices, then Y[t][n] for the store.
template <typename F>
kernel void gemm(device const uint8_t* W [[buffer(0)]], device const float* x [[buffer(1)]],
                 device float* y [[buffer(2)]], device const float* bias [[buffer(3)]],
                 constant MatmulParams& p [[buffer(AK_PARAMS)]], threadgroup float* shared AK_THREADGROUP_MEMORY,
                 AK_THREAD_ARGS) {
    threadgroup float* wt = shared;                // [kTile k][kTile n]
    threadgroup float* xt = shared + kTile * kTile;  // [kTile t][kTile k]
    threadgroup float* yt = xt + kTile * kTile;      // [kTile t][kTile n]
    const uint n0 = tgpig.x * kTile, t0 = tgpig.y * kTile;
    const uint be = F::be(p.dtype), bb = F::bb(p.dtype), nb = p.K / be;
    device const float* xs = x + (ulong)p.row0 * p.x_stride;
    // Loader role: thread i fills 8 consecutive k of row (or token) i / 4.
    const uint lr = tiitg / 4, lk = (tiitg % 4) * 8;
    const bool row_ok = n0 + lr < p.N, tok_ok = t0 + lr < p.n_tokens;
    device const uint8_t* wrow = W + (ulong)(row_ok ? n0 + lr : 0) * nb * bb;
    float cache[F::MAX_BE];
    uint cached = 0xFFFFFFFFu;  // block index held in cache
    // Compute role: SIMD group s owns tokens [16 (s % 2), +16) x rows [16 (s / 2), +16).
    const uint ct = (sgitg % 2) * 16, cn = (sgitg / 2) * 16;
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
    for (uint e = tiitg; e < kTile * kTile; e += ntg) {
        const uint t = e / kTile, n = e % kTile;
        if (t0 + t < p.n_tokens && n0 + n < p.N)
            y[(ulong)(t0 + t) * p.y_stride + n0 + n] = yt[e] + (p.has_bias ? bias[n0 + n] : 0.0f);
    }
}
AK_EXPORT_ALL_FORMATS(gemm, gemm)
