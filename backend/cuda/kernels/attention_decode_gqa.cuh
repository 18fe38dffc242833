// Decode attention for long caches with grouped-query attention: a block
// takes GC query heads of one KV group and one split of the key range, and
// each K / V row it loads serves all GC heads. The per-head kernel
// (attention_decode.cuh) reads a KV head's rows once for every query head of
// its group, which at a deep context makes the attention bound by L2 and by
// its few resident warps: at 32768 positions, Llama-3.1-8B's attention read
// its 134 MB of K / V a layer at under a third of the copy bandwidth.
//
// Layout: the split's K and V rows stream through shared memory in tiles of
// 16 KB, kStages of them in flight (cp.async), so the loads of later tiles
// overlap the arithmetic on this one; in a tile a lane holds 8 dimensions of
// a key row, L = HD / 8 lanes a key, and each warp a quarter of the keys. q
// of the GC heads (8 dims each) and their GC online softmaxes stay in
// registers. The splits are many (about three blocks an SM when the cache is
// full) and end as the per-head kernel's do: one used split writes the
// output, several combine in the last block to finish.
//
// Meaning and precision as attention_decode.cuh (Q rounded to F16; the
// softmax weights are not). The fused variant does the prologue's work
// (qk_norm_rope_kv) for its GC heads as the per-head kernel does for one.
//
// Included once, by attention_decode.cuh (namespace attention_decode::gqa).
#pragma once
#include "async_copy.cuh"
#include "attention_key_tile.cuh"

namespace akunu {
namespace attention_decode {
namespace gqa {

constexpr int kWarps = 4;
using attention_key_tile::kDims;  // dims of a key row a lane holds
constexpr uint32_t kMaxSplits = 128;
// Caches shorter than CudaTuning::gqa_min_span (16384 by default) keep the
// per-head kernel: the split count follows the cache, and the combine of
// many splits is a fixed cost a layer that deep contexts repay. H100,
// Llama-3.2-1B F16 shape, 33792-position cache, tg128 beside the per-head
// kernel (AKUNU_CUDA_TUNING=gqa_min_span=0 / 1000000): -6% at depth 0, +4%
// at 4096, +16% at 16384.

// The softmax state of the block's warps in shared memory, and the output of
// head h0 + gh: a single used split writes it; otherwise partials to the
// workspace and the last block of the head group combines every split.
template <int HD, int GC>
__device__ void finish_heads(const AttentionParams& p, uint32_t h0, uint32_t split, uint32_t used, uint32_t n_splits,
                             const float (*wm)[GC], const float (*wl)[GC], const float (*wacc)[GC][HD], float* out,
                             float* partials, uint32_t* counters, ActQ8 q8) {
    float bm[GC], bl[GC];
#pragma unroll
    for (int gh = 0; gh < GC; gh++) {
        bm[gh] = -FLT_MAX;
        for (int w = 0; w < kWarps; w++) bm[gh] = fmaxf(bm[gh], wm[w][gh]);
        bl[gh] = 0.0f;
        for (int w = 0; w < kWarps; w++) bl[gh] += wl[w][gh] * expf(wm[w][gh] - bm[gh]);
    }
    auto block_value = [&](int gh, uint32_t d) {
        float v = 0.0f;
        for (int w = 0; w < kWarps; w++) v += wacc[w][gh][d] * expf(wm[w][gh] - bm[gh]);
        return v;
    };
    // whole warps over 32 consecutive dims of one head (write_out's 8-bit rounding)
    if (used == 1) {
        for (uint32_t i = threadIdx.x; i < GC * HD; i += blockDim.x) {
            const int gh = i / HD;
            const uint32_t d = i % HD;
            write_out(p, h0 + gh, d, block_value(gh, d) / bl[gh], out, q8);
        }
        return;
    }
    auto slot = [&](uint32_t h, uint32_t s) { return partials + ((size_t)h * n_splits + s) * (HD + 2); };
    for (uint32_t i = threadIdx.x; i < GC * HD; i += blockDim.x) slot(h0 + i / HD, split)[i % HD] = block_value(i / HD, i % HD);
    if (threadIdx.x < GC) {
        slot(h0 + threadIdx.x, split)[HD] = bm[threadIdx.x];
        slot(h0 + threadIdx.x, split)[HD + 1] = bl[threadIdx.x];
    }
    __threadfence();  // this block's partials are visible before it is counted
    __syncthreads();
    __shared__ bool is_last;
    if (threadIdx.x == 0) is_last = atomicAdd(&counters[h0], 1u) == used - 1;
    __syncthreads();
    if (!is_last) return;
    __threadfence();
    // Each split's weight exp(m_s - m) / l per head, once (a warp a head,
    // lanes over the splits), then every output a weighted sum of the splits'
    // partials, its loads independent of one another.
    __shared__ float weight[GC][kMaxSplits];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    for (int gh = warp; gh < GC; gh += kWarps) {
        float gm = -FLT_MAX;
        for (uint32_t s = lane; s < used; s += 32) gm = fmaxf(gm, __ldcg(&slot(h0 + gh, s)[HD]));
#pragma unroll
        for (int o = 16; o > 0; o /= 2) gm = fmaxf(gm, __shfl_xor_sync(0xffffffffu, gm, o));
        float gl = 0.0f;
        for (uint32_t s = lane; s < used; s += 32) {
            const float c = expf(__ldcg(&slot(h0 + gh, s)[HD]) - gm);
            weight[gh][s] = c;
            gl += __ldcg(&slot(h0 + gh, s)[HD + 1]) * c;
        }
#pragma unroll
        for (int o = 16; o > 0; o /= 2) gl += __shfl_xor_sync(0xffffffffu, gl, o);
        for (uint32_t s = lane; s < used; s += 32) weight[gh][s] /= gl;
    }
    __syncthreads();
    for (uint32_t i = threadIdx.x; i < GC * HD; i += blockDim.x) {
        const uint32_t gh = i / HD, d = i % HD;
        const float* col = slot(h0 + gh, 0) + d;
        float v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        uint32_t s = 0;
        for (; s + 4 <= used; s += 4)
#pragma unroll
            for (int j = 0; j < 4; j++) v[j] += __ldcg(col + (size_t)(s + j) * (HD + 2)) * weight[gh][s + j];
        for (; s < used; s++) v[0] += __ldcg(col + (size_t)s * (HD + 2)) * weight[gh][s];
        write_out(p, h0 + gh, d, (v[0] + v[1]) + (v[2] + v[3]), out, q8);
    }
    if (threadIdx.x == 0) counters[h0] = 0;  // ready for the next layer
}

template <int HD>
constexpr int tile_keys() { return 4096 / HD; }  // a stage's K and V rows: 16 KB
constexpr int kStages = 3;
template <int HD>
constexpr size_t tile_bytes() { return (size_t)kStages * 2 * tile_keys<HD>() * HD * 2; }

// Grid (n_kv_heads x group / GC, n_splits), kWarps warps a block. The split's
// keys stream through shared memory in tiles of tile_keys<HD>() rows, kStages
// in flight (cp.async), so the loads of later tiles overlap the arithmetic on
// this one; a warp takes a quarter of each tile, L = HD / 8 lanes a key.
template <int HD, int GC, bool Fused>
__global__ void __launch_bounds__(kWarps * 32)
    attention_decode_gqa_kernel(AttentionParams p, uint32_t n_splits, const float* q, uint16_t* kc, uint16_t* vc,
                                float* out, float* partials, uint32_t* counters, const uint32_t* replay_pos, ActQ8 q8,
                                HeadPrologue pro) {
    constexpr int L = HD / kDims, KW = 32 / L, T = tile_keys<HD>(), U = T / kWarps / KW;
    static_assert(U >= 1 && T % (kWarps * KW) == 0, "a warp's share of a tile is whole key steps");
    extern __shared__ __align__(16) uint16_t tiles[];  // [kStages][2][T][HD]: K then V
    const uint32_t group = p.n_heads / p.n_kv_heads, chunks = group / GC;
    const uint32_t kvh = blockIdx.x / chunks, chunk = blockIdx.x % chunks, h0 = kvh * group + chunk * GC;
    const uint32_t split = blockIdx.y;
    // a split is one tile at least: at a few hundred keys the tiles load side by side in several blocks
    const SplitRange r = split_range(p, n_splits, split, replay_pos, T);
    if (split >= r.used) return;  // touches nothing (see the per-head kernel)
    const uint32_t kv_dim = p.n_kv_heads * HD;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / L, sub = lane % L;
    // the KV head's slices of lo's rows, where the loads step from (SplitRange::step)
    uint16_t* krows = kc + (size_t)r.lo_row * kv_dim + (size_t)kvh * HD;
    uint16_t* vrows = vc + (size_t)r.lo_row * kv_dim + (size_t)kvh * HD;
    const uint32_t jnew = r.pos - r.lo, n_tiles = (r.j1 - r.j0 + T - 1) / T;
    // Tile t to stage b: rows of keys past the split, and this step's (the
    // prologue's, read after the wait), are zeros. Every call commits a group,
    // empty past the last tile, so the waits below count the same everywhere.
    auto issue = [&](uint32_t t, int b) {
        if (t < n_tiles) {
            uint16_t* kt = tiles + (size_t)b * 2 * T * HD;
            uint16_t* vt = kt + T * HD;
            for (int c = threadIdx.x; c < T * HD / 8; c += kWarps * 32) {
                const int key = c / (HD / 8), col = (c % (HD / 8)) * 8;
                const uint32_t j = r.j0 + t * T + key;
                const bool valid = j < r.j1 && j != jnew;
                const ptrdiff_t at = (valid ? r.step(j) : 0) * kv_dim + col;
                copy16_async(kt + key * HD + col, krows + at, valid);
                copy16_async(vt + key * HD + col, vrows + at, valid);
            }
        }
        copy_commit();
    };
    // the first stages before the wait: rows of earlier steps, written by
    // kernels that had finished before the one ahead of this started
#pragma unroll
    for (int t = 0; t < kStages - 1; t++) issue(t, t);

    __shared__ __align__(16) float qs[Fused ? GC : 1][Fused ? HD : 4];
    __shared__ __align__(16) float ks[Fused ? HD : 4];
    __shared__ __align__(16) uint16_t knew[Fused ? HD : 8], vnew[Fused ? HD : 8];
    HeadPairs pairs{};
    if constexpr (Fused) pairs = head_pairs_at(pro.p, r.pos, pro.factors, pro.q_norm, pro.k_norm);
    pdl_wait();
    pdl_launch_dependents();

    const float* qhead = q + (size_t)h0 * HD;  // GC consecutive heads
    bool new_in_smem = false;
    if constexpr (Fused) {
        // the prologue for heads h0 .. h0 + GC - 1; the last split's blocks also
        // rotate this step's key, and the group's first block stores K / V rows
        const bool has_new = split == r.used - 1;
        const uint32_t i0 = pairs.at.i0, i1 = pairs.at.i1;
        if (pairs.active && has_new) {
            vnew[i0] = f32_to_f16(pro.v[kvh * HD + i0]);
            vnew[i1] = f32_to_f16(pro.v[kvh * HD + i1]);
        }
#pragma unroll
        for (int gh = 0; gh < GC; gh++) {
            HeadPairs hp = pairs;
            const bool two = has_new && gh == 0;
            if (hp.active) {
                hp.a0 = qhead[(size_t)gh * HD + i0];
                hp.a1 = qhead[(size_t)gh * HD + i1];
                if (two) {
                    hp.b0 = pro.k[kvh * HD + i0];
                    hp.b1 = pro.k[kvh * HD + i1];
                }
            }
            norm_rope_pairs(pro.p, hp, two, qs[gh], ks);
            if (hp.active) {
                qs[gh][i0] = hp.a0;
                qs[gh][i1] = hp.a1;
                if (two) {
                    knew[i0] = f32_to_f16(hp.b0);
                    knew[i1] = f32_to_f16(hp.b1);
                    if (chunk == 0) {  // this step's row: its position's ring row
                        const ptrdiff_t at = r.step(jnew) * kv_dim;
                        krows[at + i0] = knew[i0];
                        krows[at + i1] = knew[i1];
                        vrows[at + i0] = vnew[i0];
                        vrows[at + i1] = vnew[i1];
                    }
                }
            }
        }
        new_in_smem = has_new;
        __syncthreads();
        qhead = &qs[0][0];
    }

    // q of the GC heads, this lane's 8 dims, rounded to F16 as the CPU twin does
    float qf[GC][kDims];
#pragma unroll
    for (int gh = 0; gh < GC; gh++) {
        const float4* src = reinterpret_cast<const float4*>(qhead + gh * HD + sub * kDims);
#pragma unroll
        for (int i = 0; i < 2; i++) {
            const float4 v = src[i];
            qf[gh][4 * i] = __half2float(__float2half_rn(v.x));
            qf[gh][4 * i + 1] = __half2float(__float2half_rn(v.y));
            qf[gh][4 * i + 2] = __half2float(__float2half_rn(v.z));
            qf[gh][4 * i + 3] = __half2float(__float2half_rn(v.w));
        }
    }
    float m[GC], l[GC], acc[GC][kDims];
    attention_key_tile::start_softmax<GC>(m, l, acc);
    for (uint32_t t = 0; t < n_tiles; t++) {  // block-uniform
        const uint16_t* kt = attention_key_tile::next_tile<kStages, T, HD>(tiles, t, issue);
        const uint16_t* vt = kt + T * HD;
        uint4 kr[U], vr[U];
        uint32_t jk[U];
#pragma unroll
        for (int u = 0; u < U; u++) {
            const int key = warp * (T / kWarps) + u * KW + g;
            jk[u] = r.j0 + t * T + key;
            if (jk[u] != jnew) {
                kr[u] = *reinterpret_cast<const uint4*>(kt + key * HD + sub * kDims);
                vr[u] = *reinterpret_cast<const uint4*>(vt + key * HD + sub * kDims);
            } else if (Fused && new_in_smem) {  // this step's key: Fused from shared memory, else the cache
                kr[u] = *reinterpret_cast<const uint4*>(knew + sub * kDims);
                vr[u] = *reinterpret_cast<const uint4*>(vnew + sub * kDims);
            } else {
                kr[u] = *reinterpret_cast<const uint4*>(krows + r.step(jnew) * kv_dim + sub * kDims);
                vr[u] = *reinterpret_cast<const uint4*>(vrows + r.step(jnew) * kv_dim + sub * kDims);
            }
        }
        bool live[U];
#pragma unroll
        for (int u = 0; u < U; u++) live[u] = jk[u] < r.j1;
        attention_key_tile::add_keys<GC, U, L>(kr, vr, live, qf, p.scale, m, l, acc);
    }
    copy_wait<0>();  // no copy outstanding at exit
    attention_key_tile::merge_key_groups<GC, L>(m, l, acc);  // the warp's key groups meet
    __shared__ float wm[kWarps][GC], wl[kWarps][GC];
    __shared__ __align__(16) float wacc[kWarps][GC][HD];
    if (lane == 0)
#pragma unroll
        for (int gh = 0; gh < GC; gh++) {
            wm[warp][gh] = m[gh];
            wl[warp][gh] = l[gh];
        }
    if (lane < L)
#pragma unroll
        for (int gh = 0; gh < GC; gh++)
#pragma unroll
            for (int d = 0; d < kDims; d++) wacc[warp][gh][sub * kDims + d] = acc[gh][d];
    __syncthreads();
    finish_heads<HD, GC>(p, h0, split, r.used, n_splits, wm, wl, wacc, out, partials, counters, q8);
}

// Query heads a block takes: 4 where the group divides by 4, else 2, else 1
// (then the per-head kernel is as good).
inline uint32_t heads_per_block(const AttentionParams& p) {
    const uint32_t group = p.n_heads / p.n_kv_heads;
    return group % 4 == 0 ? 4 : group % 2 == 0 ? 2 : 1;
}

// Whether this kernel takes `p`: a decode pass the lane-group kernel takes
// (head_dim 64, 128 or 256 here), query heads sharing KV heads, and a cache of
// at least CudaTuning::gqa_min_span positions.
inline bool takes(const CudaArgs& a, const AttentionParams& p) {
    const uint32_t span = p.window ? std::min(p.window, p.max_ctx) : p.max_ctx;
    return groups_kernel_takes(a, p) && p.head_dim >= 64 && heads_per_block(p) > 1 && span >= a.tuning->gqa_min_span;
}

template <int HD, int GC>
void launch_shape(const CudaArgs& a, const AttentionParams& p, dim3 grid, uint32_t n_splits, float* partials,
                  uint32_t* counters) {
    void (*kernel)(AttentionParams, uint32_t, const float*, uint16_t*, uint16_t*, float*, float*, uint32_t*,
                   const uint32_t*, ActQ8, HeadPrologue) = attention_decode_gqa_kernel<HD, GC, false>;
    HeadPrologue pro{};
    if (a.absorbed.set) {
        kernel = attention_decode_gqa_kernel<HD, GC, true>;
        const CudaArgs::Absorbed& qk = a.absorbed;
        pro = HeadPrologue{qk.p<QKRopeKVParams>(), qk.b<float>(1), qk.b<float>(2), qk.b<float>(3), qk.b<float>(4),
                           nullptr};
        if (pro.p.has_freq_factors) pro.factors = qk.b<float>(5);
    }
    allow_dynamic_shared((const void*)kernel, (int)tile_bytes<HD>());  // (tiles past the 48 KB default)
    launch_pdl(kernel, grid, kWarps * 32, tile_bytes<HD>(), a, p, n_splits, a.b<float>(0), a.b<uint16_t>(1),
               a.b<uint16_t>(2), a.b<float>(3), partials, counters, a.replay_pos, a.q8_out, pro);
}

template <int HD>
void launch_dim(const CudaArgs& a, const AttentionParams& p, dim3 grid, uint32_t n_splits, float* partials,
                uint32_t* counters) {
    if (heads_per_block(p) == 4)
        launch_shape<HD, 4>(a, p, grid, n_splits, partials, counters);
    else
        launch_shape<HD, 2>(a, p, grid, n_splits, partials, counters);
}

// Launches the kernel for `p` (takes(a, p) holds). The split count follows
// the cache size, never the position (one capture serves every position):
// about three blocks an SM (as many as fit) over a full cache, a tile a
// split at least.
inline void launch(const CudaArgs& a, const AttentionParams& p) {
    const uint32_t span = p.window ? std::min(p.window, p.max_ctx) : p.max_ctx;
    const uint32_t rows = p.n_heads / heads_per_block(p);  // blocks a split
    const uint32_t most = std::clamp<uint32_t>(3u * (uint32_t)a.tuning->sm_count / rows, 1, kMaxSplits);
    const uint32_t tile = p.head_dim == 64 ? tile_keys<64>() : p.head_dim == 128 ? tile_keys<128>() : tile_keys<256>();
    uint32_t n_splits = std::clamp<uint32_t>((span + tile - 1) / tile, 1, most);
    if ((size_t)p.n_heads * 4 > kWorkspaceCounterBytes) throw Error("CUDA attention: more heads than the split counters hold");
    const size_t partials_at = kWorkspaceCounterBytes;
    auto fits = [&](uint32_t s) { return partials_at + (size_t)p.n_heads * s * (p.head_dim + 2) * 4 <= a.workspace_bytes; };
    while (n_splits > 1 && !fits(n_splits)) n_splits /= 2;
    uint32_t* counters = reinterpret_cast<uint32_t*>(a.workspace);
    float* partials = reinterpret_cast<float*>(a.workspace + partials_at);
    const dim3 grid(rows, n_splits);
    switch (p.head_dim) {
        case 64: launch_dim<64>(a, p, grid, n_splits, partials, counters); return;
        case 128: launch_dim<128>(a, p, grid, n_splits, partials, counters); return;
        default: launch_dim<256>(a, p, grid, n_splits, partials, counters); return;
    }
}

}  // namespace gqa
}  // namespace attention_decode
}  // namespace akunu
