// Decode GEMV (a few tokens) for the formats real GGUF models are made of:
// Q4_0, Q8_0, Q4_K, Q6_K, Q4_1, Q5_0, Q5_1, MXFP4 and the float formats. One warp per output row; the warp's lanes split
// each block so that a warp step reads contiguous bytes (coalesced), every
// lane decoding its share straight into registers. The formats' meaning is
// core/quant_blocks.h (the CPU twin dequantizes with it; the per-op tests
// compare against float64 on those dequantized weights). Format lane work:
// gemv_formats.cuh; the integer formats take x rounded to 8 bits by a kernel
// of its own first (act_q8.h) and dp4a dots (gemv_q8_formats.cuh).
// Included once, by matmul.cu.
#pragma once
#include "act_q8.h"
#include "core/dtype_descriptor.h"
#include "core/kernel_params.h"
#include "cuda_kernel.h"
#include "gemv_formats.cuh"
#include "gemv_q8_formats.cuh"

namespace akunu {

constexpr int kGemvMaxTokens = 8;

namespace gemv_decode {

constexpr int kWarpsPerBlock = 4;
using namespace gemv_formats;

// The warp's sums of row `row` for the m tokens into y (+ bias).
template <int M>
__device__ __forceinline__ void write_row(const float* acc, int m, const MatmulParams& p, int row, float* y,
                                          const float* bias) {
#pragma unroll
    for (int t = 0; t < M; t++) {
        if (t >= m) break;
        const float v = warp_sum(acc[t]);
        if (threadIdx.x % 32 == 0) y[(size_t)t * p.y_stride + row] = v + (bias ? bias[row] : 0.0f);
    }
}

// This warp's weight row, its first `prefetch` bytes asked into L2 before the
// wait for the kernel ahead (launch_pdl); nullptr past the last row. Every
// warp waits, so no block leaves before its predecessor has finished.
template <class F>
__device__ __forceinline__ const uint8_t* start_row(const MatmulParams& p, const uint8_t* W, int row,
                                                    uint32_t prefetch) {
    const size_t row_bytes = (size_t)(p.K / F::kElems) * F::kBytes;
    const uint8_t* w = row < (int)p.N ? W + (size_t)row * row_bytes : nullptr;
    if (w) prefetch_l2(w, min(row_bytes, (size_t)prefetch));
    pdl_wait();
    pdl_launch_dependents();
    return w;
}

// y[t, row] = W[row, :] . x[t, :] (+ bias[row]), one warp per row.
template <class F, int M>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    gemv_kernel(MatmulParams p, const uint8_t* __restrict__ W, const float* __restrict__ x, float* __restrict__ y,
                const float* __restrict__ bias, uint32_t prefetch) {
    const int row = blockIdx.x * kWarpsPerBlock + threadIdx.x / 32;
    const uint8_t* w = start_row<F>(p, W, row, prefetch);
    if (!w) return;
    float acc[M] = {};
    row_dot<F, M>(w, (int)p.K, x, p.x_stride, (int)p.n_tokens, acc);
    write_row<M>(acc, (int)p.n_tokens, p, row, y, bias);
}

// The same with the activations rounded to 8 bits (gemv_q8::F).
template <class F, int M>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    gemv_q8_kernel(MatmulParams p, const uint8_t* __restrict__ W, ActQ8 xq, float* __restrict__ y,
                   const float* __restrict__ bias, uint32_t prefetch) {
    const int row = blockIdx.x * kWarpsPerBlock + threadIdx.x / 32;
    const uint8_t* w = start_row<F>(p, W, row, prefetch);
    if (!w) return;
    float acc[M] = {};
    gemv_q8::row_dot<F, M>(w, (int)p.K, xq.q, xq.ds, (int)p.n_tokens, acc);
    write_row<M>(acc, (int)p.n_tokens, p, row, y, bias);
}

// One token over a float matrix of few rows (a MoE router: 32-128 rows of
// 2048-2880 F32): a warp a row would leave most SMs idle and each warp
// waiting on its row's loads in turn, so kSplitWarps warps share a row (a
// block a row, float_row_dot's split) and their sums are added in warp
// order.
constexpr int kSplitWarps = 8;
template <class F>
__global__ void __launch_bounds__(kSplitWarps * 32)
    gemv_split_kernel(MatmulParams p, const uint8_t* __restrict__ W, const float* __restrict__ x,
                      float* __restrict__ y, const float* __restrict__ bias, uint32_t prefetch) {
    __shared__ float part_sums[kSplitWarps];
    const int row = blockIdx.x, warp = threadIdx.x / 32;
    const size_t row_bytes = (size_t)(p.K / F::kElems) * F::kBytes;
    const uint8_t* w = W + (size_t)row * row_bytes;
    const size_t part_bytes = row_bytes / kSplitWarps;
    prefetch_l2(w + warp * part_bytes, min(part_bytes, (size_t)prefetch));
    pdl_wait();
    pdl_launch_dependents();
    float acc = 0.0f;
    float_row_dot<F>(w, (int)p.K, x, &acc, warp, kSplitWarps);
    acc = warp_sum(acc);
    if (threadIdx.x % 32 == 0) part_sums[warp] = acc;
    __syncthreads();
    if (threadIdx.x != 0) return;
    float v = 0.0f;
    for (int i = 0; i < kSplitWarps; i++) v += part_sums[i];
    y[row] = v + (bias ? bias[row] : 0.0f);
}

// Rounds x to 8 bits and enqueues the integer GEMV; false when the scratch
// cannot hold the activations (the float kernels run instead).
// In invariant mode (MatmulParams::invariant, batch tables) the choice
// between the integer and the float GEMV is made for a full slice of
// kGemvMaxTokens tokens whatever the slice holds, so it depends on K alone,
// and every slice runs the kGemvMaxTokens instantiation (a lone decode row
// then runs the same code as one beside seven others: M = 1 and M = 8 are
// separate compilations, not promised to round alike).
template <class F>
bool launch_q8(const CudaArgs& a, const MatmulParams& p, const float* x, float* y, const float* bias) {
    ActQ8 xq;
    if (p.invariant && !act_q8_layout(a, kGemvMaxTokens, p.K, 0, &xq)) return false;
    if (!quantize_activations(a, x, p.x_stride, p.n_tokens, p.K, ActQ8Norm{}, &xq)) return false;
    const unsigned blocks = (p.N + kWarpsPerBlock - 1) / kWarpsPerBlock;
    launch_pdl(p.n_tokens == 1 && !p.invariant ? gemv_q8_kernel<F, 1> : gemv_q8_kernel<F, kGemvMaxTokens>, blocks,
               kWarpsPerBlock * 32, 0, a, p, a.b<uint8_t>(0), xq, y, bias, a.tuning->prefetch_bytes);
    return true;
}

template <class F>
void launch(const CudaArgs& a, const MatmulParams& p, const float* x, float* y, const float* bias) {
    const unsigned blocks = (p.N + kWarpsPerBlock - 1) / kWarpsPerBlock;
    if constexpr (F::kLanes == 1) {  // (float formats)
        if (p.n_tokens == 1 && !p.invariant && (int)blocks < a.tuning->sm_count) {
            launch_pdl(gemv_split_kernel<F>, p.N, kSplitWarps * 32, 0, a, p, a.b<uint8_t>(0), x, y, bias,
                       a.tuning->float_prefetch_bytes);
            return;
        }
    }
    launch_pdl(p.n_tokens == 1 && !p.invariant ? gemv_kernel<F, 1> : gemv_kernel<F, kGemvMaxTokens>, blocks,
               kWarpsPerBlock * 32, 0, a, p, a.b<uint8_t>(0), x, y, bias, a.tuning->prefetch_bytes);
}

// The integer GEMV (format Q), or the float one (F) where the activations do not fit the scratch.
template <class Q, class F>
bool launch_int(const CudaArgs& a, const MatmulParams& p, const float* x, float* y, const float* bias) {
    if (!launch_q8<Q>(a, p, x, y, bias)) launch<F>(a, p, x, y, bias);
    return true;
}

}  // namespace gemv_decode

// Enqueues y = W x (+ bias) for at most kGemvMaxTokens tokens and returns
// true when the format (Q4_0, Q8_0, Q4_K, Q6_K, their x8 layouts, Q4_1, Q5_0,
// Q5_1, MXFP4, F16, BF16, F32) and alignment suit these kernels; false leaves the
// pass to the general ones.
// A token's result does not depend on the other tokens of the pass: each
// token has its own accumulator, fed by the same per-lane split of the row
// (block b to lanes by b and the lane, never by m) and reduced by the same
// butterfly, and its 8-bit rounding (act_q8.cu) is per token and per 32
// values. The decision below depends on the format, K, the weights' and x's
// alignment and x_stride, never on the token count within 1..kGemvMaxTokens
// (and, in invariant mode, not on whether the scratch holds this slice: see
// launch_q8).
inline bool launch_gemv(const CudaArgs& a, const MatmulParams& p, const float* x, float* y) {
    using namespace gemv_decode;
    if (p.n_tokens == 0 || p.n_tokens > (uint32_t)kGemvMaxTokens) return false;
    // float4 activation loads
    if ((reinterpret_cast<uintptr_t>(x) & 15) != 0 || p.x_stride % 4 != 0) return false;
    const float* bias = p.has_bias ? a.b<float>(3) : nullptr;
    const uintptr_t w = reinterpret_cast<uintptr_t>(a.buf[0]);
    switch (p.dtype) {
        case GGML_Q4_0: if (p.K % 32 || w % 2) return false; return launch_int<gemv_q8::Q4_0, Q4_0>(a, p, x, y, bias);
        case GGML_Q8_0: if (p.K % 32 || w % 2) return false; return launch_int<gemv_q8::Q8_0, Q8_0>(a, p, x, y, bias);
        case GGML_Q4_K: if (p.K % 256 || w % 16) return false; return launch_int<gemv_q8::Q4_K, Q4_K>(a, p, x, y, bias);
        case GGML_Q6_K: if (p.K % 256 || w % 2) return false; return launch_int<gemv_q8::Q6_K, Q6_K>(a, p, x, y, bias);
        // the regrouped layouts have no float lane path: the general matmul kernel where x does not fit
        case AKUNU_Q4_0_X8: if (p.K % 256 || w % 16) return false; return launch_q8<gemv_q8::Q4_0X8>(a, p, x, y, bias);
        case AKUNU_Q8_0_X8: if (p.K % 256 || w % 16) return false; return launch_q8<gemv_q8::Q8_0X8>(a, p, x, y, bias);
        case AKUNU_Q6_K_X8: if (p.K % 2048 || w % 16) return false; return launch_q8<gemv_q8::Q6_KX8>(a, p, x, y, bias);
        // (and llama.cpp's fallback 32-blocks: the row kernels where x does not fit)
        case GGML_Q4_1: if (p.K % 32 || w % 2) return false; return launch_q8<gemv_q8::Q4_1>(a, p, x, y, bias);
        case GGML_Q5_0: if (p.K % 32 || w % 2) return false; return launch_q8<gemv_q8::Q5_0>(a, p, x, y, bias);
        case GGML_Q5_1: if (p.K % 32 || w % 2) return false; return launch_q8<gemv_q8::Q5_1>(a, p, x, y, bias);
        // MXFP4: byte loads, any alignment
        case GGML_MXFP4: if (p.K % 32) return false; return launch_int<gemv_q8::MXFP4, MXFP4>(a, p, x, y, bias);
        case GGML_F16: if (p.K % 8 || w % 16) return false; launch<Half<false>>(a, p, x, y, bias); return true;
        case GGML_BF16: if (p.K % 8 || w % 16) return false; launch<Half<true>>(a, p, x, y, bias); return true;
        case GGML_F32: if (p.K % 4 || w % 16) return false; launch<F32>(a, p, x, y, bias); return true;
        default: return false;
    }
}

}  // namespace akunu
