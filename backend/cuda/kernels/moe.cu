// Mixture-of-experts kernels on CUDA: router gating with top-k selection,
// the expert matmuls over the selected experts by device-side ids (llama.cpp's
// mul_mat_id) and the shared expert's add, with the CPU kernels' meaning
// (backend/cpu/kernels/moe.cpp, core/kernel_params.h). Every launch shape
// comes from the parameters alone and no kernel reads the host, so the
// commands replay inside captured decode graphs. Each output row's sums run
// in an order fixed by the row alone (batch invariance).
#include <cmath>
#include <string>

#include "core/error.h"
#include "core/kernel_params.h"
#include "cuda_kernel.h"
#include "decode_block.cuh"
#include "device_math.cuh"
#include "moe_select.cuh"

namespace akunu {
namespace {

// One thread a token (moe_select.cuh: the selection without a per-expert array).
__global__ void moe_route_kernel(MoeRouteParams p, const float* logits, uint8_t* route) {
    const uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= p.n_tokens) return;
    moe_route_token(p, logits + (size_t)t * p.logit_stride, route + (size_t)t * p.route_stride * 4);
}

void launch_moe_route(const CudaArgs& a) {
    const MoeRouteParams p = a.p<MoeRouteParams>();
    if (p.n_tokens == 0 || p.n_experts == 0 || p.n_used == 0) return;
    if (p.n_used > kMoeMaxUsed) throw Error("moe_route: at most " + std::to_string(kMoeMaxUsed) + " experts a token");
    moe_route_kernel<<<blocks_for(p.n_tokens, 64), 64, 0, a.stream>>>(p, a.b<float>(0), a.b<uint8_t>(1));
}

constexpr int kWarps = 8;           // rows of W a block (one warp each)
constexpr int kChunk = 8;           // routed rows a warp accumulates at once (registers)
constexpr uint32_t kWindow = 4096;  // tokens whose routed rows a block lists at once (shared memory)

struct MoeGeometry {
    DecodeUnit unit;
    size_t row_bytes, expert_bytes;
};

// The matrix of this expert tensor that the route's slot j of token t names
// (first: the tensor's first expert; a tensor-parallel rank's whole experts).
__device__ inline int32_t route_id(const uint8_t* route, uint32_t stride, uint32_t t, uint32_t j, uint32_t first) {
    return reinterpret_cast<const int32_t*>(route + (size_t)t * stride * 4)[j] - (int32_t)first;
}

// Per slot (weighted = 0): block (row group, expert e) lists the (token,
// slot) rows routed to e, in ascending order, and each warp multiplies its
// row of W[e] with them, decoding each unit of the row once for up to kChunk
// of them. Blocks of experts no token chose read nothing of W.
__global__ void moe_matmul_slots_kernel(MoeMatmulParams p, MoeGeometry g, const uint8_t* W, const float* x,
                                        float* y, const uint8_t* route) {
    __shared__ uint32_t rows[kWindow];
    __shared__ uint32_t warp_counts[32];
    __shared__ uint32_t total;
    const uint32_t e = blockIdx.y;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const uint32_t n = blockIdx.x * kWarps + warp;
    const int nb = (int)(p.K / g.unit.elems);
    const uint8_t* wrow = W + (size_t)e * g.expert_bytes + (size_t)n * g.row_bytes;
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
        if (n < p.N) {
            for (uint32_t c0 = 0; c0 < count; c0 += kChunk) {
                const int m = (int)min((uint32_t)kChunk, count - c0);
                float acc[kChunk];
                const float* xs[kChunk];
                for (int i = 0; i < kChunk; i++) {
                    acc[i] = 0.0f;
                    if (i < m) {
                        const uint32_t r = rows[c0 + i], t = t0 + r / p.n_used, j = r % p.n_used;
                        xs[i] = x + (size_t)t * p.x_stride + (size_t)j * p.x_slot_stride;
                    }
                }
                float tmp[kMaxBlockElems];
                for (int b = lane; b < nb; b += 32) {
                    decode_unit(p.dtype, wrow, b, g.unit.bytes, tmp);
                    for (int i = 0; i < m; i++) {
                        const float* xb = xs[i] + (size_t)b * g.unit.elems;
                        float s = 0.0f;
                        for (int k = 0; k < g.unit.elems; k++) s += tmp[k] * xb[k];
                        acc[i] += s;
                    }
                }
                for (int i = 0; i < m; i++) {
                    float v = acc[i];
                    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
                    if (lane == 0) {
                        const uint32_t r = rows[c0 + i], t = t0 + r / p.n_used, j = r % p.n_used;
                        y[(size_t)t * p.y_stride + (size_t)j * p.y_slot_stride + n] = v;
                    }
                }
            }
        }
        __syncthreads();  // the list is rebuilt for the next window
    }
}

// Weighted sum (weighted = 1): block (row group) sorts the routed (token,
// slot) rows by expert, then goes through the experts in ascending id; each
// warp multiplies its row of W[e] with e's rows (each unit of the row
// decoded once for up to kChunk of them) and adds weight * dot to its
// element of each token's output, so every output sums its slots in
// ascending expert id (the CPU's order) whatever the other tokens are.
constexpr uint32_t kMaxExperts = 4096;  // ModelConfig's bound on expert_count

__global__ void moe_matmul_sum_kernel(MoeMatmulParams p, MoeGeometry g, const uint8_t* W, const float* x, float* y,
                                      const uint8_t* route) {
    __shared__ uint32_t ends[kMaxExperts];  // per expert: the end of its rows in `rows`
    __shared__ uint32_t rows[kWindow];      // window entries (token - t0) * n_used + slot, by expert
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const uint32_t n = blockIdx.x * kWarps + warp;
    const int nb = (int)(p.K / g.unit.elems);
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
        if (n < p.N) {
            for (uint32_t e = 0; e < p.n_experts; e++) {
                const uint32_t r0 = e ? ends[e - 1] : 0, r1 = ends[e];
                if (r0 == r1) continue;
                const uint8_t* wrow = W + (size_t)e * g.expert_bytes + (size_t)n * g.row_bytes;
                for (uint32_t c0 = r0; c0 < r1; c0 += kChunk) {
                    const int m = (int)min((uint32_t)kChunk, r1 - c0);
                    float acc[kChunk];
                    const float* xs[kChunk];
                    for (int i = 0; i < kChunk; i++) {
                        acc[i] = 0.0f;
                        if (i < m) {
                            const uint32_t r = rows[c0 + i], t = t0 + r / p.n_used, j = r % p.n_used;
                            xs[i] = x + (size_t)t * p.x_stride + (size_t)j * p.x_slot_stride;
                        }
                    }
                    float tmp[kMaxBlockElems];
                    for (int b = lane; b < nb; b += 32) {
                        decode_unit(p.dtype, wrow, b, g.unit.bytes, tmp);
                        for (int i = 0; i < m; i++) {
                            const float* xb = xs[i] + (size_t)b * g.unit.elems;
                            float d = 0.0f;
                            for (int k = 0; k < g.unit.elems; k++) d += tmp[k] * xb[k];
                            acc[i] += d;
                        }
                    }
                    for (int i = 0; i < m; i++) {
                        float v = acc[i];
                        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
                        if (lane == 0) {
                            const uint32_t r = rows[c0 + i], t = t0 + r / p.n_used, j = r % p.n_used;
                            const float w = reinterpret_cast<const float*>(
                                route + (size_t)t * p.route_stride * 4)[p.n_used + j];
                            y[(size_t)t * p.y_stride + n] += w * v;
                        }
                    }
                }
            }
        }
        __syncthreads();  // `ends` and `rows` are rebuilt for the next window
    }
}

void launch_moe_matmul(const CudaArgs& a) {
    const MoeMatmulParams p = a.p<MoeMatmulParams>();
    const DTypeDescriptor* dt = dtype_lookup(p.dtype);
    if (!dt || !dt->supported || dt->internal || p.K % dt->block_elems != 0)
        throw Error(std::string("moe_matmul: unsupported weight type ") + dtype_name(p.dtype) + " or row length");
    if (p.n_tokens == 0 || p.n_used == 0 || p.N == 0) return;
    MoeGeometry g;
    g.unit = decode_unit_of(p.dtype, (int)dt->block_elems, (int)dt->block_bytes);
    g.row_bytes = (size_t)p.K / dt->block_elems * dt->block_bytes;
    g.expert_bytes = g.row_bytes * p.N;
    const unsigned row_blocks = blocks_for(p.N, kWarps);
    if (p.n_experts > kMaxExperts || p.n_used > kWindow)
        throw Error("moe_matmul: at most " + std::to_string(kMaxExperts) + " experts");
    if (p.weighted) {
        moe_matmul_sum_kernel<<<row_blocks, kWarps * 32, 0, a.stream>>>(
            p, g, a.b<uint8_t>(0), a.b<float>(1), a.b<float>(2), a.b<uint8_t>(3));
    } else {
        moe_matmul_slots_kernel<<<dim3(row_blocks, p.n_experts), kWarps * 32, 0, a.stream>>>(
            p, g, a.b<uint8_t>(0), a.b<float>(1), a.b<float>(2), a.b<uint8_t>(3));
    }
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

}  // namespace

extern const CudaKernelEntry kCudaMoeKernels[] = {
    {"moe_route", launch_moe_route},
    {"moe_matmul", launch_moe_matmul},
    {"moe_shared_add", launch_moe_shared_add},
    {nullptr, nullptr},
};

}  // namespace akunu
