// Mixture-of-experts kernels on CUDA: router gating with top-k selection,
// the expert matmuls over the selected experts by device-side ids (llama.cpp's
// mul_mat_id) and the shared expert's add, with the CPU kernels' meaning
// (backend/cpu/kernels/moe.cpp, core/kernel_params.h). Every launch shape
// comes from the parameters alone and no kernel reads the host, so the
// commands replay inside captured decode graphs. Each output row's sums run
// in an order fixed by the row alone (batch invariance).
#include <algorithm>
#include <cmath>
#include <string>

#include "core/error.h"
#include "core/kernel_params.h"
#include "cuda_kernel.h"
#include "decode_block.cuh"
#include "device_math.cuh"
#include "gemv_formats.cuh"
#include "moe_gemm_tc.cuh"
#include "moe_gemv_q8.cuh"
#include "moe_glu.h"
#include "moe_select.cuh"

namespace akunu {
namespace {

// One warp a token (moe_select.cuh), each with n_experts floats of shared memory.
constexpr uint32_t kRouteSharedFloats = 12288;  // 48 KiB: the dynamic shared memory a block gets without opt-in

__global__ void moe_route_kernel(MoeRouteParams p, const float* logits, uint8_t* route) {
    extern __shared__ float route_probs[];
    pdl_wait();
    pdl_launch_dependents();
    const uint32_t warp = threadIdx.x / 32, t = blockIdx.x * (blockDim.x / 32) + warp;
    if (t >= p.n_tokens) return;
    moe_route_token_warp(p, logits + (size_t)t * p.logit_stride, route + (size_t)t * p.route_stride * 4,
                         route_probs + (size_t)warp * p.n_experts);
}

void launch_moe_route(const CudaArgs& a) {
    const MoeRouteParams p = a.p<MoeRouteParams>();
    if (p.n_tokens == 0 || p.n_experts == 0 || p.n_used == 0) return;
    if (p.n_used > kMoeMaxUsed) throw Error("moe_route: at most " + std::to_string(kMoeMaxUsed) + " experts a token");
    if (p.n_experts > kRouteSharedFloats)
        throw Error("moe_route: at most " + std::to_string(kRouteSharedFloats) + " experts");
    const uint32_t warps = std::min<uint32_t>(4, kRouteSharedFloats / p.n_experts);
    launch_pdl(moe_route_kernel, (p.n_tokens + warps - 1) / warps, warps * 32, warps * p.n_experts * sizeof(float), a,
               p, a.b<float>(0), a.b<uint8_t>(1));
}

constexpr int kWarps = 8;           // rows of W a block (one warp each)
constexpr int kChunk = 8;           // routed rows a warp multiplies at once (registers)
constexpr uint32_t kWindow = 4096;  // tokens whose routed rows a block lists at once (shared memory)
// Shared memory for a chunk's activation rows (kChunk x K floats) on the
// lane-layout path; longer rows take the general path.
constexpr size_t kMaxStagedBytes = 160 * 1024;

struct MoeGeometry {
    DecodeUnit unit;
    size_t row_bytes, expert_bytes;
};

// The matrix of this expert tensor that the route's slot j of token t names
// (first: the tensor's first expert; a tensor-parallel rank's whole experts).
__device__ inline int32_t route_id(const uint8_t* route, uint32_t stride, uint32_t t, uint32_t j, uint32_t first) {
    return reinterpret_cast<const int32_t*>(route + (size_t)t * stride * 4)[j] - (int32_t)first;
}

// A chunk of routed rows: entries (token - t0) * n_used + slot of a window,
// their activation rows and their number m <= kChunk.
struct Chunk {
    const float* xs[kChunk];
    int m;
};

__device__ inline Chunk chunk_at(const MoeMatmulParams& p, const float* x, const uint32_t* rows, uint32_t t0,
                                 uint32_t c0, uint32_t c1) {
    Chunk c;
    c.m = (int)min((uint32_t)kChunk, c1 - c0);
    for (int i = 0; i < kChunk; i++) {
        const uint32_t r = i < c.m ? rows[c0 + i] : rows[c0];
        c.xs[i] = x + (size_t)(t0 + r / p.n_used) * p.x_stride + (size_t)(r % p.n_used) * p.x_slot_stride;
    }
    return c;
}

// The chunk's products, per lane (the caller reduces over the warp):
// acc[i] += W row . x of routed row i < m. Two ways, chosen per launch from
// the format, K and the alignment alone (never from the routed rows, so a
// row's result does not depend on the other rows):
// - GeneralDot: any format, a lane decoding whole units (decode_block.cuh);
// - LaneDot<F>: the decode GEMV's lane layouts (gemv_formats.cuh: every lane
//   of the warp on each block, coalesced loads); the block first stages the
//   chunk's activation rows in shared memory, every warp's row then reads
//   them as one strided matrix, each weight decoded once for the chunk. A
//   launch of one token (decode: one row an expert) whose x rows are 16-byte
//   aligned reads its row in place instead (staged == nullptr): the same
//   products in the same order.
struct GeneralDot {
    static constexpr bool kStaged = false;
    __device__ static void dots(const MoeMatmulParams& p, const MoeGeometry& g, const uint8_t* wrow, const Chunk& c,
                                const float*, float (&acc)[kChunk]) {
        const int nb = (int)(p.K / g.unit.elems);
        float tmp[kMaxBlockElems];
        for (int b = threadIdx.x % 32; b < nb; b += 32) {
            decode_unit(p.dtype, wrow, b, g.unit.bytes, tmp);
            for (int i = 0; i < c.m; i++) {
                const float* xb = c.xs[i] + (size_t)b * g.unit.elems;
                float s = 0.0f;
                for (int k = 0; k < g.unit.elems; k++) s += tmp[k] * xb[k];
                acc[i] += s;
            }
        }
    }
};

template <class F>
struct LaneDot {
    static constexpr bool kStaged = true;
    __device__ static void dots(const MoeMatmulParams& p, const MoeGeometry&, const uint8_t* wrow, const Chunk& c,
                                const float* staged, float (&acc)[kChunk]) {
        gemv_formats::row_dot<F, kChunk>(wrow, (int)p.K, staged ? staged : c.xs[0], p.K, c.m, acc);
    }
};

// The chunk's activation rows into shared memory (row i at staged + i K; x's
// rows need no alignment), every thread of the block taking part; the
// previous chunk's readers are done first.
__device__ inline void stage_chunk(const Chunk& c, uint32_t K, float* staged) {
    __syncthreads();
    for (uint32_t i = threadIdx.x; i < (uint32_t)c.m * K; i += blockDim.x) staged[i] = c.xs[i / K][i % K];
    __syncthreads();
}

// This warp's row n of W[e] against the chunk: the sums of its m rows, in lane 0.
template <class Dot>
__device__ inline void chunk_products(const MoeMatmulParams& p, const MoeGeometry& g, const uint8_t* wrow,
                                      const Chunk& c, const float* staged, float (&v)[kChunk]) {
    float acc[kChunk];
    for (int i = 0; i < kChunk; i++) acc[i] = 0.0f;
    Dot::dots(p, g, wrow, c, staged, acc);
    for (int i = 0; i < kChunk; i++) v[i] = gemv_formats::warp_sum(acc[i]);
}

// Per slot (weighted = 0): block (row group, expert e) lists the (token,
// slot) rows routed to e, in ascending order, and each warp multiplies its
// row of W[e] with them, kChunk at a time. Blocks of experts no token chose
// read nothing of W. bias: the experts' biases (MoeMatmulParams::bias, N a
// matrix), added to each product before it is stored; nullptr: none.
template <class Dot>
__global__ void moe_matmul_slots_kernel(MoeMatmulParams p, MoeGeometry g, const uint8_t* W, const float* x,
                                        float* y, const uint8_t* route, bool stage, const float* bias) {
    extern __shared__ float4 staged_rows[];
    __shared__ uint32_t rows[kWindow];
    __shared__ uint32_t warp_counts[32];
    __shared__ uint32_t total;
    const uint32_t e = blockIdx.y;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const uint32_t n = blockIdx.x * kWarps + warp;
    const uint8_t* wrow = W + (size_t)e * g.expert_bytes + (size_t)n * g.row_bytes;
    float* staged = stage ? reinterpret_cast<float*>(staged_rows) : nullptr;
    for (uint32_t t0 = 0; t0 < p.n_tokens; t0 += kWindow) {
        // the window's rows routed to e, in ascending (token, slot) order
        const uint32_t t1 = min(p.n_tokens, t0 + kWindow);
        const uint32_t entries = (t1 - t0) * p.n_used;
        if (threadIdx.x == 0) total = 0;
        __syncthreads();
        for (uint32_t base = 0; base < entries; base += blockDim.x) {
            const uint32_t i = base + threadIdx.x;
            const bool hit = i < entries && route_id(route, p.route_stride, t0 + i / p.n_used, i % p.n_used, p.first_expert) == (int32_t)e;
            const unsigned ballot = __ballot_sync(0xffffffffu, hit);
            if (lane == 0) warp_counts[warp] = __popc(ballot);
            __syncthreads();
            uint32_t before = total;
            for (int w = 0; w < warp; w++) before += warp_counts[w];
            const uint32_t pos = before + __popc(ballot & ((1u << lane) - 1u));
            if (hit && pos < kWindow) rows[pos] = i;  // the window's entry: token t0 + i / n_used, slot i % n_used
            __syncthreads();
            if (threadIdx.x == 0) {
                uint32_t s = 0;
                for (int w = 0; w < (int)(blockDim.x / 32); w++) s += warp_counts[w];
                total += s;
            }
            __syncthreads();
        }
        const uint32_t count = min(total, kWindow);  // ids are distinct within a token: at most one row a token
        for (uint32_t c0 = 0; c0 < count; c0 += kChunk) {
            const Chunk c = chunk_at(p, x, rows, t0, c0, count);
            if (stage) stage_chunk(c, p.K, staged);
            if (n >= p.N) continue;
            float v[kChunk];
            chunk_products<Dot>(p, g, wrow, c, staged, v);
            const float b = bias ? bias[(size_t)e * p.N + n] : 0.0f;
            for (int i = 0; i < c.m; i++)
                if (lane == 0) {
                    const uint32_t r = rows[c0 + i], t = t0 + r / p.n_used, j = r % p.n_used;
                    y[(size_t)t * p.y_stride + (size_t)j * p.y_slot_stride + n] = bias ? v[i] + b : v[i];
                }
        }
        __syncthreads();  // the list is rebuilt for the next window
    }
}

// Weighted sum (weighted = 1): block (row group) sorts the routed (token,
// slot) rows by expert, then goes through the experts in ascending id; each
// warp multiplies its row of W[e] with e's rows (kChunk at a time) and adds
// weight * dot to its element of each token's output, so every output sums
// its slots in ascending expert id (the CPU's order) whatever the other
// tokens are. bias (or nullptr): as the slots kernel's, added to each product
// before it is weighted.
constexpr uint32_t kMaxExperts = 4096;  // ModelConfig's bound on expert_count
constexpr uint32_t kTensorCoreTokens = 16;  // a pass's tokens from which prefill takes the tensor cores

template <class Dot>
__global__ void moe_matmul_sum_kernel(MoeMatmulParams p, MoeGeometry g, const uint8_t* W, const float* x, float* y,
                                      const uint8_t* route, bool stage, const float* bias) {
    extern __shared__ float4 staged_rows[];
    __shared__ uint32_t ends[kMaxExperts];  // per expert: the end of its rows in `rows`
    __shared__ uint32_t rows[kWindow];      // window entries (token - t0) * n_used + slot, by expert
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const uint32_t n = blockIdx.x * kWarps + warp;
    float* staged = stage ? reinterpret_cast<float*>(staged_rows) : nullptr;
    const uint32_t window = max(1u, kWindow / p.n_used);  // tokens a window: their entries fit `rows`
    for (uint32_t t0 = 0; t0 < p.n_tokens; t0 += window) {
        const uint32_t t1 = min(p.n_tokens, t0 + window), entries = (t1 - t0) * p.n_used;
        if (n < p.N)
            for (uint32_t t = t0 + lane; t < t1; t += 32) y[(size_t)t * p.y_stride + n] = 0.0f;
        for (uint32_t e = threadIdx.x; e < p.n_experts; e += blockDim.x) ends[e] = 0;
        __syncthreads();
        for (uint32_t i = threadIdx.x; i < entries; i += blockDim.x) {
            const int32_t e = route_id(route, p.route_stride, t0 + i / p.n_used, i % p.n_used, p.first_expert);
            if (e >= 0 && (uint32_t)e < p.n_experts) atomicAdd(&ends[e], 1u);  // an id out of range adds nothing
        }
        __syncthreads();
        if (threadIdx.x == 0) {  // exclusive prefix: ends[e] = start of e (advanced to its end by the scatter)
            uint32_t sum = 0;
            for (uint32_t e = 0; e < p.n_experts; e++) {
                const uint32_t c = ends[e];
                ends[e] = sum;
                sum += c;
            }
        }
        __syncthreads();
        for (uint32_t i = threadIdx.x; i < entries; i += blockDim.x) {
            const int32_t e = route_id(route, p.route_stride, t0 + i / p.n_used, i % p.n_used, p.first_expert);
            if (e >= 0 && (uint32_t)e < p.n_experts) rows[atomicAdd(&ends[e], 1u)] = i;
        }
        __syncthreads();
        for (uint32_t e = 0; e < p.n_experts; e++) {
            const uint32_t r0 = e ? ends[e - 1] : 0, r1 = ends[e];
            const uint8_t* wrow = W + (size_t)e * g.expert_bytes + (size_t)n * g.row_bytes;
            for (uint32_t c0 = r0; c0 < r1; c0 += kChunk) {
                const Chunk c = chunk_at(p, x, rows, t0, c0, r1);
                if (stage) stage_chunk(c, p.K, staged);
                if (n >= p.N) continue;
                float v[kChunk];
                chunk_products<Dot>(p, g, wrow, c, staged, v);
                const float b = bias ? bias[(size_t)e * p.N + n] : 0.0f;
                for (int i = 0; i < c.m; i++)
                    if (lane == 0) {
                        const uint32_t r = rows[c0 + i], t = t0 + r / p.n_used, j = r % p.n_used;
                        const float w = reinterpret_cast<const float*>(
                            route + (size_t)t * p.route_stride * 4)[p.n_used + j];
                        y[(size_t)t * p.y_stride + n] += w * (bias ? v[i] + b : v[i]);
                    }
            }
        }
        __syncthreads();  // `ends` and `rows` are rebuilt for the next window
    }
}

// Launches of few routed rows (decode: at most one a expert on average)
// take a grid over the routed rows instead of the experts, so that no block
// is one of an expert nobody chose (the expert-major grids above have a
// block row for every expert, most of them empty at one token). Each row's
// products are chunks of one routed row, which the expert-major kernels'
// chunks give a row too (a row's dot does not depend on the chunk's other
// rows), and the weighted sum adds a token's slots in ascending (expert id,
// slot) order from zero, as the expert-major kernel adds them: either grid
// gives a row the same bits.

// The single-row chunk of routed row (t, j).
__device__ inline Chunk row_chunk(const MoeMatmulParams& p, const float* x, uint32_t t, uint32_t j) {
    Chunk c;
    c.m = 1;
    for (int i = 0; i < kChunk; i++) c.xs[i] = x + (size_t)t * p.x_stride + (size_t)j * p.x_slot_stride;
    return c;
}

// Per slot: block (row group, routed row t * n_used + j).
template <class Dot>
__global__ void moe_matmul_slots_few_kernel(MoeMatmulParams p, MoeGeometry g, const uint8_t* W, const float* x,
                                            float* y, const uint8_t* route, bool stage, const float* bias) {
    extern __shared__ float4 staged_rows[];
    const uint32_t t = blockIdx.y / p.n_used, j = blockIdx.y % p.n_used;
    const int32_t e = route_id(route, p.route_stride, t, j, p.first_expert);
    if (e < 0 || (uint32_t)e >= p.n_experts) return;  // (the same in the whole block)
    const int lane = threadIdx.x % 32;
    const uint32_t n = blockIdx.x * kWarps + threadIdx.x / 32;
    float* staged = stage ? reinterpret_cast<float*>(staged_rows) : nullptr;
    const Chunk c = row_chunk(p, x, t, j);
    if (stage) stage_chunk(c, p.K, staged);
    if (n >= p.N) return;
    float v[kChunk];
    chunk_products<Dot>(p, g, W + (size_t)e * g.expert_bytes + (size_t)n * g.row_bytes, c, staged, v);
    if (lane == 0) {
        const float b = bias ? bias[(size_t)e * p.N + n] : 0.0f;
        y[(size_t)t * p.y_stride + (size_t)j * p.y_slot_stride + n] = bias ? v[0] + b : v[0];
    }
}

// Weighted sum: block (row group, token t); each warp's row goes through
// the token's slots in ascending (expert id, slot), each found as the least
// after the previous one (the same choice in every thread of the block).
template <class Dot>
__global__ void moe_matmul_sum_few_kernel(MoeMatmulParams p, MoeGeometry g, const uint8_t* W, const float* x,
                                          float* y, const uint8_t* route, bool stage, const float* bias) {
    extern __shared__ float4 staged_rows[];
    const uint32_t t = blockIdx.y;
    const int lane = threadIdx.x % 32;
    const uint32_t n = blockIdx.x * kWarps + threadIdx.x / 32;
    float* staged = stage ? reinterpret_cast<float*>(staged_rows) : nullptr;
    const float* weights = reinterpret_cast<const float*>(route + (size_t)t * p.route_stride * 4) + p.n_used;
    const int32_t* ids = reinterpret_cast<const int32_t*>(route + (size_t)t * p.route_stride * 4);
    float sum = 0.0f;
    int32_t be = -1;
    uint32_t bj = 0;
    while (next_slot_by_expert(ids, p.n_used, p.n_experts, (int32_t)p.first_expert, be, bj)) {
        const Chunk c = row_chunk(p, x, t, bj);
        if (stage) stage_chunk(c, p.K, staged);
        if (n < p.N) {
            float v[kChunk];
            chunk_products<Dot>(p, g, W + (size_t)be * g.expert_bytes + (size_t)n * g.row_bytes, c, staged, v);
            const float b = bias ? bias[(size_t)be * p.N + n] : 0.0f;
            sum += weights[bj] * (bias ? v[0] + b : v[0]);
        }
    }
    if (n < p.N && lane == 0) y[(size_t)t * p.y_stride + n] = sum;
}

template <class Dot>
void launch_moe_kernels(const CudaArgs& a, const MoeMatmulParams& p, const MoeGeometry& g) {
    const unsigned row_blocks = blocks_for(p.N, kWarps);
    const uintptr_t x = reinterpret_cast<uintptr_t>(a.buf[1]);
    const bool in_place = p.n_tokens == 1 && x % 16 == 0 && p.x_slot_stride % 4 == 0;
    const bool stage = Dot::kStaged && !in_place;
    const size_t shared = stage ? (size_t)kChunk * p.K * sizeof(float) : 0;
    const float* bias = p.bias ? a.b<float>(4) : nullptr;  // MoeMatmulParams::bias
    if ((uint64_t)p.n_tokens * p.n_used <= p.n_experts) {  // few routed rows: a grid over them
        const auto kernel = p.weighted ? moe_matmul_sum_few_kernel<Dot> : moe_matmul_slots_few_kernel<Dot>;
        if (shared) allow_dynamic_shared((const void*)kernel, (int)shared);
        const dim3 grid(row_blocks, p.weighted ? p.n_tokens : p.n_tokens * p.n_used);
        kernel<<<grid, kWarps * 32, shared, a.stream>>>(p, g, a.b<uint8_t>(0), a.b<float>(1), a.b<float>(2),
                                                        a.b<uint8_t>(3), stage, bias);
        return;
    }
    if (p.weighted) {
        if (shared) allow_dynamic_shared((const void*)moe_matmul_sum_kernel<Dot>, (int)shared);
        moe_matmul_sum_kernel<Dot><<<row_blocks, kWarps * 32, shared, a.stream>>>(
            p, g, a.b<uint8_t>(0), a.b<float>(1), a.b<float>(2), a.b<uint8_t>(3), stage, bias);
    } else {
        if (shared) allow_dynamic_shared((const void*)moe_matmul_slots_kernel<Dot>, (int)shared);
        moe_matmul_slots_kernel<Dot><<<dim3(row_blocks, p.n_experts), kWarps * 32, shared, a.stream>>>(
            p, g, a.b<uint8_t>(0), a.b<float>(1), a.b<float>(2), a.b<uint8_t>(3), stage, bias);
    }
}

// The lane-layout path where the format has one (and the decode GEMV's
// alignment holds) and a chunk of x's rows fits shared memory; false otherwise.
bool launch_lane_moe(const CudaArgs& a, const MoeMatmulParams& p, const MoeGeometry& g) {
    using namespace gemv_formats;
    const uintptr_t w = reinterpret_cast<uintptr_t>(a.buf[0]);
    if ((size_t)kChunk * p.K * sizeof(float) > kMaxStagedBytes) return false;
    switch (p.dtype) {
        case GGML_Q4_0: if (w % 2) return false; launch_moe_kernels<LaneDot<Q4_0>>(a, p, g); return true;
        case GGML_Q8_0: if (w % 2) return false; launch_moe_kernels<LaneDot<Q8_0>>(a, p, g); return true;
        case GGML_Q4_K: if (w % 16) return false; launch_moe_kernels<LaneDot<Q4_K>>(a, p, g); return true;
        case GGML_Q6_K: if (w % 2) return false; launch_moe_kernels<LaneDot<Q6_K>>(a, p, g); return true;
        case GGML_MXFP4: launch_moe_kernels<LaneDot<MXFP4>>(a, p, g); return true;
        case GGML_F16: if (w % 16 || p.K % 8) return false; launch_moe_kernels<LaneDot<Half<false>>>(a, p, g); return true;
        case GGML_BF16: if (w % 16 || p.K % 8) return false; launch_moe_kernels<LaneDot<Half<true>>>(a, p, g); return true;
        case GGML_F32: if (w % 16 || p.K % 4) return false; launch_moe_kernels<LaneDot<F32>>(a, p, g); return true;
        default: return false;
    }
}

void launch_moe_matmul(const CudaArgs& a) {
    if (a.absorbed.set) return launch_moe_pair(a);  // the gate's matmul too (moe_glu.h)
    const MoeMatmulParams p = a.p<MoeMatmulParams>();
    const DTypeDescriptor* dt = dtype_lookup(p.dtype);
    if (!dt || !dt->supported || dt->internal || p.K % dt->block_elems != 0)
        throw Error(std::string("moe_matmul: unsupported weight type ") + dtype_name(p.dtype) + " or row length");
    if (p.n_tokens == 0 || p.n_used == 0 || p.N == 0) return;
    MoeGeometry g;
    g.unit = decode_unit_of(p.dtype, (int)dt->block_elems, (int)dt->block_bytes);
    g.row_bytes = (size_t)p.K / dt->block_elems * dt->block_bytes;
    g.expert_bytes = g.row_bytes * p.N;
    if (p.n_experts > kMaxExperts || p.n_used > kWindow)
        throw Error("moe_matmul: at most " + std::to_string(kMaxExperts) + " experts");
    // Passes of 16 tokens and more outside batch tables (prefill) on the
    // tensor cores, as the dense matmul (moe_gemm_tc.cuh). Batch tables'
    // rows (invariant) keep the kernels below at any count, whose row
    // results do not depend on the pass.
    if (!p.invariant && p.n_tokens >= kTensorCoreTokens && a.tuning->moe_tensor_cores &&
        launch_moe_gemm_tc(a, p, g.row_bytes))
        return;
    // A decode token (outside batch tables) on 8-bit activations (moe_gemv_q8.cuh).
    if (a.tuning->moe_int8_decode && launch_moe_gemv_q8(a, p, g.row_bytes)) return;
    if (!launch_lane_moe(a, p, g)) launch_moe_kernels<GeneralDot>(a, p, g);
}

__global__ void moe_shared_add_kernel(MoeSharedAddParams p, const float* x, const float* gate, float* y) {
    const size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)p.dim * p.n_tokens) return;
    const size_t t = idx / p.dim, i = idx % p.dim;
    const float g = p.gated ? 1.0f / (1.0f + expf(-gate[t * p.gate_stride])) : 1.0f;
    y[t * p.y_stride + i] += g * x[t * p.x_stride + i];
}

void launch_moe_shared_add(const CudaArgs& a) {
    const MoeSharedAddParams p = a.p<MoeSharedAddParams>();
    const size_t n = (size_t)p.dim * p.n_tokens;
    if (n == 0) return;
    moe_shared_add_kernel<<<blocks_for(n, 256), 256, 0, a.stream>>>(p, a.b<float>(0), a.b<float>(1), a.b<float>(2));
}

// The weighted sum of one token on the 8-bit path reads its input rounded by
// the command before where that command can (a Q8Link: moe_glu.h).
bool moe_matmul_q8_input(const CudaArgs& a, Q8Link* link) {
    const MoeMatmulParams p = a.p<MoeMatmulParams>();
    if (!a.tuning->moe_int8_decode || !p.weighted || p.x_slot_stride != p.K || !moe_q8::takes(a, p)) return false;
    *link = Q8Link{a.b<float>(1), p.n_used * p.K, 1};
    return true;
}

}  // namespace

extern const CudaKernelEntry kCudaMoeKernels[] = {
    {"moe_route", launch_moe_route},
    {"moe_matmul", launch_moe_matmul, false, nullptr, moe_matmul_q8_input, moe_pair_absorbs},
    {"moe_shared_add", launch_moe_shared_add},
    {nullptr, nullptr},
};

}  // namespace akunu
