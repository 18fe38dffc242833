// Paged-KV attention and the paged KV write (continuous batching): every token
// row of a pass belongs to a sequence at its own position (buffer "rows":
// int32 (sequence, position) pairs), and a sequence's K/V live in fixed-size
// blocks of a pool found through its block table (PagedKVWriteParams in
// core/kernel_params.h defines the layout).
//
// attention_paged: one thread block per (query head, row). The block's kWarps
// warps split the row's keys [lo, pos] in a fixed pattern: key lo + j belongs
// to warp (j / kUnroll) % kWarps, and each warp walks its keys in ascending
// order keeping an online softmax (running max, sum, weighted V); the warps
// then meet in shared memory in warp order. A key's dot product is a fixed
// per-lane sum over the lane's dimensions followed by a fixed butterfly. So
// every sum a row's result goes through depends only on that row's sequence,
// position and the head size, never on n_tokens or on the other rows of the
// pass (batch invariance), and no storage grows with the context (contexts of
// any length run in the same registers and 8 KiB of shared memory).
//
// Precision as the decode attention (attention_decode.cuh): Q rounded to F16
// as the CPU twin does, scores and sums in F32; the softmax weights are not
// rounded to F16 (the twin rounds each normalized weight, which an online
// softmax cannot do before the sum is known), a difference inside the per-op
// tolerance of one F16 step of the weights.
//
// Included once, by attention.cu (namespace attention_paged: launch, launch_kv_write).
#pragma once
#include <cfloat>
#include <string>

#include "core/error.h"
#include "device_math.cuh"
#include "core/half.h"
#include "core/kernel_params.h"
#include "core/kv_rows_check.h"
#include "attention_paged_split.cuh"
#include "attention_prefill.cuh"
#include "cuda_kernel.h"
#include "kv_cache.cuh"
#include "paged_pool.cuh"

namespace akunu {
namespace attention_paged {

constexpr int kWarps = 8;
constexpr int kUnroll = 4;  // keys a warp has in flight (their K / V loads issued together)

// K/V of each row rounded to the F16 pool (round to nearest even, as the CPU
// twin) at its sequence's pool row for its position; one thread per element.
__global__ void kv_write_paged_kernel(PagedKVWriteParams p, const float* k, const float* v, uint16_t* kc,
                                      uint16_t* vc, const int32_t* rows, const int32_t* tables) {
    const size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)p.kv_dim * p.n_tokens) return;
    const size_t t = idx / p.kv_dim, i = idx % p.kv_dim;
    const uint32_t seq = (uint32_t)rows[2 * t], pos = (uint32_t)rows[2 * t + 1];
    const size_t dst = pool_row(tables + (size_t)seq * p.max_blocks, p.block_size, pos) * p.kv_dim + i;
    kc[dst] = f32_to_f16(k[t * p.k_stride + i]);
    vc[dst] = f32_to_f16(v[t * p.v_stride + i]);
}

// Other cache types (core/kv_layout.h): a block per row, its K row then its V
// row in the cache's rounding (kv_cache.cuh).
__global__ void kv_write_paged_typed_kernel(PagedKVWriteParams p, const float* k, const float* v, uint8_t* kc,
                                            uint8_t* vc, const int32_t* rows, const int32_t* tables) {
    const size_t t = blockIdx.x;
    const uint32_t seq = (uint32_t)rows[2 * t], pos = (uint32_t)rows[2 * t + 1];
    const size_t dst = pool_row(tables + (size_t)seq * p.max_blocks, p.block_size, pos);
    kv_cache::store_span_block(p.k_type, kv_cache::row_at(kc, p.k_type, p.kv_dim, dst), p.kv_dim, 0, p.kv_dim,
                               k + t * p.k_stride);
    kv_cache::store_span_block(p.v_type, kv_cache::row_at(vc, p.v_type, p.kv_dim, dst), p.kv_dim, 0, p.kv_dim,
                               v + t * p.v_stride);
}

inline void launch_kv_write(const CudaArgs& a) {
    const PagedKVWriteParams p = a.p<PagedKVWriteParams>();
    const size_t n = (size_t)p.kv_dim * p.n_tokens;
    if (n == 0) return;
    if (p.k_type != kKvF16 || p.v_type != kKvF16) {
        if (p.k_type >= kKvTypeCount || p.v_type >= kKvTypeCount) throw Error("kv_write_paged: unknown KV cache type");
        if (p.kv_dim % kKvBlock) throw Error("kv_write_paged: a Q8_0 / Q4_0 cache needs rows of whole 32-value blocks");
        if (p.n_tokens > 2147483647u) throw Error("kv_write_paged: too many rows");
        kv_write_paged_typed_kernel<<<p.n_tokens, 128, 0, a.stream>>>(p, a.b<float>(0), a.b<float>(1),
                                                                       a.b<uint8_t>(2), a.b<uint8_t>(3),
                                                                       a.b<int32_t>(4), a.b<int32_t>(5));
        return;
    }
    kv_write_paged_kernel<<<blocks_for(n, 256), 256, 0, a.stream>>>(p, a.b<float>(0), a.b<float>(1),
                                                                    a.b<uint16_t>(2), a.b<uint16_t>(3),
                                                                    a.b<int32_t>(4), a.b<int32_t>(5));
}

// Grid (n_heads, n_tokens), kWarps warps a block. Lane `lane` holds the
// dimensions lane + 32 * i (i < D, those below head_dim): D = ceil(head_dim / 32),
// so one kernel a D serves every head size up to 32 * D, and each of the D
// loads of a row is 64 contiguous bytes across the warp. sinks: the heads'
// sink logits (PagedAttentionParams::sinks), joined once the warps have met;
// nullptr: none.
template <int D>
__global__ void __launch_bounds__(kWarps * 32)
    attention_paged_kernel(PagedAttentionParams p, const float* __restrict__ q, const uint8_t* __restrict__ kc,
                           const uint8_t* __restrict__ vc, float* __restrict__ out,
                           const int32_t* __restrict__ rows, const int32_t* __restrict__ tables,
                           const float* __restrict__ sinks) {
    const uint32_t h = blockIdx.x, t = blockIdx.y;
    const uint32_t hd = p.head_dim;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const uint32_t seq = (uint32_t)rows[2 * (size_t)t], pos = (uint32_t)rows[2 * (size_t)t + 1];
    const uint32_t lo = (p.window && pos + 1 > p.window) ? pos + 1 - p.window : 0;
    const uint32_t n = pos + 1 - lo;  // keys lo .. pos
    const int32_t* table = tables + (size_t)seq * p.max_blocks;
    const uint32_t kv_dim = p.n_kv_heads * hd;
    const uint32_t koff = (h / (p.n_heads / p.n_kv_heads)) * hd;
    const size_t krow = kv_row_bytes(p.k_type, kv_dim), vrow = kv_row_bytes(p.v_type, kv_dim);
    const bool f16 = p.k_type == kKvF16 && p.v_type == kKvF16;

    // This lane's dimensions of q, rounded to F16 as the CPU twin does.
    float qv[D];
    const float* qsrc = q + (size_t)t * p.q_stride + (size_t)h * hd;
#pragma unroll
    for (int i = 0; i < D; i++) {
        const uint32_t d = lane + 32 * i;
        qv[i] = d < hd ? f16_to_f32(f32_to_f16(qsrc[d])) : 0.0f;
    }

    const ScoreMap score = score_map(p.scale, p.softcap, 1.0f);
    float m = -FLT_MAX, l = 0.0f, acc[D];
#pragma unroll
    for (int i = 0; i < D; i++) acc[i] = 0.0f;
    for (uint32_t jb = (uint32_t)warp * kUnroll; jb < n; jb += kWarps * kUnroll) {  // warp-uniform
        float s[kUnroll], vv[kUnroll][D];
#pragma unroll
        for (int u = 0; u < kUnroll; u++) {
            s[u] = 0.0f;
#pragma unroll
            for (int i = 0; i < D; i++) vv[u][i] = 0.0f;
            if (jb + u < n) {
                const size_t r = pool_row(table, p.block_size, lo + jb + u);
                const uint8_t* kr = kc + r * krow;
                const uint8_t* vr = vc + r * vrow;
#pragma unroll
                for (int i = 0; i < D; i++) {
                    const uint32_t d = lane + 32 * i;
                    if (d < hd) {
                        if (f16) {  // (the F16 cache's loads as they always were)
                            s[u] += qv[i] * f16_to_f32(reinterpret_cast<const uint16_t*>(kr)[koff + d]);
                            vv[u][i] = f16_to_f32(reinterpret_cast<const uint16_t*>(vr)[koff + d]);
                        } else {
                            s[u] += qv[i] * kv_cache::load(p.k_type, kr, kv_dim, koff + d);
                            vv[u][i] = kv_cache::load(p.v_type, vr, kv_dim, koff + d);
                        }
                    }
                }
            }
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1)
#pragma unroll
            for (int u = 0; u < kUnroll; u++) s[u] += __shfl_xor_sync(0xffffffffu, s[u], o);
        float mnew = m;
#pragma unroll
        for (int u = 0; u < kUnroll; u++) {
            s[u] = score.cap(s[u]);
            s[u] *= score.mul;
            if (jb + u < n) mnew = fmaxf(mnew, s[u]);
        }
        const float corr = expf(m - mnew);
        l *= corr;
#pragma unroll
        for (int i = 0; i < D; i++) acc[i] *= corr;
#pragma unroll
        for (int u = 0; u < kUnroll; u++) {
            if (jb + u >= n) continue;
            const float e = expf(s[u] - mnew);
            l += e;
#pragma unroll
            for (int i = 0; i < D; i++) acc[i] += e * vv[u][i];
        }
        m = mnew;
    }

    // The warps meet in shared memory, in warp order (a warp without keys
    // has m = -FLT_MAX, l = 0 and adds nothing).
    __shared__ float wm[kWarps], wl[kWarps], wacc[kWarps][32 * D];
    if (lane == 0) {
        wm[warp] = m;
        wl[warp] = l;
    }
#pragma unroll
    for (int i = 0; i < D; i++) wacc[warp][lane + 32 * i] = acc[i];
    __syncthreads();
    float bm = -FLT_MAX;
    for (int w = 0; w < kWarps; w++) bm = fmaxf(bm, wm[w]);
    float bl = 0.0f;
    for (int w = 0; w < kWarps; w++) bl += wl[w] * expf(wm[w] - bm);
    const float c = sink_factor<false>(sinks, h, bm, bl);
    const float inv = c / bl;
    float* o = out + (size_t)t * p.out_stride + (size_t)h * hd;
    for (uint32_t d = threadIdx.x; d < hd; d += blockDim.x) {
        float v = 0.0f;
        for (int w = 0; w < kWarps; w++) v += wacc[w][d] * expf(wm[w] - bm);
        o[d] = v * inv;
    }
}

inline void launch(const CudaArgs& a) {
    const PagedAttentionParams p = a.p<PagedAttentionParams>();
    if (p.k_type >= kKvTypeCount || p.v_type >= kKvTypeCount) throw Error("CUDA attention_paged: unknown KV cache type");
    if (const char* why = kv_head_problem(p.k_type, p.v_type, p.head_dim))
        throw Error(std::string("CUDA attention_paged: ") + why);
    if (p.head_dim == 0 || p.head_dim > 256)
        throw Error("CUDA attention_paged: head_dim " + std::to_string(p.head_dim) + " outside 1..256");
    if (p.n_kv_heads == 0 || p.n_heads % p.n_kv_heads != 0)
        throw Error("CUDA attention_paged: " + std::to_string(p.n_heads) + " heads over " +
                    std::to_string(p.n_kv_heads) + " KV heads");
    if (p.block_size == 0) throw Error("CUDA attention_paged: block_size 0");
    if (p.n_tokens == 0 || p.n_heads == 0) return;
    if (p.n_tokens > 65535) throw Error("CUDA attention_paged: more than 65535 rows in one pass");
    // Generated rows (one query a sequence) take the split kernel, prompt
    // rows this one: the path follows a row's kind, never the pass.
    const uint32_t generated = std::min(p.generated_rows, p.n_tokens);
    const bool split = attention_paged_split::launch(a, p, generated);
    const uint32_t first = split ? generated : 0;
    if (first == p.n_tokens) return;
    // prompt rows (with the generated ones when the split kernel declined them: one per sequence, seen alike)
    if (attention_prefill::launch_paged(a, p, first)) return;
    const dim3 grid(p.n_heads, p.n_tokens - first);
    const float* q = a.b<float>(0) + (size_t)first * p.q_stride;
    const uint8_t* kc = a.b<uint8_t>(1);
    const uint8_t* vc = a.b<uint8_t>(2);
    float* out = a.b<float>(3) + (size_t)first * p.out_stride;
    const int32_t* rows = a.b<int32_t>(4) + 2 * (size_t)first;
    const int32_t* tables = a.b<int32_t>(5);
    const float* sinks = p.sinks ? a.b<float>(6) : nullptr;  // PagedAttentionParams::sinks
    switch ((p.head_dim + 31) / 32) {
        case 1: attention_paged_kernel<1><<<grid, kWarps * 32, 0, a.stream>>>(p, q, kc, vc, out, rows, tables, sinks); break;
        case 2: attention_paged_kernel<2><<<grid, kWarps * 32, 0, a.stream>>>(p, q, kc, vc, out, rows, tables, sinks); break;
        case 3: attention_paged_kernel<3><<<grid, kWarps * 32, 0, a.stream>>>(p, q, kc, vc, out, rows, tables, sinks); break;
        case 4: attention_paged_kernel<4><<<grid, kWarps * 32, 0, a.stream>>>(p, q, kc, vc, out, rows, tables, sinks); break;
        case 5: attention_paged_kernel<5><<<grid, kWarps * 32, 0, a.stream>>>(p, q, kc, vc, out, rows, tables, sinks); break;
        case 6: attention_paged_kernel<6><<<grid, kWarps * 32, 0, a.stream>>>(p, q, kc, vc, out, rows, tables, sinks); break;
        case 7: attention_paged_kernel<7><<<grid, kWarps * 32, 0, a.stream>>>(p, q, kc, vc, out, rows, tables, sinks); break;
        default: attention_paged_kernel<8><<<grid, kWarps * 32, 0, a.stream>>>(p, q, kc, vc, out, rows, tables, sinks); break;
    }
}

}  // namespace attention_paged
}  // namespace akunu
