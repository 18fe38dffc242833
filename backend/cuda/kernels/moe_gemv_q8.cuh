// A decode token's expert matmuls (one token, outside batch tables) on its
// activations rounded to 8 bits (act_q8.h), as the dense decode GEMV takes
// them (gemv.cuh) and the CPU's quantized matmuls do: the integer dot of
// gemv_q8_formats.cuh, a weight row a warp, against a quarter of the float
// path's activation bytes. Per slot (gate, up): block (8 rows, slot j), a
// warp a row. Weighted (down): a warp takes one output row for S slots at
// once, every step loading the S experts' weights before the first dot, so a
// row of a few steps (Qwen3-30B-A3B's down: K = 768, one step) waits on one
// round trip instead of S; block (4 rows) whose warps keep their products in
// shared memory; lane 0 then adds them in ascending (expert id,
// slot) order, as every weighted sum does (moe_select.cuh: next_slot_by_expert),
// that order found once a block. Each product is
// row_dot's (the same steps in the same order). Route ids outside the tensor
// (a tensor-parallel rank's experts) leave their slot's row unwritten or add
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

constexpr int kWarps = 4;  // output rows a block of the weighted sum, one a warp

struct Experts {
    const uint8_t* W;
    size_t row_bytes, expert_bytes;
    const float* bias;  // (n_experts, N) or nullptr
};

// The token's activation row for slot j: one row for all slots (gate, up
// read the normalized input) or a row a slot (down reads each slot's own).
__device__ inline uint32_t act_row(const MoeMatmulParams& p, uint32_t j) { return p.x_slot_stride ? j : 0; }

// The expert of slot j within this tensor, or -1 when the tensor does not hold it.
__device__ inline int32_t held_expert(const MoeMatmulParams& p, const int32_t* ids, uint32_t j) {
    const int32_t e = ids[j] - (int32_t)p.first_expert;
    return e >= 0 && (uint32_t)e < p.n_experts ? e : -1;
}

// Row n of the experts of slots j0 .. j0 + S - 1 (those < n_used) against
// their activation rows, each summed over the warp (in every lane), its bias
// added: v[s], e[s] (-1: no product for that slot). Slots past n_used or not
// held load expert 0's row (always there) so that every load is unconditional.
template <class Q, int S>
__device__ inline void slot_dots(const MoeMatmulParams& p, const Experts& w, const ActQ8& xq, const int32_t* ids,
                                 uint32_t n, uint32_t j0, float v[S], int32_t e[S]) {
    const uint8_t* rows[S];
    const int8_t* xs[S];
    const float2* ds[S];
#pragma unroll
    for (int s = 0; s < S; s++) {
        const uint32_t j = j0 + s;
        e[s] = j < p.n_used ? held_expert(p, ids, j) : -1;
        const uint32_t r = act_row(p, min(j, p.n_used - 1));
        rows[s] = w.W + (size_t)max(e[s], 0) * w.expert_bytes + (size_t)n * w.row_bytes;
        xs[s] = xq.q + (size_t)r * p.K;
        ds[s] = xq.ds + (size_t)r * (p.K / kQ8Block);
    }
    float acc[S];
#pragma unroll
    for (int s = 0; s < S; s++) acc[s] = 0.0f;
    const int lane = threadIdx.x % 32, nb = (int)p.K / Q::kElems, sub = lane % Q::kLanes;
    for (int b = lane / Q::kLanes; b < nb; b += 32 / Q::kLanes) {
        typename Q::Regs r[S];
#pragma unroll
        for (int s = 0; s < S; s++) r[s] = Q::load(rows[s] + (size_t)b * Q::kBytes, sub);
#pragma unroll
        for (int s = 0; s < S; s++)
            Q::template apply<1>(r[s], sub, xs[s] + (size_t)b * Q::kElems, ds[s] + (size_t)b * (Q::kElems / 32),
                                 (int)p.K, 1, &acc[s]);
    }
#pragma unroll
    for (int s = 0; s < S; s++) {
        v[s] = gemv_formats::warp_sum(acc[s]);
        if (w.bias && e[s] >= 0) v[s] += w.bias[(size_t)e[s] * p.N + n];
    }
}

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

// Gate and up: a warp a (row, slot), their rows of K = 2048-2880 several
// steps long (more warps in flight beat more slots a warp here: four slots a
// warp made gpt-oss's and Qwen3's gate and up slower).
constexpr int kSlotWarps = 8;
template <class Q>
__global__ void __launch_bounds__(kSlotWarps * 32)
    slots_kernel(MoeMatmulParams p, Experts w, ActQ8 xq, float* y, const int32_t* ids) {
    pdl_wait();
    pdl_launch_dependents();
    const uint32_t j = blockIdx.y, n = blockIdx.x * kSlotWarps + threadIdx.x / 32;
    const int32_t e = held_expert(p, ids, j);
    if (e < 0 || n >= p.N) return;
    const float v = expert_dot<Q>(p, w, xq, e, n, act_row(p, j));
    if (threadIdx.x % 32 == 0) y[(size_t)j * p.y_slot_stride + n] = v;
}

template <class Q, int S>
__global__ void __launch_bounds__(kWarps * 32)
    sum_kernel(MoeMatmulParams p, Experts w, ActQ8 xq, float* y, const int32_t* ids) {
    __shared__ float products[kWarps][kMoeMaxUsed];
    __shared__ uint32_t order[kMoeMaxUsed];  // the held slots in ascending (expert id, slot) order
    __shared__ uint32_t n_held;
    const uint32_t warp = threadIdx.x / 32, lane = threadIdx.x % 32, n = blockIdx.x * kWarps + warp;
    pdl_wait();
    pdl_launch_dependents();
    if (warp == 0) {  // the order, a lane a slot
        uint32_t held = 0;
        for (uint32_t j0 = 0; j0 < p.n_used; j0 += 32) {
            const uint32_t j = j0 + lane;
            const int32_t e = j < p.n_used ? held_expert(p, ids, j) : -1;
            if (e >= 0) order[slot_place(ids, p.n_used, p.n_experts, (int32_t)p.first_expert, e, j)] = j;
            held += __popc(__ballot_sync(0xffffffffu, e >= 0));
        }
        if (lane == 0) n_held = held;
    }
    __syncthreads();
    if (n >= p.N) return;
    float* prod = products[warp];
    for (uint32_t j0 = 0; j0 < p.n_used; j0 += S) {
        float v[S];
        int32_t e[S];
        slot_dots<Q, S>(p, w, xq, ids, n, j0, v, e);
        if (lane == 0) {
#pragma unroll
            for (int s = 0; s < S; s++)
                if (e[s] >= 0) prod[j0 + s] = v[s];
        }
    }
    if (lane != 0) return;  // lane 0 wrote this warp's products
    const float* weights = reinterpret_cast<const float*>(ids + p.n_used);
    float sum = 0.0f;
    for (uint32_t k = 0; k < n_held; k++) sum += weights[order[k]] * prod[order[k]];
    y[n] = sum;
}

// Slots a warp of the weighted sum takes at once: four (gpt-oss's every
// slot, Qwen3's in two passes). Eight kept every row of Qwen3's down to one
// round trip but took 190-255 registers, one block an SM.
template <class Q, int S>
void launch_sum(const CudaArgs& a, const MoeMatmulParams& p, const Experts& w, const ActQ8& xq, float* y,
                const int32_t* ids) {
    launch_pdl(sum_kernel<Q, S>, blocks_for(p.N, kWarps), kWarps * 32, 0, a, p, w, xq, y, ids);
}

// The token's activations rounded to 8 bits: by the command before where it
// wrote them so (a Q8Link: the gated activation that absorbed gate and up,
// moe_glu.cu), else by a rounding kernel now; false where they do not fit.
inline bool rounded_input(const CudaArgs& a, const MoeMatmulParams& p, ActQ8* xq) {
    if (a.q8_in.q) {
        *xq = a.q8_in;
        return true;
    }
    return quantize_activations(a, a.b<float>(1), p.x_slot_stride, p.x_slot_stride ? p.n_used : 1, p.K,
                                ActQ8Norm{}, xq);
}

template <class Q>
bool launch(const CudaArgs& a, const MoeMatmulParams& p, const Experts& w) {
    ActQ8 xq;
    if (!rounded_input(a, p, &xq)) return false;
    float* y = a.b<float>(2);
    const int32_t* ids = a.b<int32_t>(3);
    if (!p.weighted)
        launch_pdl(slots_kernel<Q>, dim3(blocks_for(p.N, kSlotWarps), p.n_used), kSlotWarps * 32, 0, a, p, w, xq, y,
                   ids);
    else if (p.n_used <= 2)
        launch_sum<Q, 2>(a, p, w, xq, y, ids);
    else
        launch_sum<Q, 4>(a, p, w, xq, y, ids);
    return true;
}

// Calls fn(Q{}) with the integer-dot format of the experts' type when one
// serves a one-token launch outside batch tables over W (rows row_bytes
// long, every row aligned as the format's loads need) and returns what it
// returns; false where none does (the float kernels then).
template <class Fn>
bool with_format(const MoeMatmulParams& p, const uint8_t* W, size_t row_bytes, Fn&& fn) {
    if (p.n_tokens != 1 || p.invariant || p.n_used > kMoeMaxUsed || p.K % 32) return false;
    const uintptr_t at = reinterpret_cast<uintptr_t>(W) | row_bytes;  // every row's alignment
    switch (p.dtype) {
        case GGML_Q4_0: return at % 2 == 0 && fn(gemv_q8::Q4_0{});
        case GGML_Q8_0: return at % 2 == 0 && fn(gemv_q8::Q8_0{});
        case GGML_Q4_K: return p.K % 256 == 0 && at % 16 == 0 && fn(gemv_q8::Q4_K{});
        case GGML_Q6_K: return p.K % 256 == 0 && at % 2 == 0 && fn(gemv_q8::Q6_K{});
        case GGML_Q4_1: return at % 2 == 0 && fn(gemv_q8::Q4_1{});
        case GGML_Q5_0: return at % 2 == 0 && fn(gemv_q8::Q5_0{});
        case GGML_Q5_1: return at % 2 == 0 && fn(gemv_q8::Q5_1{});
        case GGML_MXFP4: return fn(gemv_q8::MXFP4{});
        default: return false;
    }
}

// The bytes of one expert row of this launch's tensor.
inline size_t row_bytes_of(const MoeMatmulParams& p) {
    const DTypeDescriptor* dt = dtype_lookup(p.dtype);
    return dt && dt->block_elems ? (size_t)p.K / dt->block_elems * dt->block_bytes : 0;
}

// Whether this launch's tensor (buffer 0) takes the 8-bit decode kernels.
inline bool takes(const CudaArgs& a, const MoeMatmulParams& p) {
    return with_format(p, a.b<uint8_t>(0), row_bytes_of(p), [](auto) { return true; });
}

}  // namespace moe_q8

// One token's expert matmul outside batch tables (p.invariant == 0) on
// 8-bit activations where the format has an integer dot (Q4_0, Q8_0, Q4_K,
// Q6_K, Q4_1, Q5_0, Q5_1, MXFP4) and the activations fit the scratch; false
// leaves it to the float kernels.
inline bool launch_moe_gemv_q8(const CudaArgs& a, const MoeMatmulParams& p, size_t row_bytes) {
    const moe_q8::Experts w{a.b<uint8_t>(0), row_bytes, row_bytes * p.N, p.bias ? a.b<float>(4) : nullptr};
    return moe_q8::with_format(p, w.W, row_bytes, [&](auto q) { return moe_q8::launch<decltype(q)>(a, p, w); });
}

}  // namespace akunu
