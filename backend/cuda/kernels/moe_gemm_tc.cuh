// Expert matmuls of many-token passes (prefill) on the tensor cores: the
// grouped GEMM of llama.cpp's mul_mat_id, with moe_matmul's meaning
// (core/kernel_params.h, MoeMatmulParams).
//
// Block (column tile x, expert e) lists the routed rows (token, slot) of a
// window of tokens that chose e, in ascending (token, slot) order, then runs
// gemm_tc.cuh's tile k loop over them BM rows at a time: each row's
// activations gathered from x(t, j), W[e]'s rows decoded to F16 as the dense
// prefill GEMM decodes them. Experts no token of the window chose exit at
// once, reading nothing of W.
//
// Per slot (weighted = 0) the products go to y(t, j). The weighted sum goes
// through a scratch of the window's slot products, each already multiplied
// by its weight; moe_slot_sum_kernel then adds a token's slots in ascending
// (expert id, slot), the order of the CPU and of moe.cu's other kernels, so
// a row's result rests on its own activations and route alone. (Each
// weighted product is rounded to F32 before the sum, where the float kernels
// may fuse the multiply into the add: at most an ulp a slot apart.)
//
// Precision: F16 operands and F32 sums, as the dense prefill GEMM (gemm_tc.cuh).
// Included once, by moe.cu.
#pragma once
#include <algorithm>

#include "core/kernel_params.h"
#include "cuda_kernel.h"
#include "gemm_tc.cuh"

namespace akunu {
namespace moe_tc {

using namespace nvcuda;
using gemm_tc::kCld;
using gemm_tc::kWarpTile;

constexpr uint32_t kListRows = 4096;  // routed rows a block lists: a window's (token, slot) entries
constexpr int kBN = 64, kBK = 64;     // weight rows and k a step of a block's tile
constexpr uint32_t kMaxUsed = 32;     // slots a token the sum orders (moe_route's bound is lower)

struct Window {
    const uint8_t* W;
    size_t row_bytes, expert_bytes;
    const float* x;
    float* y;
    const uint8_t* route;
    const float* bias;     // N floats an expert, or nullptr
    uint32_t t0, t1;       // the window's tokens [t0, t1)
    float* slots;          // weighted: [t - t0][j][N] weighted slot products; nullptr: per slot into y
};

__device__ inline const int32_t* route_ids(const MoeMatmulParams& p, const uint8_t* route, uint32_t t) {
    return reinterpret_cast<const int32_t*>(route + (size_t)t * p.route_stride * 4);
}

// The window's entries (t - t0) * n_used + j routed to matrix e, in
// ascending order, into rows; returns their number (the whole block).
__device__ inline uint32_t list_rows(const MoeMatmulParams& p, const Window& w, uint32_t e, uint32_t* rows,
                                     uint32_t* warp_counts) {
    __shared__ uint32_t total;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (threadIdx.x == 0) total = 0;
    __syncthreads();
    const uint32_t entries = (w.t1 - w.t0) * p.n_used;  // <= kListRows (the host's window)
    for (uint32_t base = 0; base < entries; base += blockDim.x) {
        const uint32_t i = base + threadIdx.x;
        const bool hit = i < entries &&
                         route_ids(p, w.route, w.t0 + i / p.n_used)[i % p.n_used] - (int32_t)p.first_expert == (int32_t)e;
        const unsigned ballot = __ballot_sync(0xffffffffu, hit);
        if (lane == 0) warp_counts[warp] = __popc(ballot);
        __syncthreads();
        uint32_t before = total;
        for (int v = 0; v < warp; v++) before += warp_counts[v];
        if (hit) rows[before + __popc(ballot & ((1u << lane) - 1u))] = i;
        __syncthreads();
        if (threadIdx.x == 0)
            for (int v = 0; v < (int)(blockDim.x / 32); v++) total += warp_counts[v];
        __syncthreads();
    }
    return total;
}

template <class F, int BM>
__global__ void __launch_bounds__(2 * kBN) moe_gemm_tc_kernel(MoeMatmulParams p, Window w) {
    using S = gemm_tc::TileShape<F, kBN, kBK, BM>;
    constexpr int kThreads = S::kThreads, kWarpsN = S::kWarpsN, kWarpM = S::kWarpM;
    constexpr int kQuads = S::kQuads, kXVec = S::kXVec;
    extern __shared__ __align__(128) uint8_t smem[];  // gemm_tc::tile_shared_bytes<kBN, kBK, BM>()
    __shared__ uint32_t rows[kListRows];
    __shared__ uint32_t warp_counts[kThreads / 32];
    const uint32_t e = blockIdx.y;
    const uint32_t count = list_rows(p, w, e, rows, warp_counts);
    if (count == 0) return;  // (the whole block)

    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int wm = warp / kWarpsN, wn = warp % kWarpsN;
    const int N = (int)p.N, n0 = (int)blockIdx.x * kBN, quad = tid % kQuads;
    // rows past N read the last one (computed, never written)
    const uint8_t* wrow = w.W + (size_t)e * w.expert_bytes + (size_t)min(n0 + tid / 2, N - 1) * w.row_bytes;
    const int n = n0 + wn * kWarpTile + lane;
    const float b = w.bias && n < N ? w.bias[(size_t)e * N + n] : 0.0f;
    for (uint32_t m0 = 0; m0 < count; m0 += BM) {
        // this thread's activation rows: the tile's routed rows (past count: the last one, never written)
        const float* xp[kXVec];
#pragma unroll
        for (int i = 0; i < kXVec; i++) {
            const uint32_t r = rows[min(m0 + tid / kQuads + i * (kThreads / kQuads), count - 1)];
            xp[i] = w.x + (size_t)(w.t0 + r / p.n_used) * p.x_stride + (size_t)(r % p.n_used) * p.x_slot_stride +
                    4 * quad;
        }
        gemm_tc::TileAcc<BM> acc;
        gemm_tc::tile_k_loop<F, kBN, kBK, BM>(wrow, xp, 0, (int)p.K / kBK, smem, acc, [] {});
        const float* cw = gemm_tc::stage_outputs<kBN, BM>(smem, acc);
        if (n < N)
            for (int tt = 0; tt < kWarpM; tt++) {
                const uint32_t i = m0 + wm * kWarpM + tt;
                if (i >= count) break;
                const uint32_t r = rows[i], t = w.t0 + r / p.n_used, j = r % p.n_used;
                const float v = cw[tt * kCld + lane] + b;
                if (w.slots) {
                    const float weight = reinterpret_cast<const float*>(route_ids(p, w.route, t))[p.n_used + j];
                    w.slots[((size_t)(t - w.t0) * p.n_used + j) * N + n] = weight * v;
                } else {
                    w.y[(size_t)t * p.y_stride + (size_t)j * p.y_slot_stride + n] = v;
                }
            }
        __syncthreads();  // the staging is the next tile's shared memory
    }
}

// Block t - t0: y(t) = the sum of token t's held slot products in ascending
// (expert id, slot), from zero; slots whose id the tensor does not hold add nothing.
__global__ void moe_slot_sum_kernel(MoeMatmulParams p, Window w) {
    __shared__ uint32_t order[kMaxUsed];
    __shared__ uint32_t held;
    const uint32_t t = w.t0 + blockIdx.x;
    if (threadIdx.x == 0) {
        const int32_t* ids = route_ids(p, w.route, t);
        uint32_t k = 0;
        for (uint32_t j = 0; j < p.n_used; j++) {
            const int32_t e = ids[j] - (int32_t)p.first_expert;
            if (e < 0 || (uint32_t)e >= p.n_experts) continue;
            uint32_t at = k++;  // insertion: ascending (id, slot)
            while (at > 0 && ids[order[at - 1]] > ids[j]) {
                order[at] = order[at - 1];
                at--;
            }
            order[at] = j;
        }
        held = k;
    }
    __syncthreads();
    const float* s = w.slots + (size_t)blockIdx.x * p.n_used * p.N;
    for (uint32_t n = threadIdx.x; n < p.N; n += blockDim.x) {
        float sum = 0.0f;
        for (uint32_t q = 0; q < held; q++) sum += s[(size_t)order[q] * p.N + n];
        w.y[(size_t)t * p.y_stride + n] = sum;
    }
}

template <class F, int BM>
void launch_windows(const CudaArgs& a, const MoeMatmulParams& p, Window w, uint32_t window) {
    constexpr int shared = gemm_tc::tile_shared_bytes<kBN, kBK, BM>();
    allow_dynamic_shared((const void*)moe_gemm_tc_kernel<F, BM>, shared);
    const dim3 grid(blocks_for(p.N, kBN), p.n_experts);
    for (uint32_t t0 = 0; t0 < p.n_tokens; t0 += window) {
        w.t0 = t0;
        w.t1 = std::min(p.n_tokens, t0 + window);
        moe_gemm_tc_kernel<F, BM><<<grid, 2 * kBN, shared, a.stream>>>(p, w);
        if (w.slots) moe_slot_sum_kernel<<<w.t1 - w.t0, 256, 0, a.stream>>>(p, w);
    }
}

// Tiles of 32 routed rows where an expert gets fewer than 48 on average, else 64.
template <class F>
void launch(const CudaArgs& a, const MoeMatmulParams& p, const Window& w, uint32_t window) {
    if ((uint64_t)std::min(window, p.n_tokens) * p.n_used < 48ull * p.n_experts) launch_windows<F, 32>(a, p, w, window);
    else launch_windows<F, 64>(a, p, w, window);
}

}  // namespace moe_tc

// Enqueues the expert matmuls of a many-token pass on the tensor cores and
// returns true where they suit it (the dense prefill GEMM's formats and
// alignment, K a multiple of 64, float4 activation rows; the weighted sum's
// scratch); false leaves the pass to moe.cu's float kernels.
inline bool launch_moe_gemm_tc(const CudaArgs& a, const MoeMatmulParams& p, size_t row_bytes) {
    using namespace moe_tc;
    if (p.K == 0 || p.K % kBK != 0 || p.n_used > kMaxUsed || p.n_used > kListRows) return false;
    const uintptr_t x = reinterpret_cast<uintptr_t>(a.b<float>(1));
    if (x % 16 || p.x_stride % 4 || p.x_slot_stride % 4) return false;
    Window w{};
    w.W = a.b<uint8_t>(0);
    w.row_bytes = row_bytes;
    w.expert_bytes = row_bytes * p.N;
    w.x = a.b<float>(1);
    w.y = a.b<float>(2);
    w.route = a.b<uint8_t>(3);
    w.bias = p.bias ? a.b<float>(4) : nullptr;
    uint32_t window = kListRows / p.n_used;  // tokens whose entries a block lists at once
    if (p.weighted) {
        // the slot products of a window in the split-K scratch's partials
        // area (its tile counters, kept zero, are not touched)
        const size_t bytes_a_token = (size_t)p.n_used * p.N * sizeof(float);
        if (!a.split_scratch || a.split_scratch_bytes <= gemm_tc::kSplitCounterBytes) return false;
        const size_t fit = (a.split_scratch_bytes - gemm_tc::kSplitCounterBytes) / bytes_a_token;
        if (fit == 0) return false;
        window = (uint32_t)std::min<size_t>(window, fit);
        w.slots = reinterpret_cast<float*>(a.split_scratch + gemm_tc::kSplitCounterBytes);
    }
    return gemm_tc::with_tc_format(p.dtype, p.K, reinterpret_cast<uintptr_t>(w.W) | row_bytes, [&](auto tag) {
        moe_tc::launch<typename decltype(tag)::type>(a, p, w, window);
    });
}

}  // namespace akunu
