// Fused decode projections (gemv_multi, see MultiGemvParams): Q, K and V in
// one launch, gate and up with the activation, a projection with its residual
// add, each optionally behind the input RMSNorm. A warp per output row as in
// gemv.cuh. When every matrix has an integer lane layout (Q4_0, Q8_0, Q4_K,
// Q6_K, Q4_1, Q5_0, Q5_1, the x8 layouts), a kernel of its own normalizes and
// rounds x to 8 bits first (act_q8.h) and the rows take dp4a dots
// (gemv_q8_formats.cuh); otherwise a kernel of its own normalizes x into the
// scratch (every block into shared memory where the scratch cannot hold it).
//
// The kernels; their launch rules (which kernel takes a launch) are in
// fused.cu, the only file that includes this one.
#pragma once
#include <type_traits>

#include "act_q8.cuh"
#include "core/kernel_params.h"
#include "cuda_kernel.h"
#include "decode_block.cuh"
#include "device_math.cuh"
#include "gemv_formats.cuh"
#include "gemv_q8_formats.cuh"

namespace akunu {
namespace gemv_multi {

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

// Asks L2 for the first `cap` bytes of one weight row.
__device__ void prefetch_row(const uint8_t* W, int be, int bb, int row, int K, uint32_t cap) {
    const size_t bytes = (size_t)(K / be) * bb;
    prefetch_l2(W + (size_t)row * bytes, bytes < cap ? bytes : cap);
}

// a[i] of a three-matrix parameter (MultiGemvParams::N, dtype; Geometry)
// for an i known only at run time, as selects between the three values: an
// indexed read of the kernel's parameters compiles to a predicated constant
// load of every word the index might reach, a chain of them on the way to
// the first weight load.
template <class T>
__device__ __forceinline__ T of_matrix(const T (&a)[3], int i) {
    return i == 0 ? a[0] : i == 1 ? a[1] : a[2];
}

// Row `row` of W (matrix i) times the m tokens' activations: x as floats
// (a runtime switch over every format: the general kernel serves mixed
// formats, several tokens and x normalized in the block), or (Q8) its
// 8-bit rounding xq.
template <bool Q8, int M>
__device__ __forceinline__ void matrix_row_dot(const MultiGemvParams& p, const Geometry& g, int i, const uint8_t* W,
                                               int row, const float* x, ActQ8 xq, float* acc) {
    const int K = (int)p.K, m = (int)p.n_tokens;
    const uint32_t dtype = of_matrix(p.dtype, i);
    const int elems = of_matrix(g.elems, i), bytes = of_matrix(g.bytes, i);
    const uint8_t* r = W + (size_t)row * (K / elems) * bytes;
    if constexpr (Q8)
        gemv_q8::any_row_dot<M>(dtype, r, K, xq.q, xq.ds, m, acc);
    else
        any_row_dot<M>(dtype, elems, bytes, W, row, K, x, m, acc);
}

// The general kernel: a warp an output row, any format, up to kMaxTokens
// tokens; x rounded to 8 bits ahead of it (Q8), or floats normalized ahead
// of it or by the block (p.norm set: into shared memory).
template <bool Q8, int M>
__global__ void __launch_bounds__(kWarps * 32, Q8 && M == 1 ? 4 : 1)
    gemv_multi_kernel(MultiGemvParams p, Geometry g, const float* __restrict__ x, const float* __restrict__ norm_w,
                      ActQ8 xq, uint32_t prefetch, const uint8_t* W0, const uint8_t* W1, const uint8_t* W2, float* y0,
                      float* y1, float* y2) {
    extern __shared__ float xs[];
    const int K = (int)p.K, m = (int)p.n_tokens;
    // This warp's matrix and row (Separate: the rows of W0, W1, W2 in turn).
    int row = blockIdx.x * kWarps + threadIdx.x / 32, mat = 0;
    if (p.mode == kGemvSeparate) {
        if (row >= (int)p.N[0]) { row -= p.N[0]; mat = 1; }
        if (mat == 1 && row >= (int)p.N[1]) { row -= p.N[1]; mat = 2; }
    }
    const bool active = mat < (int)(p.mode == kGemvSeparate ? p.n_mats : 1) && row < (int)of_matrix(p.N, mat);
    const uint8_t* W = mat == 0 ? W0 : mat == 1 ? W1 : W2;
    // The weight rows start for L2 while the kernel before this one finishes
    // (launch_pdl) and while the block normalizes x.
    if (active && prefetch) {
        prefetch_row(W, of_matrix(g.elems, mat), of_matrix(g.bytes, mat), row, K, prefetch);
        if (p.mode == kGemvSiluGate || p.mode == kGemvGeluGate)
            prefetch_row(W1, g.elems[1], g.bytes[1], row, K, prefetch);
    }
    pdl_wait();
    pdl_launch_dependents();
    const float* xin = x;
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
        matrix_row_dot<Q8, M>(p, g, i, W, row, xin, xq, acc);
#pragma unroll
        for (int t = 0; t < M; t++) {
            if (t >= m) break;
            const float v = warp_sum(acc[t]) * xscale;
            if (lane0) y[(size_t)t * of_matrix(p.N, i) + row] = v;
        }
        return;
    }
    matrix_row_dot<Q8, M>(p, g, 0, W0, row, xin, xq, acc);
    if (p.mode != kGemvAccumulate) matrix_row_dot<Q8, M>(p, g, 1, W1, row, xin, xq, acc2);
#pragma unroll
    for (int t = 0; t < M; t++) {
        if (t >= m) break;
        const float v = warp_sum(acc[t]) * xscale;
        float* out = y0 + (size_t)t * p.N[0] + row;
        if (p.mode == kGemvAccumulate) {
            if (lane0) *out += v;
        } else {
            const float u = warp_sum(acc2[t]) * xscale;
            if (lane0) *out = (p.mode == kGemvGeluGate ? gelu(v) : silu(v)) * u;
        }
    }
}

// The decode hot path alone: one token, x already rounded to 8 bits (by a
// kernel of its own or a Q8Link writer), nothing linked after. A GEMV this
// size is bound by the weight bytes in flight, so what counts is warps
// resident: each format's loop is compiled for the fewest registers it fits
// without spilling (32 for Q4_0: 8 blocks an SM, where the general kernel's
// budget allows 4). F: one format for every matrix, or AnyQ8.
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
// to warps of their own (where Paired cannot take them: gate and up of two
// formats, or float rows split). The block's warps leave their sums in
// shared memory; a thread per output row adds them up in a fixed order.
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
// only the block's shared memory and one barrier: no block waits on another
// (writers that round 8-row blocks together need a fence, an atomic and a
// serial tail, which cost more than the rounding kernel they save). The
// same bytes as the rounding kernel writes (round_block32_warp).
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

}  // namespace gemv_multi
}  // namespace akunu
