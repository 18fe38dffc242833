// Fused decode projections (gemv_multi, see MultiGemvParams): Q, K and V in
// one launch, gate and up with the activation, a projection with its residual
// add, each optionally behind the input RMSNorm. A warp per output row as in
// gemv.cu. When every matrix has an integer lane layout (Q4_0, Q8_0, Q4_K,
// Q6_K, Q4_1, Q5_0, Q5_1, the x8 layouts), a kernel of its own normalizes and rounds x to 8 bits first (act_q8.h;
// or every block does, on request: round_in_block_bytes) and the rows take
// dp4a dots (gemv_q8_formats.cuh); otherwise a kernel of its own normalizes x
// into the scratch (or every block into shared memory: norm_at).
#include <algorithm>
#include <cstdlib>
#include <string>
#include <type_traits>
#include <vector>

#include "core/error.h"
#include "core/kernel_params.h"
#include "act_q8.cuh"
#include "cuda_kernel.h"
#include "decode_block.cuh"
#include "gemv.h"
#include "device_math.cuh"
#include "gemv_formats.cuh"
#include "gemv_q8_formats.cuh"

namespace akunu {
namespace {

using namespace gemv_formats;
constexpr int kWarps = 8;
constexpr int kMaxTokens = 8;
constexpr size_t kMaxShared = 200 * 1024;

struct Geometry {
    int elems[3], bytes[3];  // per matrix: block elements and bytes
};

// Formats without a lane layout: a lane decodes whole blocks (slow, general).
template <int M>
__device__ void generic_row_dot(uint32_t dtype, int be, int bb, const uint8_t* row, int K, const float* x, int m,
                                float* acc) {
    const DecodeUnit u = decode_unit_of(dtype, be, bb);
    const int nb = K / u.elems;
    float tmp[kMaxBlockElems];
    for (int b = threadIdx.x % 32; b < nb; b += 32) {
        decode_unit(dtype, row, b, u.bytes, tmp);
#pragma unroll
        for (int t = 0; t < M; t++) {
            if (t >= m) break;
            const float* xb = x + (size_t)t * K + (size_t)b * u.elems;
            float s = 0.0f;
            for (int j = 0; j < u.elems; j++) s += tmp[j] * xb[j];
            acc[t] += s;
        }
    }
}

template <int M>
__device__ void any_row_dot(uint32_t dtype, int be, int bb, const uint8_t* W, int row, int K, const float* x, int m,
                            float* acc) {
    const uint8_t* r = W + (size_t)row * (K / be) * bb;
    switch (dtype) {
        case GGML_Q4_0: row_dot<Q4_0, M>(r, K, x, K, m, acc); break;
        case GGML_Q8_0: row_dot<Q8_0, M>(r, K, x, K, m, acc); break;
        case GGML_Q4_K: row_dot<Q4_K, M>(r, K, x, K, m, acc); break;
        case GGML_Q6_K: row_dot<Q6_K, M>(r, K, x, K, m, acc); break;
        case GGML_F16: row_dot<Half<false>, M>(r, K, x, K, m, acc); break;
        case GGML_BF16: row_dot<Half<true>, M>(r, K, x, K, m, acc); break;
        case GGML_F32: row_dot<F32, M>(r, K, x, K, m, acc); break;
        default: generic_row_dot<M>(dtype, be, bb, r, K, x, m, acc); break;
    }
}

// x rounded in the block (act_q8.cuh) lies in shared memory: the m tokens'
// int8 values, then from this offset their {d, d * sum} pairs.
__host__ __device__ inline size_t in_block_q_bytes(int m, int K) { return ((size_t)m * K + 15) / 16 * 16; }
__host__ __device__ inline size_t in_block_bytes(int m, int K) {
    return in_block_q_bytes(m, K) + (size_t)m * (K / kQ8Block) * sizeof(float2);
}

// Asks L2 for the first `cap` bytes of one weight row.
__device__ void prefetch_row(const uint8_t* W, int be, int bb, int row, int K, uint32_t cap) {
    const size_t bytes = (size_t)(K / be) * bb;
    prefetch_l2(W + (size_t)row * bytes, bytes < cap ? bytes : cap);
}

// The float path's kernels: the runtime switch over every format (AnyFormat,
// the default) or, with AKUNU_CUDA_GEMV_FIXED set, one format compiled in
// where every matrix shares it. The switch's general decoder costs 128
// registers a thread, so an SM holds 2 blocks of 8 warps instead of 8; on the
// H100 that streamed the F16 weights faster at every benchmark shape (tg128
// Qwen3-0.6B 713 vs 639 tok/s, Llama-3.2-1B 656 vs 568, Llama-3.1-8B 144 vs
// 133, BENCHMARKS.md): fewer rows in flight at once, not more.
struct AnyFormat {};

// Row `row` of W (matrix i) times the m tokens' activations: x as floats,
// or (Q8) its 8-bit rounding xq.
template <bool Q8, int M, class F>
__device__ __forceinline__ void matrix_row_dot(const MultiGemvParams& p, const Geometry& g, int i, const uint8_t* W,
                                               int row, const float* x, ActQ8 xq, float* acc) {
    const int K = (int)p.K, m = (int)p.n_tokens;
    const uint8_t* r = W + (size_t)row * (K / g.elems[i]) * g.bytes[i];
    if constexpr (Q8)
        gemv_q8::any_row_dot<M>(p.dtype[i], r, K, xq.q, xq.ds, m, acc);
    else if constexpr (std::is_same_v<F, AnyFormat>)
        any_row_dot<M>(p.dtype[i], g.elems[i], g.bytes[i], W, row, K, x, m, acc);
    else
        row_dot<F, M>(r, K, x, K, m, acc);
}

// A Q8Link writer's side (gate modes): the outputs rounded to 8 bits for the
// next command. A block writes 8 rows, a 32-value block of the rounding spans
// 4 blocks: the last of the 4 to finish (a counter each, left at zero) rounds them.
// Accumulate mode: the sums (x += W v, the residual stream) rounded behind
// the reader's RMSNorm: each block leaves its rows' sums of squares in the
// partials, the last block of the grid to finish adds them up (in a fixed
// order) and rounds every value.
struct Q8Out {
    ActQ8 r;                       // r.q == nullptr: not asked
    ActQ8Norm norm;                // accumulate mode: the reader's norm
    uint32_t* counters = nullptr;  // gate modes: one per 32 rows; accumulate: the last one
    uint32_t n_counters = 0;
    double* partials = nullptr;    // accumulate: [token][block] sums of squares
    float* f32 = nullptr;          // accumulate: write the normalized floats here instead of rounding
};

__device__ void round_rows_for_next(const MultiGemvParams& p, const float* y0, const Q8Out& next) {
    constexpr uint32_t kBlocksPerGroup = kQ8Block / kWarps;
    __shared__ bool last;
    __threadfence();  // this block's outputs are visible before it is counted
    __syncthreads();
    const uint32_t group = blockIdx.x / kBlocksPerGroup;
    if (threadIdx.x == 0) last = atomicAdd(&next.counters[group], 1u) == kBlocksPerGroup - 1;
    __syncthreads();
    if (!last) return;
    __threadfence();
    const uint32_t warp = threadIdx.x / 32, K = p.N[0];
    if (warp < p.n_tokens)  // a warp per token, a lane per row
        round_block32_warp(__ldcg(y0 + (size_t)warp * K + group * kQ8Block + threadIdx.x % 32),
                           next.r.q + (size_t)warp * K + group * kQ8Block, next.r.ds + (size_t)warp * (K / kQ8Block) + group);
    if (threadIdx.x == 0) next.counters[group] = 0;
}

__device__ void norm_round_for_next(const MultiGemvParams& p, const float* y0, const Q8Out& next,
                                    const double (*row_sq)[kMaxTokens]) {
    __shared__ bool last;
    __shared__ double partial[32];
    const uint32_t m = p.n_tokens, blocks = gridDim.x, K = p.N[0];
    __syncthreads();  // row_sq complete
    if (threadIdx.x < m) {
        double s = 0;
        for (int w = 0; w < kWarps; w++) s += row_sq[w][threadIdx.x];
        next.partials[(size_t)threadIdx.x * blocks + blockIdx.x] = s;
    }
    __threadfence();  // this block's sums and partials are visible before it is counted
    __syncthreads();
    uint32_t* counter = next.counters + next.n_counters - 1;
    if (threadIdx.x == 0) last = atomicAdd(counter, 1u) == blocks - 1;
    __syncthreads();
    if (!last) return;
    __threadfence();
    for (uint32_t t = 0; t < m; t++) {
        double ss = 0;
        for (uint32_t b = threadIdx.x; b < blocks; b += blockDim.x) ss += __ldcg(&next.partials[(size_t)t * blocks + b]);
        ss = block_sum(ss, partial);
        const float scale = 1.0f / sqrtf((float)(ss / K) + next.norm.eps);  // as rms_scale
        if (next.f32) {  // as the normalize kernel (act_q8.cu)
            for (uint32_t i = threadIdx.x; i < K; i += blockDim.x)
                next.f32[(size_t)t * K + i] =
                    __ldcg(y0 + (size_t)t * K + i) * scale * (next.norm.weight[i] + next.norm.offset);
        } else {
            round_row_q8_scaled<true>(y0 + (size_t)t * K, K, scale, next.norm, threadIdx.x, blockDim.x,
                                      next.r.q + (size_t)t * K, next.r.ds + (size_t)t * (K / kQ8Block));
        }
    }
    if (threadIdx.x == 0) *counter = 0;
}

template <bool Q8, int M, class F>
__global__ void __launch_bounds__(kWarps * 32, Q8 && M == 1 ? 4 : 1)
    gemv_multi_kernel(MultiGemvParams p, Geometry g, const float* __restrict__ x, const float* __restrict__ norm_w,
                      ActQ8 xq, uint32_t prefetch, const uint8_t* W0, const uint8_t* W1, const uint8_t* W2, float* y0,
                      float* y1, float* y2, Q8Out next) {
    extern __shared__ float xs[];
    const int K = (int)p.K, m = (int)p.n_tokens;
    // This warp's matrix and row (Separate: the rows of W0, W1, W2 in turn).
    int row = blockIdx.x * kWarps + threadIdx.x / 32, mat = 0;
    if (p.mode == kGemvSeparate) {
        if (row >= (int)p.N[0]) { row -= p.N[0]; mat = 1; }
        if (mat == 1 && row >= (int)p.N[1]) { row -= p.N[1]; mat = 2; }
    }
    const bool active = mat < (int)(p.mode == kGemvSeparate ? p.n_mats : 1) && row < (int)p.N[mat];
    const uint8_t* W = mat == 0 ? W0 : mat == 1 ? W1 : W2;
    // The weight rows start for L2 while the kernel before this one finishes
    // (launch_pdl) and while the block normalizes x.
    if (active && prefetch) {
        prefetch_row(W, g.elems[mat], g.bytes[mat], row, K, prefetch);
        if (p.mode == kGemvSiluGate || p.mode == kGemvGeluGate)
            prefetch_row(W1, g.elems[1], g.bytes[1], row, K, prefetch);
    }
    pdl_wait();
    pdl_launch_dependents();
    const float* xin = x;
    if (Q8 && !xq.q) {  // x rounded to 8 bits by this block (the launcher sized the shared memory)
        int8_t* q = reinterpret_cast<int8_t*>(xs);
        float2* ds = reinterpret_cast<float2*>(q + in_block_q_bytes(m, K));
        const ActQ8Norm norm{p.norm ? norm_w : nullptr, p.eps, p.weight_offset};
        for (int t = 0; t < m; t++)
            round_row_q8(x + (size_t)t * K, (uint32_t)K, norm, threadIdx.x, blockDim.x, q + (size_t)t * K,
                         ds + (size_t)t * (K / kQ8Block));
        __syncthreads();
        xq = ActQ8{q, ds};
    }
    if (p.norm && !Q8) {  // (the launcher clears p.norm where a kernel of its own normalized x)
        // as the rmsnorm kernel: double sum of squares, then x * scale * (w + offset)
        for (int t = 0; t < m; t++) {
            const float* xr = x + (size_t)t * K;
            const float scale = rms_scale(xr, (uint32_t)K, p.eps);
            for (int i = threadIdx.x; i < K; i += blockDim.x)
                xs[(size_t)t * K + i] = xr[i] * scale * (norm_w[i] + p.weight_offset);
        }
        __syncthreads();
        xin = xs;
    }
    if (!active) return;
    const bool lane0 = threadIdx.x % 32 == 0;
    const float xscale = act_scale(xq, K);  // (x made ahead of its norm's scale: ActQ8::sumsq)
    float acc[M], acc2[M];
#pragma unroll
    for (int t = 0; t < M; t++) acc[t] = acc2[t] = 0.0f;
    if (p.mode == kGemvSeparate) {
        const int i = mat;
        float* y = i == 0 ? y0 : i == 1 ? y1 : y2;
        matrix_row_dot<Q8, M, F>(p, g, i, W, row, xin, xq, acc);
#pragma unroll
        for (int t = 0; t < M; t++) {
            if (t >= m) break;
            const float v = warp_sum(acc[t]) * xscale;
            if (lane0) y[(size_t)t * p.N[i] + row] = v;
        }
        return;
    }
    matrix_row_dot<Q8, M, F>(p, g, 0, W0, row, xin, xq, acc);
    if (p.mode != kGemvAccumulate) matrix_row_dot<Q8, M, F>(p, g, 1, W1, row, xin, xq, acc2);
    __shared__ double row_sq[kWarps][kMaxTokens];  // accumulate + Q8Link: each row's new value squared
#pragma unroll
    for (int t = 0; t < M; t++) {
        if (t >= m) break;
        const float v = warp_sum(acc[t]) * xscale;
        float* out = y0 + (size_t)t * p.N[0] + row;
        if (p.mode == kGemvAccumulate) {
            if (lane0) {
                const float h = *out + v;
                *out = h;
                if (next.r.q || next.f32) row_sq[threadIdx.x / 32][t] = (double)h * h;  // only when linked
            }
        } else {
            const float u = warp_sum(acc2[t]) * xscale;
            if (lane0) *out = (p.mode == kGemvGeluGate ? gelu(v) : silu(v)) * u;
        }
    }
    // (linked only where N[0] % 32 == 0: every warp of every block is active and gets here)
    if ((next.r.q || next.f32) && p.mode == kGemvAccumulate) norm_round_for_next(p, y0, next, row_sq);
    else if (next.r.q) round_rows_for_next(p, y0, next);
}

// The decode hot path alone: one token, x already rounded to 8 bits (by a
// kernel of its own or a Q8Link writer), nothing linked after. A GEMV this
// size is bound by the weight bytes in flight, so what counts is warps
// resident: kept to 32 registers (8 blocks an SM) where gemv_multi_kernel,
// carrying the in-block rounding and the Q8Link writers, takes 51 (4 blocks).
// ncu on the H100, Llama-3.1-8B Q4_0 gate+up: 50.8 us at 51 registers; a
// standalone 32-register kernel of the same loads 27.6 us
// (tools/gemv_layout_bench.cu). F: one format for every matrix, or AnyQ8.
// The float formats (F16, BF16, F32 rows against float x, already
// normalized) take the same kernel: their GEMVs are bound by the same thing.
struct AnyQ8 {};

template <class F>
constexpr bool is_float_format() {
    return std::is_same_v<F, Half<false, true>> || std::is_same_v<F, Half<true, true>> || std::is_same_v<F, F32>;
}

// The lean kernel's x: 8-bit (the integer formats) or float (is_float_format).
struct LeanX {
    ActQ8 q;
    const float* f;
};

template <class F>
__device__ __forceinline__ void lean_row_dot(uint32_t dtype, const uint8_t* r, int K, const LeanX& x, float* acc,
                                             int part, int parts) {
    if constexpr (std::is_same_v<F, AnyQ8>)
        gemv_q8::any_row_dot<1>(dtype, r, K, x.q.q, x.q.ds, 1, acc, part, parts);
    else if constexpr (is_float_format<F>())
        float_row_dot<F>(r, K, x.f, acc, part, parts);
    else
        gemv_q8::row_dot<F, 1>(r, K, x.q.q, x.q.ds, 1, acc, part, parts);
}

// Blocks an SM each format's lean kernel is built for: the most whose
// register budget (32, 40, 48 or 64 a thread) its loop fits without spilling.
template <class F>
constexpr int lean_blocks_per_sm() {
    return std::is_same_v<F, gemv_q8::Q4_0>                                   ? 8
           : std::is_same_v<F, gemv_q8::Q4_0X8> || is_float_format<F>()         ? 6
           : std::is_same_v<F, gemv_q8::Q6_KX8>                                 ? 4
                                                                                : 5;
}

// Warps an output row takes: `split` warps a matrix row (each a share of its
// K: a short grid still fills the GPU), times 2 where gate and up rows go
// to warps of their own (AKUNU_CUDA_GEMV_PAIR=0; the default pairs them on
// one warp, see Paired, since each such warp loaded all of x for its row). The block's warps leave their sums in shared memory;
// a thread per output row adds them up in a fixed order.
// Paired (gated modes, one format for both matrices): a warp takes an output
// row's gate and up rows together (gemv_q8::row_dot_pair, or
// float_row_dot_pair for float rows), no split, no shared sums.
template <class F, bool Paired = false>
__global__ void __launch_bounds__(kWarps * 32, lean_blocks_per_sm<F>())
    gemv_multi_lean_kernel(MultiGemvParams p, Geometry g, LeanX x, uint32_t prefetch, int split, const uint8_t* W0,
                           const uint8_t* W1, const uint8_t* W2, float* y0, float* y1, float* y2) {
    if constexpr (Paired) {
        const int K = (int)p.K, row = blockIdx.x * kWarps + threadIdx.x / 32;
        const bool active = row < (int)p.N[0];
        const size_t row_bytes = (size_t)(K / g.elems[0]) * g.bytes[0];
        if (active && prefetch) {
            prefetch_row(W0, g.elems[0], g.bytes[0], row, K, prefetch);
            prefetch_row(W1, g.elems[0], g.bytes[0], row, K, prefetch);
        }
        pdl_wait();
        pdl_launch_dependents();
        if (!active) return;
        float v = 0.0f, u = 0.0f;
        if constexpr (is_float_format<F>())
            float_row_dot_pair<F>(W0 + row * row_bytes, W1 + row * row_bytes, K, x.f, &v, &u);
        else
            gemv_q8::row_dot_pair<F>(W0 + row * row_bytes, W1 + row * row_bytes, K, x.q.q, x.q.ds, &v, &u);
        const float scale = act_scale(x.q, K);
        v = warp_sum(v) * scale;
        u = warp_sum(u) * scale;
        if (threadIdx.x % 32 == 0) y0[row] = (p.mode == kGemvGeluGate ? gelu(v) : silu(v)) * u;
        return;
    }
    __shared__ float sums[kWarps];
    const int K = (int)p.K, warp = threadIdx.x / 32;
    const bool gated = p.mode == kGemvSiluGate || p.mode == kGemvGeluGate;
    const int per_row = split * (gated ? 2 : 1), rows_per_block = kWarps / per_row;
    const int part = warp % split, which = warp % per_row / split;
    // (the Separate-mode row mapping written out as in gemv_multi_kernel: a
    // shared helper cost the 32-register Q8_0 build 40 bytes of spills)
    int row = blockIdx.x * rows_per_block + warp / per_row, mat = gated ? which : 0;
    if (p.mode == kGemvSeparate) {
        if (row >= (int)p.N[0]) { row -= p.N[0]; mat = 1; }
        if (mat == 1 && row >= (int)p.N[1]) { row -= p.N[1]; mat = 2; }
    }
    const bool active = mat < (int)(p.mode == kGemvSeparate ? p.n_mats : gated ? 2 : 1) &&
                        row < (int)p.N[p.mode == kGemvSeparate ? mat : 0];
    const uint8_t* W = mat == 0 ? W0 : mat == 1 ? W1 : W2;
    if (active && prefetch && part == 0) prefetch_row(W, g.elems[mat], g.bytes[mat], row, K, prefetch);  // (as gemv_multi_kernel)
    pdl_wait();
    pdl_launch_dependents();
    float acc = 0.0f;
    if (active) lean_row_dot<F>(p.dtype[mat], W + row * ((size_t)(K / g.elems[mat]) * g.bytes[mat]), K, x, &acc, part, split);
    acc = warp_sum(acc) * act_scale(x.q, K);  // (float x too: a writer may defer its norm's scale)
    if (per_row == 1) {
        if (active && threadIdx.x % 32 == 0) {
            if (p.mode == kGemvAccumulate) y0[row] += acc;
            else (mat == 0 ? y0 : mat == 1 ? y1 : y2)[row] = acc;
        }
        return;
    }
    if (threadIdx.x % 32 == 0) sums[warp] = acc;
    __syncthreads();
    if (threadIdx.x >= rows_per_block) return;
    // thread t: output row t of the block, its warps t * per_row ...
    const int w0 = threadIdx.x * per_row;
    row = blockIdx.x * rows_per_block + threadIdx.x;
    mat = 0;
    if (p.mode == kGemvSeparate) {
        if (row >= (int)p.N[0]) { row -= p.N[0]; mat = 1; }
        if (mat == 1 && row >= (int)p.N[1]) { row -= p.N[1]; mat = 2; }
    }
    if (mat >= (int)(p.mode == kGemvSeparate ? p.n_mats : 1) || row >= (int)p.N[mat]) return;
    float v = 0.0f;
    for (int i = 0; i < split; i++) v += sums[w0 + i];
    if (gated) {
        float u = 0.0f;
        for (int i = 0; i < split; i++) u += sums[w0 + split + i];
        y0[row] = (p.mode == kGemvGeluGate ? gelu(v) : silu(v)) * u;
    } else if (p.mode == kGemvAccumulate) {
        y0[row] += v;
    } else {
        (mat == 0 ? y0 : mat == 1 ? y1 : y2)[row] = v;
    }
}

// Gate + up + activation for one token, its outputs also rounded to 8 bits
// for the down projection (a Q8Link gate writer) inside the block: 32 warps
// take 32 output rows, one 32-value block of the rounding, each warp an
// output row's gate and up rows (gemv_q8::row_dot_pair). The rounding needs
// only the block's shared memory and one barrier, where round_rows_for_next
// (8-row blocks) costs each block a fence and an atomic and the last of 4 a
// reload: that path lost more than the rounding kernel it saves (BENCHMARKS.md).
// The same bytes as the rounding kernel writes (round_block32_warp).
constexpr int kRoundWarps = kQ8Block;
template <class F>
__global__ void __launch_bounds__(kRoundWarps * 32, 1)
    gemv_gate_round_kernel(MultiGemvParams p, Geometry g, ActQ8 xq, uint32_t prefetch, const uint8_t* W0,
                           const uint8_t* W1, float* y0, ActQ8 out) {
    __shared__ float h[kRoundWarps];
    const int K = (int)p.K, warp = threadIdx.x / 32, row = blockIdx.x * kRoundWarps + warp;
    const size_t row_bytes = (size_t)(K / g.elems[0]) * g.bytes[0];
    if (prefetch) {  // (every row is there: the launcher asks for N % 32 == 0)
        prefetch_row(W0, g.elems[0], g.bytes[0], row, K, prefetch);
        prefetch_row(W1, g.elems[0], g.bytes[0], row, K, prefetch);
    }
    pdl_wait();
    pdl_launch_dependents();
    float v = 0.0f, u = 0.0f;
    gemv_q8::row_dot_pair<F>(W0 + row * row_bytes, W1 + row * row_bytes, K, xq.q, xq.ds, &v, &u);
    const float scale = act_scale(xq, K);
    v = warp_sum(v) * scale;
    u = warp_sum(u) * scale;
    if (threadIdx.x % 32 == 0) {
        const float y = (p.mode == kGemvGeluGate ? gelu(v) : silu(v)) * u;
        y0[row] = y;
        h[warp] = y;
    }
    __syncthreads();
    if (warp == 0) round_block32_warp(h[threadIdx.x], out.q + (size_t)blockIdx.x * kQ8Block, out.ds + blockIdx.x);
}

// A projection added to the residual stream (y0 += W x) for one token, the
// new values also made ready for the next normed projection (a Q8Link
// residual writer) inside blocks of 32 warps as gemv_gate_round_kernel:
// rounded to 8 bits (out.q: 32 rows a block, a warp a row) or as floats
// (out_f32, a float reader; `split` warps a row as the lean float kernel
// splits them, so a block holds 32 / split rows). The block sees only its
// rows, not the norm's sum over all of them, so it writes
// y * (weight + offset) and leaves its rows' sum of squares; the reader
// applies the scale (ActQ8::sumsq, act_scale). F: an integer lane format
// against x rounded to 8 bits, or a float one against float x (lean_row_dot).
template <class F>
__global__ void __launch_bounds__(kRoundWarps * 32, 1)
    gemv_residual_round_kernel(MultiGemvParams p, Geometry g, LeanX x, uint32_t prefetch, int split,
                               const uint8_t* W0, float* y0, ActQ8 out, float* out_f32, ActQ8Norm norm) {
    __shared__ float h[kRoundWarps];
    const int parts = is_float_format<F>() ? split : 1;  // (rounding to 8 bits needs a warp a row)
    const int rows = kRoundWarps / parts, first = blockIdx.x * rows, lane = threadIdx.x % 32;
    const int K = (int)p.K, warp = threadIdx.x / 32, row = first + warp / parts, part = warp % parts;
    const size_t row_bytes = (size_t)(K / g.elems[0]) * g.bytes[0];
    if (prefetch && part == 0) prefetch_row(W0, g.elems[0], g.bytes[0], row, K, prefetch);
    // warp 0's lane i finishes row first + i: its norm weight (which never
    // changes during a step) before the wait, its old value after it, both
    // under the dot's latency
    const bool finishes = warp == 0 && lane < rows;
    const float w = finishes && norm.weight ? norm.weight[first + lane] + norm.offset : 1.0f;
    pdl_wait();
    pdl_launch_dependents();
    const float old = finishes ? y0[first + lane] : 0.0f;
    float acc = 0.0f;
    lean_row_dot<F>(p.dtype[0], W0 + row * row_bytes, K, x, &acc, part, parts);
    acc = warp_sum(acc) * act_scale(x.q, K);
    if (lane == 0) h[warp] = acc;
    __syncthreads();
    if (warp != 0) return;
    float y = 0.0f;
    if (finishes) {
        float v = 0.0f;
        for (int i = 0; i < parts; i++) v += h[lane * parts + i];
        y = old + v;
        y0[first + lane] = y;
        if (out_f32) out_f32[first + lane] = y * w;
    }
    if (out.q) round_block32_warp<false>(y * w, out.q + (size_t)blockIdx.x * kQ8Block, out.ds + blockIdx.x);
    if (out.sumsq) {
        const float ss = warp_sum(y * y);
        if (lane == 0) out.sumsq[blockIdx.x] = ss;
    }
}

using GateRoundKernel = void (*)(MultiGemvParams, Geometry, ActQ8, uint32_t, const uint8_t*, const uint8_t*, float*,
                                 ActQ8);
using ResidualRoundKernel = void (*)(MultiGemvParams, Geometry, LeanX, uint32_t, int, const uint8_t*, float*,
                                     ActQ8, float*, ActQ8Norm);

// The in-block writer kernels compiled for one integer format (Float: or
// one float format); nullptr for a format without one.
template <template <class> class Kernel, class Ptr, bool Float = false>
Ptr typed_round_kernel(uint32_t dtype) {
    if constexpr (Float) {
        switch (dtype) {
            case GGML_F16: return Kernel<Half<false, true>>::get();
            case GGML_BF16: return Kernel<Half<true, true>>::get();
            case GGML_F32: return Kernel<F32>::get();
            default: break;
        }
    }
    switch (dtype) {
        case GGML_Q4_0: return Kernel<gemv_q8::Q4_0>::get();
        case GGML_Q8_0: return Kernel<gemv_q8::Q8_0>::get();
        case GGML_Q4_K: return Kernel<gemv_q8::Q4_K>::get();
        case GGML_Q6_K: return Kernel<gemv_q8::Q6_K>::get();
        case AKUNU_Q4_0_X8: return Kernel<gemv_q8::Q4_0X8>::get();
        case AKUNU_Q8_0_X8: return Kernel<gemv_q8::Q8_0X8>::get();
        case AKUNU_Q6_K_X8: return Kernel<gemv_q8::Q6_KX8>::get();
        default: return nullptr;
    }
}
template <class F>
struct GateRound {
    static GateRoundKernel get() { return gemv_gate_round_kernel<F>; }
};
template <class F>
struct ResidualRound {
    static ResidualRoundKernel get() { return gemv_residual_round_kernel<F>; }
};

using LeanKernel = void (*)(MultiGemvParams, Geometry, LeanX, uint32_t, int, const uint8_t*, const uint8_t*,
                            const uint8_t*, float*, float*, float*);

uint32_t total_rows(const MultiGemvParams& p);
uint32_t matrices_used(const MultiGemvParams& p);

// Gate + up + activation modes: two matrices an output row.
bool is_gated(const MultiGemvParams& p) { return p.mode == kGemvSiluGate || p.mode == kGemvGeluGate; }

// Float rows (F16: 2 bytes a weight, 3.6x Q4_0's) split among warps until
// the grid holds 4096 warps, each with at least 4 steps of its row: Qwen3-0.6B's
// O / down projections (1024 rows) would otherwise run 8 warps an SM.
// AKUNU_CUDA_GEMV_FLOAT_SPLIT=N: at most N (1: never split). H100 tg128 as
// in float_lean_kernel: 1105 / 921 tok/s split vs 1025 / 893 not.
int float_lean_split(const MultiGemvParams& p, int pair) {
    static const int most = [] {
        const char* e = std::getenv("AKUNU_CUDA_GEMV_FLOAT_SPLIT");
        const int n = e ? std::atoi(e) : 4;
        return n == 1 || n == 2 || n == 4 ? n : 4;
    }();
    const uint32_t steps = p.K / (8 * 32);  // 16-byte lane loads of F16 (F32: twice as many)
    int split = 1;
    while (split < most && (size_t)total_rows(p) * pair * split < 4096 && steps >= 4u * split && pair * split < kWarps)
        split *= 2;
    return split;
}

// Warps a matrix row (see gemv_multi_lean_kernel): 1 unless
// AKUNU_CUDA_GEMV_SPLIT=2|4|8 asks for more. On the H100 splitting gave the
// 8B shapes nothing measurable and slowed Qwen3-0.6B's (short grids of short
// rows: tg128 of a 4-layer Q4_0 file 5063 tok/s split to 4 blocks an SM vs
// 6139 unsplit), so it stays for A/B runs.
int lean_split(const MultiGemvParams& p) {
    static const int fixed = [] {
        const char* e = std::getenv("AKUNU_CUDA_GEMV_SPLIT");
        return e ? std::atoi(e) : 1;
    }();
    const int pair = is_gated(p) ? 2 : 1;
    if (!gemv_q8::has_q8_layout(p.dtype[0])) return float_lean_split(p, pair);
    return fixed == 2 || fixed == 4 || (fixed == 8 && pair == 1) ? fixed : 1;
}

// The lean kernel compiled for one integer format (Paired: gate and up rows
// on one warp); nullptr for a format without one.
template <bool Paired>
LeanKernel typed_lean_kernel(uint32_t dtype) {
    switch (dtype) {
        case GGML_Q4_0: return gemv_multi_lean_kernel<gemv_q8::Q4_0, Paired>;
        case GGML_Q8_0: return gemv_multi_lean_kernel<gemv_q8::Q8_0, Paired>;
        case GGML_Q4_K: return gemv_multi_lean_kernel<gemv_q8::Q4_K, Paired>;
        case GGML_Q6_K: return gemv_multi_lean_kernel<gemv_q8::Q6_K, Paired>;
        case AKUNU_Q4_0_X8: return gemv_multi_lean_kernel<gemv_q8::Q4_0X8, Paired>;
        case AKUNU_Q8_0_X8: return gemv_multi_lean_kernel<gemv_q8::Q8_0X8, Paired>;
        case AKUNU_Q6_K_X8: return gemv_multi_lean_kernel<gemv_q8::Q6_KX8, Paired>;
        default: return nullptr;
    }
}

// The lean kernel for these matrices: compiled for their one format, or the
// switch where they mix (Q4_K_M files: Q4_K beside Q6_K).
LeanKernel lean_kernel(const MultiGemvParams& p, uint32_t used) {
    bool uniform = true;
    for (uint32_t i = 1; i < used; i++) uniform = uniform && p.dtype[i] == p.dtype[0];
    if (uniform)
        if (LeanKernel k = typed_lean_kernel<false>(p.dtype[0])) return k;
    return gemv_multi_lean_kernel<AnyQ8>;
}

// The paired lean kernel (gate and up rows on one warp) for a gated launch
// whose two matrices share one integer format; nullptr otherwise, or with
// AKUNU_CUDA_GEMV_PAIR=0 (a warp a matrix row, for A/B runs).
// AKUNU_CUDA_GEMV_PAIR=all: also where the lean rule (lean_fits) says no.
EnvReach pair_at() {
    static const EnvReach at = env_reach("AKUNU_CUDA_GEMV_PAIR");
    return at;
}
LeanKernel paired_lean_kernel(const MultiGemvParams& p) {
    if (pair_at() == EnvReach::Never || !is_gated(p) || p.dtype[1] != p.dtype[0] || lean_split(p) != 1) return nullptr;
    return typed_lean_kernel<true>(p.dtype[0]);
}

// The lean kernel compiled for one float format (Paired: gate and up rows on
// one warp); nullptr for any other format.
template <bool Paired>
LeanKernel typed_float_lean_kernel(uint32_t dtype) {
    switch (dtype) {
        case GGML_F16: return gemv_multi_lean_kernel<Half<false, true>, Paired>;
        case GGML_BF16: return gemv_multi_lean_kernel<Half<true, true>, Paired>;
        case GGML_F32: return gemv_multi_lean_kernel<F32, Paired>;
        default: return nullptr;
    }
}

// The lean kernel for float rows where every matrix shares one float format
// and x needs no norm in the blocks (kp.norm clear: a kernel of its own or a
// Q8Link writer normalized it); nullptr otherwise, or with
// AKUNU_CUDA_GEMV_FLOAT_LEAN=0 (the general float kernel, AnyFormat: 16
// warps an SM, no split rows). The weights bypass L1 (Half's Stream). H100
// tg128, every layer of Qwen3-0.6B / Llama-3.2-1B in F16 (32768 vocabulary,
// BENCHMARKS.md): 1105 / 921 tok/s vs 1002 / 859 with the general kernel;
// at 4 blocks an SM (64 registers) 1045 / 897, at 8 (32, spilling) 1036 / 922.
LeanKernel float_lean_kernel(const MultiGemvParams& kp, uint32_t used) {
    static const bool off = env_switched_off("AKUNU_CUDA_GEMV_FLOAT_LEAN");
    if (off || kp.norm || kp.n_tokens != 1) return nullptr;
    for (uint32_t i = 1; i < used; i++)
        if (kp.dtype[i] != kp.dtype[0]) return nullptr;
    return typed_float_lean_kernel<false>(kp.dtype[0]);
}

// The paired lean float kernel (gate and up rows of one output on one warp,
// x read once for both: float_row_dot_pair) for a gated launch the lean
// float kernel takes unsplit; nullptr otherwise, or with
// AKUNU_CUDA_GEMV_PAIR=0. H100 tg128, F16, 32768 vocabulary (session 19):
// 0.6B 1287 vs 1227, 1B 1072 vs 1004, 8B 193.8 vs 190.8 tok/s (its gate +
// up 80.7 vs 85.0 us a layer: 2.91 TB/s).
LeanKernel paired_float_lean_kernel(const MultiGemvParams& kp, uint32_t used) {
    if (pair_at() == EnvReach::Never || !is_gated(kp) || !float_lean_kernel(kp, used) || lean_split(kp) != 1)
        return nullptr;
    return typed_float_lean_kernel<true>(kp.dtype[0]);
}

// Whether a one-token launch takes the lean kernel: where its weights are
// many (8 MiB and up) and its grid long (3 blocks an SM and up), so that
// warps resident set the pace; and (AKUNU_CUDA_GEMV_LEAN_LONG=0: not) where
// its rows are long and many (K and rows both 2048 and up). Short rows
// (Qwen3-0.6B's: K 1024 to 3072, 1024 rows for O / down) run faster on
// gemv_multi_kernel, whose larger register budget keeps more of each warp's
// loads in flight. H100 tg128 (BENCHMARKS.md, files of the real shapes with
// a 32768 vocabulary): 8B Q4_0 lean everywhere 1375 tok/s vs nowhere 1166;
// Llama-3.2-1B, every GEMV lean vs from 8 MiB and 3 blocks an SM (gate / up
// alone): Q4_0 1531 vs 1422, Q8_0 1324 vs 1197; Qwen3-0.6B Q4_0 the other
// way, 1273 vs 1426 (its O and down alone lean: 1345).
// AKUNU_CUDA_GEMV_LEAN=0 / 1: never / always; AKUNU_CUDA_GEMV_LEAN_MB: the size.
bool lean_fits(const MultiGemvParams& p, const Geometry& g) {
    static const int forced = [] {
        const char* e = std::getenv("AKUNU_CUDA_GEMV_LEAN");
        return e ? std::atoi(e) : -1;
    }();
    static const size_t threshold = [] {
        const char* e = std::getenv("AKUNU_CUDA_GEMV_LEAN_MB");
        return (e ? (size_t)std::strtoull(e, nullptr, 10) : 8) << 20;
    }();
    static const bool long_rows = !env_switched_off("AKUNU_CUDA_GEMV_LEAN_LONG");
    if (forced >= 0) return forced != 0;
    if (long_rows && p.K >= 2048 && total_rows(p) * (is_gated(p) ? 2 : 1) >= 2048) return true;
    if ((size_t)total_rows(p) * (is_gated(p) ? 2 : 1) < (size_t)3 * sm_count() * kWarps) return false;
    size_t bytes = 0;
    for (uint32_t i = 0; i < matrices_used(p); i++)
        bytes += (size_t)(p.mode == kGemvSeparate ? p.N[i] : p.N[0]) * (p.K / g.elems[i]) * g.bytes[i];
    return bytes >= threshold;
}

using Kernel = void (*)(MultiGemvParams, Geometry, const float*, const float*, ActQ8, uint32_t, const uint8_t*,
                       const uint8_t*, const uint8_t*, float*, float*, float*, Q8Out);

// Where the float path normalizes x (AKUNU_CUDA_GEMV_NORM, for A/B runs):
// "kernel" (default) a kernel of its own into the scratch; "block" every
// block into shared memory; "prefetch" that, with the block's whole weight
// rows asked into L2 meanwhile (else only their first gemv_prefetch_bytes()).
enum class NormAt { Kernel, Block, BlockPrefetch };
NormAt norm_at() {
    static const NormAt at = [] {
        const std::string v = env_string("AKUNU_CUDA_GEMV_NORM");
        return v == "block" ? NormAt::Block : v == "prefetch" ? NormAt::BlockPrefetch : NormAt::Kernel;
    }();
    return at;
}

template <bool Q8, class F>
Kernel kernel_for(uint32_t n_tokens) {
    return n_tokens == 1 ? gemv_multi_kernel<Q8, 1, F> : gemv_multi_kernel<Q8, kMaxTokens, F>;
}

// The float path's kernel (see AnyFormat).
Kernel float_kernel(const MultiGemvParams& p, uint32_t used) {
    static const bool fixed = std::getenv("AKUNU_CUDA_GEMV_FIXED") != nullptr;
    bool uniform = fixed;
    for (uint32_t i = 1; i < used; i++) uniform = uniform && p.dtype[i] == p.dtype[0];
    if (uniform) {
        switch (p.dtype[0]) {
            case GGML_F16: return kernel_for<false, Half<false>>(p.n_tokens);
            case GGML_BF16: return kernel_for<false, Half<true>>(p.n_tokens);
            case GGML_F32: return kernel_for<false, F32>(p.n_tokens);
            default: break;
        }
    }
    return kernel_for<false, AnyFormat>(p.n_tokens);
}

// Whether the blocks round x to 8 bits themselves (no kernel of its own: one
// launch and one dependent round trip fewer) or a kernel does it first: in
// the blocks while all of them together re-read at most this many bytes of x
// from L2. AKUNU_CUDA_GEMV_ROUND_KB=N (default 0: always the kernel). On the
// H100 with programmatic launches the blocks' rounding did not pay: tg128
// Q4_0 Qwen3-0.6B 914 vs 921 tok/s, Llama-3.2-1B 884 vs 1021 (BENCHMARKS.md).
size_t round_in_block_bytes() {
    static const size_t bytes = [] {
        const char* e = std::getenv("AKUNU_CUDA_GEMV_ROUND_KB");
        return e ? (size_t)std::strtoull(e, nullptr, 10) * 1024 : 0;
    }();
    return bytes;
}

// Lets kernel k take the shared memory the input norm may need (once per kernel).
void allow_shared(const void* k) {
    static std::vector<const void*> done;
    if (std::find(done.begin(), done.end(), k) != done.end()) return;
    cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)kMaxShared);
    done.push_back(k);
}

// The lane layouts' alignment needs (else the general path for that matrix).
bool lane_layout_fits(uint32_t dtype, uint32_t K, const void* W) {
    const uintptr_t w = reinterpret_cast<uintptr_t>(W);
    switch (dtype) {
        case GGML_Q4_0: case GGML_Q8_0: case GGML_Q4_1: case GGML_Q5_0: case GGML_Q5_1: return K % 32 == 0 && w % 2 == 0;
        case GGML_Q4_K: case AKUNU_Q4_0_X8: case AKUNU_Q8_0_X8: return K % 256 == 0 && w % 16 == 0;
        case GGML_Q6_K: return K % 256 == 0 && w % 2 == 0;
        case AKUNU_Q6_K_X8: return K % 2048 == 0 && w % 16 == 0;
        case GGML_F16: case GGML_BF16: return K % 8 == 0 && w % 16 == 0;
        case GGML_F32: return K % 4 == 0 && w % 16 == 0;
        default: return true;  // the general path has no alignment needs
    }
}

uint32_t matrices_used(const MultiGemvParams& p) {
    return p.mode == kGemvSeparate ? p.n_mats : p.mode == kGemvAccumulate ? 1 : 2;
}

uint32_t total_rows(const MultiGemvParams& p) {
    uint32_t rows = p.N[0];
    if (p.mode == kGemvSeparate)
        for (uint32_t i = 1; i < p.n_mats; i++) rows += p.N[i];
    return rows;
}

// Whether every block rounds x itself (see round_in_block_bytes).
bool rounds_in_block(const MultiGemvParams& p) {
    const unsigned blocks = (total_rows(p) + kWarps - 1) / kWarps;
    return p.K % kQ8Block == 0 && (size_t)blocks * p.K * sizeof(float) <= round_in_block_bytes() &&
           in_block_bytes((int)p.n_tokens, (int)p.K) <= kMaxShared;
}

// Warps a row of the float residual writer: as the lean float kernel would
// split it (float_lean_split), so the writer's grid fills the GPU as that
// kernel's does; 1 for integer rows (rounding to 8 bits needs a warp a row).
// At most kRoundWarps / kMinSumsqRows (the room act_f32_layout leaves for
// the sums of squares); AKUNU_CUDA_FLOAT_WRITER_SPLIT=1|2: at most that (A/B runs).
int residual_writer_split(const MultiGemvParams& p) {
    constexpr int kMost = kRoundWarps / kMinSumsqRows;
    static const int most = [] {
        const char* e = std::getenv("AKUNU_CUDA_FLOAT_WRITER_SPLIT");
        const int n = e ? std::atoi(e) : kMost;
        return n >= 1 && n < kMost && (n & (n - 1)) == 0 ? n : kMost;
    }();
    return gemv_q8::has_q8_layout(p.dtype[0]) ? 1 : std::min(most, float_lean_split(p, 1));
}

// The float residual writer against the lean float kernel plus a normalize
// kernel before the reader. Unsplit (a warp a row, 32 warps a block), H100
// tg128, every layer of the shape in F16 (32768 vocabulary, BENCHMARKS.md
// session 18): Llama-3.2-1B (2048 rows, 64 blocks) 956 vs 895 tok/s;
// Qwen3-0.6B (1024 rows: 32 blocks, a quarter of the SMs) 1076 vs 1117.
// Split as the lean kernel splits (residual_writer_split) its grid holds
// 128 blocks at all three shapes, and it pays at each (session 19, same
// method; vs AKUNU_CUDA_Q8_LINK=attention): 0.6B 1222 vs 1118, 1B 1002 vs
// 893 (unsplit: 952), Llama-3.1-8B 190.7 vs 173.8 (there its O / down read
// 2.95 TB/s by tools/trace_decode.py, the lean kernel's gate + up 2.76).
// 16- or 32-warp blocks for the lean float kernel lost at every shape (8B
// 187.0 / 168.3 vs 191.0), as did splitting its rows to 8192 or 16384
// warps (8B 191.0 / 186.3 vs 194.0 with float pairing).
bool float_block_writer_pays(const MultiGemvParams& p) {
    return p.N[0] / (kRoundWarps / residual_writer_split(p)) >= 64;
}

// Where the in-block writers run (AKUNU_CUDA_Q8_LINK_BLOCK, for A/B runs):
// "0" never (the counters of gemv_multi_kernel instead), "all" wherever they
// can (gate + up's and the float residual writer past their rules).
EnvReach block_writers() {
    static const EnvReach at = env_reach("AKUNU_CUDA_Q8_LINK_BLOCK");
    return at;
}

// Whether this launch, a Q8Link gate or residual writer, prepares its
// outputs inside 32-row blocks (gemv_gate_round_kernel,
// gemv_residual_round_kernel): one token, whole blocks, one integer format
// whose x is rounded to 8 bits ahead of it, or float rows (the residual
// writer, where float_block_writer_pays); gate + up only where the lean rule
// leaves it to gemv_multi_kernel (Qwen3-0.6B's; at Llama-3.2-1B's the paired
// lean kernel and a rounding kernel after it were faster).
bool block_writer_fits(const CudaArgs& a, const MultiGemvParams& p) {
    if (block_writers() == EnvReach::Never || p.n_tokens != 1 || p.N[0] % kQ8Block != 0 ||
        p.K % kQ8Block != 0 || rounds_in_block(p))
        return false;
    if ((reinterpret_cast<uintptr_t>(a.buf[0]) & 15) != 0) return false;
    if (p.mode == kGemvAccumulate && !gemv_q8::has_q8_layout(p.dtype[0]))  // float rows against float x
        return lane_layout_fits(p.dtype[0], p.K, a.buf[2]) &&
               typed_round_kernel<ResidualRound, ResidualRoundKernel, true>(p.dtype[0]) &&
               (block_writers() == EnvReach::All || float_block_writer_pays(p));
    ActQ8 own;  // where its own rounding of x goes, when no writer ahead did it
    if (!a.q8_in.q && !act_q8_layout(a, 1, p.K, 0, &own)) return false;
    Geometry g{};
    for (uint32_t i = 0; i < matrices_used(p); i++) {
        if (!gemv_q8::has_q8_layout(p.dtype[i]) || !lane_layout_fits(p.dtype[i], p.K, a.buf[2 + i])) return false;
        const DTypeDescriptor* dt = dtype_lookup(p.dtype[i]);
        g.elems[i] = (int)dt->block_elems;
        g.bytes[i] = (int)dt->block_bytes;
    }
    if (is_gated(p))
        return p.dtype[1] == p.dtype[0] && typed_round_kernel<GateRound, GateRoundKernel>(p.dtype[0]) &&
               (block_writers() == EnvReach::All || !lean_fits(p, g));
    return p.mode == kGemvAccumulate && typed_round_kernel<ResidualRound, ResidualRoundKernel>(p.dtype[0]);
}

// Q8Link reader: x (behind the input norm, if any) rounded to 8 bits by a
// kernel of its own before integer GEMVs; a writer ahead may round it instead.
bool gemv_multi_q8_input(const CudaArgs& a, Q8Link* link) {
    const MultiGemvParams p = a.p<MultiGemvParams>();
    if (p.n_mats < 1 || p.n_mats > 3 || p.mode > kGemvAccumulate || p.n_tokens == 0 ||
        p.n_tokens > (uint32_t)kMaxTokens || p.K % kQ8Block != 0)
        return false;
    if ((reinterpret_cast<uintptr_t>(a.buf[0]) & 15) != 0) return false;
    bool q8 = true;
    for (uint32_t i = 0; i < matrices_used(p); i++)
        q8 = q8 && gemv_q8::has_q8_layout(p.dtype[i]) && lane_layout_fits(p.dtype[i], p.K, a.buf[2 + i]);
    if (q8 && rounds_in_block(p)) return false;
    // float GEMVs read x itself, or behind the norm a kernel of its own computes (which a writer may do instead)
    if (!q8 && (!p.norm || norm_at() != NormAt::Kernel)) return false;
    *link = Q8Link{a.b<float>(0), p.K, p.n_tokens};
    if (p.norm) link->norm = ActQ8Norm{a.b<float>(1), p.eps, p.weight_offset};
    link->f32 = !q8;
    link->scales = p.n_tokens == 1;  // (every one-token kernel applies act_scale)
    return true;
}

// Q8Link writer: gate + up + activation rounds its outputs for the next
// command (the down projection) when asked; whole 32-row groups only.
bool gemv_multi_q8_output(const CudaArgs& a, Q8Link* link) {
    const MultiGemvParams p = a.p<MultiGemvParams>();
    if (p.N[0] % kQ8Block != 0 || p.n_tokens == 0 || p.n_tokens > (uint32_t)kMaxTokens || !a.q8_counters)
        return false;
    if (block_writer_fits(a, p)) {
        *link = Q8Link{a.b<float>(5), p.N[0], p.n_tokens};
        link->kind = is_gated(p) ? kQ8LinkGateBlock : kQ8LinkResidualBlock;
        link->norms = link->defers_norm = !is_gated(p);
        if (!is_gated(p)) link->sumsq_rows = kRoundWarps / residual_writer_split(p);
        return true;
    }
    if (p.mode == kGemvAccumulate) {  // the residual stream, behind the reader's norm if it has one
        if (p.n_mats < 1 || (size_t)p.n_tokens * (p.N[0] / kWarps) > a.q8_partial_count || !a.q8_partials)
            return false;
        *link = Q8Link{a.b<float>(5), p.N[0], p.n_tokens, ActQ8Norm{}, true};
        link->kind = kQ8LinkResidual;
        return true;
    }
    if ((p.mode != kGemvSiluGate && p.mode != kGemvGeluGate) || p.n_mats < 2 ||
        p.N[0] / kQ8Block >= a.q8_counter_count)  // (the last counter is accumulate mode's)
        return false;
    *link = Q8Link{a.b<float>(5), p.N[0], p.n_tokens};
    link->kind = kQ8LinkGate;
    return true;
}

void launch_gemv_multi(const CudaArgs& a) {
    const MultiGemvParams p = a.p<MultiGemvParams>();
    if (p.n_mats < 1 || p.n_mats > 3 || p.mode > kGemvAccumulate || (p.mode != kGemvSeparate && p.n_mats < 2 &&
                                                                      p.mode != kGemvAccumulate))
        throw Error("gemv_multi: bad matrix count or mode");
    if (p.n_tokens == 0 || p.n_tokens > (uint32_t)kMaxTokens)
        throw Error("gemv_multi: " + std::to_string(p.n_tokens) + " tokens (at most 8)");
    const uint32_t used = matrices_used(p);
    Geometry g{};
    for (uint32_t i = 0; i < used; i++) {
        const DTypeDescriptor* dt = dtype_lookup(p.dtype[i]);
        if (!dt || !dt->supported || is_mlx_dtype(p.dtype[i]) || p.K % dt->block_elems)
            throw Error(std::string("gemv_multi: weight type ") + dtype_name(p.dtype[i]) + " is not supported here");
        if (!lane_layout_fits(p.dtype[i], p.K, a.buf[2 + i]))
            throw Error("gemv_multi: weights not aligned for their format");
        g.elems[i] = (int)dt->block_elems;
        g.bytes[i] = (int)dt->block_bytes;
    }
    if ((reinterpret_cast<uintptr_t>(a.buf[0]) & 15) != 0 || p.K % 4 != 0)
        throw Error("gemv_multi: x must be 16-byte aligned with K a multiple of 4");
    bool q8 = true;
    for (uint32_t i = 0; i < used; i++) q8 = q8 && gemv_q8::has_q8_layout(p.dtype[i]);
    const unsigned blocks = (total_rows(p) + kWarps - 1) / kWarps;
    ActQ8 xq;  // q == nullptr: every block rounds x itself
    ActQ8Norm norm;
    if (p.norm) norm = ActQ8Norm{a.b<float>(1), p.eps, p.weight_offset};
    const bool in_block = q8 && rounds_in_block(p);
    if (q8 && a.q8_in.q && !in_block)
        xq = a.q8_in;  // rounded (and normalized) by the command before: a Q8Link
    else if (!in_block)
        q8 = q8 && quantize_activations(a, a.b<float>(0), p.K, p.n_tokens, p.K, norm, &xq);
    const float* x = a.b<float>(0);
    MultiGemvParams kp = p;
    if (p.norm && !q8 && a.f32_in) {
        x = a.f32_in;  // normalized by the command before: a Q8Link
        kp.norm = 0;
        xq.sumsq = const_cast<float*>(a.f32_in_sumsq);  // (or ahead of the norm's scale)
        xq.eps = a.f32_in_eps;
        xq.sumsq_rows = a.f32_in_sumsq_rows;
    } else if (p.norm && !q8 && norm_at() == NormAt::Kernel) {
        float* xn = nullptr;
        if (normalize_activations(a, x, p.n_tokens, p.K, norm, &xn)) {
            x = xn;
            kp.norm = 0;
        }
    }
    // AKUNU_CUDA_GEMV_SMEM_KB reserves that much shared memory per block, unused,
    // capping the resident blocks per SM (A/B runs of occupancy: BENCHMARKS.md).
    static const size_t reserve = [] {
        const char* e = std::getenv("AKUNU_CUDA_GEMV_SMEM_KB");
        return e ? std::min<size_t>(std::strtoul(e, nullptr, 10), 200) * 1024 : 0;
    }();
    const size_t x_shared = in_block ? in_block_bytes((int)p.n_tokens, (int)p.K)
                            : kp.norm && !q8 ? (size_t)p.n_tokens * p.K * sizeof(float) : 0;
    const size_t shared = std::max(reserve, x_shared);
    if (shared > kMaxShared) throw Error("gemv_multi: K " + std::to_string(p.K) + " too large to normalize in shared memory");
    const uint32_t prefetch = norm_at() == NormAt::BlockPrefetch ? UINT32_MAX
                              : q8                                ? gemv_prefetch_bytes()
                                                                  : float_prefetch_bytes();
    if ((a.q8_out.q || a.f32_out) && block_writer_fits(a, p)) {  // (integer rows: q8 holds and xq.q is set)
        const unsigned round_blocks = p.N[0] / kRoundWarps;
        if (is_gated(p)) {
            launch_pdl(typed_round_kernel<GateRound, GateRoundKernel>(p.dtype[0]), round_blocks, kRoundWarps * 32, 0,
                       a.stream, kp, g, xq, prefetch, a.b<uint8_t>(2), a.b<uint8_t>(3), a.b<float>(5), a.q8_out);
        } else {
            ActQ8 out = a.q8_out;
            if (a.f32_out) out.sumsq = a.f32_out_sumsq;
            const int split = residual_writer_split(p);
            launch_pdl(typed_round_kernel<ResidualRound, ResidualRoundKernel, true>(p.dtype[0]),
                       round_blocks * split, kRoundWarps * 32, 0, a.stream, kp, g, LeanX{xq, x}, prefetch, split,
                       a.b<uint8_t>(2), a.b<float>(5), out, a.f32_out, a.q8_out_norm);
        }
        return;
    }
    // a paired lean kernel: a warp an output row, both its matrices' rows
    auto launch_paired = [&](LeanKernel paired) {
        launch_pdl(paired, (p.N[0] + kWarps - 1) / kWarps, kWarps * 32, 0, a.stream, kp, g, LeanX{xq, x}, prefetch, 1,
                   a.b<uint8_t>(2), a.b<uint8_t>(3), a.b<uint8_t>(4), a.b<float>(5), a.b<float>(6), a.b<float>(7));
    };
    LeanKernel lean = nullptr;
    const bool lean_q8 = q8 && xq.q && p.n_tokens == 1 && !a.q8_out.q && !a.f32_out;
    if (lean_q8 && (pair_at() == EnvReach::All || lean_fits(p, g))) {
        if (LeanKernel paired = paired_lean_kernel(p)) {
            launch_paired(paired);
            return;
        }
        if (lean_fits(p, g)) lean = lean_kernel(p, used);
    } else if (!q8 && !a.q8_out.q && !a.f32_out) {
        if (LeanKernel paired = paired_float_lean_kernel(kp, used)) {
            launch_paired(paired);
            return;
        }
        lean = float_lean_kernel(kp, used);
    }
    if (lean) {
        const int split = lean_split(p);
        const int rows_per_block = kWarps / (split * (is_gated(p) ? 2 : 1));
        const unsigned lean_blocks = (total_rows(p) + rows_per_block - 1) / rows_per_block;
        launch_pdl(lean, lean_blocks, kWarps * 32, 0, a.stream, kp, g, LeanX{xq, x}, prefetch, split,
                   a.b<uint8_t>(2), a.b<uint8_t>(3), a.b<uint8_t>(4), a.b<float>(5), a.b<float>(6), a.b<float>(7));
        return;
    }
    auto* k = q8 ? kernel_for<true, AnyFormat>(p.n_tokens) : float_kernel(p, used);
    if (shared > 0) allow_shared(reinterpret_cast<const void*>(k));
    Q8Out next;  // gemv_multi_q8_output said yes
    if (a.q8_out.q || a.f32_out)
        next = Q8Out{a.q8_out, a.q8_out_norm, a.q8_counters, a.q8_counter_count, a.q8_partials, a.f32_out};
    launch_pdl(k, blocks, kWarps * 32, shared, a.stream, kp, g, x, a.b<float>(1), xq, prefetch, a.b<uint8_t>(2),
               a.b<uint8_t>(3), a.b<uint8_t>(4), a.b<float>(5), a.b<float>(6), a.b<float>(7), next);
}

}  // namespace

extern const CudaKernelEntry kCudaFusedKernels[] = {
    {"gemv_multi", launch_gemv_multi, false, gemv_multi_q8_output, gemv_multi_q8_input},
    {nullptr, nullptr},
};

}  // namespace akunu
