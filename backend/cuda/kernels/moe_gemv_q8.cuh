// A decode token's expert matmuls (one token, outside batch tables) on its
// activations rounded to 8 bits (act_q8.h), as the dense decode GEMV takes
// them (gemv.cuh) and the CPU's quantized matmuls do: the integer dot of
// gemv_q8_formats.cuh, a weight row a warp, against a quarter of the float
// path's activation bytes. Per slot (gate, up): block (8 rows, slot j) of the
// expert the route names for j. Weighted (down): block (rows, token) whose
// warps take its (row, slot) products side by side into shared memory; a
// thread a row then adds them in ascending (expert id, slot) order, as every
// weighted sum does (moe_select.cuh). Route ids outside the tensor (a
// tensor-parallel rank's experts) leave their slot's row unwritten or add
// nothing.
#pragma once
#include <algorithm>

#include "act_q8.h"
#include "core/kernel_params.h"
#include "cuda_kernel.h"
#include "gemv_q8_formats.cuh"
#include "moe_select.cuh"

namespace akunu {
namespace moe_q8 {

constexpr int kWarps = 8;

struct Experts {
    const uint8_t* W;
    size_t row_bytes, expert_bytes;
    const float* bias;  // (n_experts, N) or nullptr
};

// The token's activation row for slot j: one row for all slots (gate, up
// read the normalized input) or a row a slot (down reads each slot's own).
__device__ inline uint32_t act_row(const MoeMatmulParams& p, uint32_t j) { return p.x_slot_stride ? j : 0; }

// Row n of expert e against activation row r, summed over the warp (in
// every lane), its bias added.
template <class Q>
__device__ inline float expert_dot(const MoeMatmulParams& p, const Experts& w, ActQ8 xq, int32_t e, uint32_t n,
                                   uint32_t r) {
    float acc[1] = {0.0f};
    gemv_q8::row_dot<Q, 1>(w.W + (size_t)e * w.expert_bytes + (size_t)n * w.row_bytes, (int)p.K,
                           xq.q + (size_t)r * p.K, xq.ds + (size_t)r * (p.K / kQ8Block), 1, acc);
    const float v = gemv_formats::warp_sum(acc[0]);
    return w.bias ? v + w.bias[(size_t)e * p.N + n] : v;
}

template <class Q>
__global__ void __launch_bounds__(kWarps * 32)
    slots_kernel(MoeMatmulParams p, Experts w, ActQ8 xq, float* y, const int32_t* ids) {
    const uint32_t j = blockIdx.y, n = blockIdx.x * kWarps + threadIdx.x / 32;
    const int32_t e = ids[j] - (int32_t)p.first_expert;
    if (e < 0 || (uint32_t)e >= p.n_experts || n >= p.N) return;
    const float v = expert_dot<Q>(p, w, xq, e, n, act_row(p, j));
    if (threadIdx.x % 32 == 0) y[(size_t)j * p.y_slot_stride + n] = v;
}

// Rows a block of the weighted kernel: its warps cover rows x n_used products.
__host__ __device__ inline uint32_t sum_rows(uint32_t n_used) { return n_used < kWarps ? kWarps / n_used : 1; }

template <class Q>
__global__ void __launch_bounds__(kWarps * 32)
    sum_kernel(MoeMatmulParams p, Experts w, ActQ8 xq, float* y, const int32_t* ids) {
    __shared__ float products[kMoeMaxUsed];  // rows * n_used <= max(kWarps, n_used)
    const uint32_t rows = sum_rows(p.n_used), n0 = blockIdx.x * rows;
    for (uint32_t i = threadIdx.x / 32; i < rows * p.n_used; i += kWarps) {
        const uint32_t n = n0 + i / p.n_used, j = i % p.n_used;
        const int32_t e = ids[j] - (int32_t)p.first_expert;
        if (n >= p.N || e < 0 || (uint32_t)e >= p.n_experts) continue;
        const float v = expert_dot<Q>(p, w, xq, e, n, act_row(p, j));
        if (threadIdx.x % 32 == 0) products[i] = v;
    }
    __syncthreads();
    const uint32_t r = threadIdx.x, n = n0 + r;
    if (r >= rows || n >= p.N) return;
    const float* weights = reinterpret_cast<const float*>(ids + p.n_used);
    float sum = 0.0f;
    int32_t e = -1;
    uint32_t j = 0;
    while (next_slot_by_expert(ids, p.n_used, p.n_experts, (int32_t)p.first_expert, e, j))
        sum += weights[j] * products[r * p.n_used + j];
    y[n] = sum;
}

template <class Q>
bool launch(const CudaArgs& a, const MoeMatmulParams& p, const Experts& w) {
    const float* x = a.b<float>(1);
    ActQ8 xq;
    if (!quantize_activations(a, x, p.x_slot_stride, p.x_slot_stride ? p.n_used : 1, p.K, ActQ8Norm{}, &xq))
        return false;
    float* y = a.b<float>(2);
    const int32_t* ids = a.b<int32_t>(3);
    if (p.weighted)
        sum_kernel<Q><<<blocks_for(p.N, sum_rows(p.n_used)), kWarps * 32, 0, a.stream>>>(p, w, xq, y, ids);
    else
        slots_kernel<Q><<<dim3(blocks_for(p.N, kWarps), p.n_used), kWarps * 32, 0, a.stream>>>(p, w, xq, y, ids);
    return true;
}

}  // namespace moe_q8

// One token's expert matmul outside batch tables (p.invariant == 0) on
// 8-bit activations where the format has an integer dot (Q4_0, Q8_0, Q4_K,
// Q6_K, Q4_1, Q5_0, Q5_1, MXFP4) and the activations fit the scratch; false
// leaves it to the float kernels.
inline bool launch_moe_gemv_q8(const CudaArgs& a, const MoeMatmulParams& p, size_t row_bytes) {
    if (p.n_tokens != 1 || p.invariant || p.n_used > kMoeMaxUsed || p.K % 32) return false;
    moe_q8::Experts w{a.b<uint8_t>(0), row_bytes, row_bytes * p.N, p.bias ? a.b<float>(4) : nullptr};
    const uintptr_t at = reinterpret_cast<uintptr_t>(w.W) | row_bytes;  // every row's alignment
    switch (p.dtype) {
        case GGML_Q4_0: return at % 2 == 0 && moe_q8::launch<gemv_q8::Q4_0>(a, p, w);
        case GGML_Q8_0: return at % 2 == 0 && moe_q8::launch<gemv_q8::Q8_0>(a, p, w);
        case GGML_Q4_K: return p.K % 256 == 0 && at % 16 == 0 && moe_q8::launch<gemv_q8::Q4_K>(a, p, w);
        case GGML_Q6_K: return p.K % 256 == 0 && at % 2 == 0 && moe_q8::launch<gemv_q8::Q6_K>(a, p, w);
        case GGML_Q4_1: return at % 2 == 0 && moe_q8::launch<gemv_q8::Q4_1>(a, p, w);
        case GGML_Q5_0: return at % 2 == 0 && moe_q8::launch<gemv_q8::Q5_0>(a, p, w);
        case GGML_Q5_1: return at % 2 == 0 && moe_q8::launch<gemv_q8::Q5_1>(a, p, w);
        case GGML_MXFP4: return moe_q8::launch<gemv_q8::MXFP4>(a, p, w);
        default: return false;
    }
}

}  // namespace akunu
