// Decode attention for long caches with grouped-query attention: a block
// takes GC query heads of one KV group and one split of the key range, and
// each K / V row it loads serves all GC heads. The per-head kernel
// (attention_decode.cuh) reads a KV head's rows once for every query head of
// its group, which at a deep context makes the attention bound by L2 and by
// its few resident warps: at 32768 positions, Llama-3.1-8B's attention read
// its 134 MB of K / V a layer at under a third of the copy bandwidth.
//
// Layout: warp w of a block takes the split's 16-key chunks w, w + kWarps,
// ...; each warp streams its chunks through its own ring in shared memory
// (cp.async, stages<HD>() in flight, no block barrier in the walk) and runs
// the GC heads' online softmax on the tensor cores (attention_warp_chunk.cuh:
// the heads are the rows of m16n8k16 products). The splits are many (about
// three blocks an SM when the cache is full) and end as the per-head
// kernel's do: one used split writes the output, several combine in the
// last block to finish.
//
// Meaning as attention_warp_chunk.cuh states it (the per-head kernel does not
// round the softmax weights; both stay within the CPU twin's tolerance). The
// fused variant does the prologue's work (qk_norm_rope_kv) for its GC heads
// as the per-head kernel does for one.
//
// Included once, by attention_decode.cuh (namespace attention_decode::gqa).
#pragma once
#include "async_copy.cuh"
#include "attention_warp_chunk.cuh"

namespace akunu {
namespace attention_decode {
namespace gqa {

constexpr int kWarps = 4;
constexpr uint32_t kMaxSplits = 128;
// Caches shorter than CudaTuning::gqa_min_span (16384 by default) keep the
// per-head kernel: the split count follows the cache, and the combine of
// many splits is a fixed cost a layer that deep contexts repay. H100,
// Llama-3.2-1B F16 shape, 33792-position cache, tg128 beside the per-head
// kernel (AKUNU_CUDA_TUNING=gqa_min_span=0 / 1000000): -6% at depth 0, +4%
// at 4096, +16% at 16384.

// The softmax state of the block's warps in shared memory, and the output of
// head h0 + gh: a single used split writes it; otherwise partials to the
// workspace and the last block of the head group combines every split. A
// head's sink (sinks, or nullptr) joins where its output is written
// (finish_head).
template <int HD, int GC>
__device__ void finish_heads(const AttentionParams& p, uint32_t h0, uint32_t split, uint32_t used, uint32_t n_splits,
                             const float (*wm)[GC], const float (*wl)[GC], const float (*wacc)[GC][HD], float* out,
                             float* partials, uint32_t* counters, ActQ8 q8, const float* sinks) {
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
        float c[GC];
#pragma unroll
        for (int gh = 0; gh < GC; gh++) c[gh] = sink_factor<false>(sinks, h0 + gh, bm[gh], bl[gh]);
        for (uint32_t i = threadIdx.x; i < GC * HD; i += blockDim.x) {
            const int gh = i / HD;
            const uint32_t d = i % HD;
            write_out(p, h0 + gh, d, block_value(gh, d) * c[gh] / bl[gh], out, q8);
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
        if (sinks) {  // the head's sink joins the combined max and sum
            const float c = join_sink<false>(gm, gl, sinks[h0 + gh]);
            for (uint32_t s = lane; s < used; s += 32) weight[gh][s] *= c;
        }
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

// A split's keys are whole tiles of kTileKeys (every warp a chunk); a warp's
// ring holds stages<HD>() chunks.
constexpr uint32_t kTileKeys = attention_warp_chunk::kKeys * kWarps;
template <int HD>
constexpr int stages() { return HD == 64 ? 4 : 2; }
template <int HD>
constexpr int warp_ring_halves() { return stages<HD>() * attention_warp_chunk::chunk_halves<HD>(); }
template <int HD>
constexpr size_t ring_bytes() { return (size_t)kWarps * warp_ring_halves<HD>() * 2; }

// Grid (n_kv_heads x group / GC, n_splits), kWarps warps a block.
template <int HD, int GC, bool Fused>
__global__ void __launch_bounds__(kWarps * 32)
    attention_decode_gqa_kernel(AttentionParams p, uint32_t n_splits, const float* q, uint16_t* kc, uint16_t* vc,
                                float* out, float* partials, uint32_t* counters, const uint32_t* replay_pos, ActQ8 q8,
                                HeadPrologue pro, const float* sinks) {
    namespace wc = attention_warp_chunk;
    constexpr int S = stages<HD>(), LD = wc::row_halves<HD>(), CH = wc::chunk_halves<HD>(), K16 = wc::kKeys;
    extern __shared__ __align__(16) uint16_t rings[];  // [kWarps][S] chunks: K rows then V rows
    const uint32_t group = p.n_heads / p.n_kv_heads, chunks = group / GC;
    const uint32_t kvh = blockIdx.x / chunks, chunk = blockIdx.x % chunks, h0 = kvh * group + chunk * GC;
    const uint32_t split = blockIdx.y;
    // a split is one tile at least: at a few hundred keys the tiles load side by side in several blocks
    const SplitRange r = split_range(p, n_splits, split, replay_pos, kTileKeys);
    if (split >= r.used) return;  // touches nothing (see the per-head kernel)
    const uint32_t kv_dim = p.n_kv_heads * HD;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    // the KV head's slices of lo's rows, where the loads step from (SplitRange::step)
    uint16_t* krows = kc + (size_t)r.lo_row * kv_dim + (size_t)kvh * HD;
    uint16_t* vrows = vc + (size_t)r.lo_row * kv_dim + (size_t)kvh * HD;
    const uint32_t jnew = r.pos - r.lo;
    const uint32_t n_chunks = (r.j1 - r.j0 + K16 - 1) / K16;
    const uint32_t mine = n_chunks > (uint32_t)warp ? (n_chunks - warp + kWarps - 1) / kWarps : 0;
    uint16_t* ring = rings + warp * warp_ring_halves<HD>();
    // The warp's chunk i (keys j0 + (warp + i kWarps) 16 + 0..15) to ring slot
    // b: rows of keys past the split, and this step's (the prologue's, put in
    // after the wait), are zeros. Every call commits a group, empty past the
    // warp's last chunk, so the waits below count the same everywhere.
    auto issue = [&](uint32_t i, int b) {
        if (i < mine) {
            const uint32_t c0 = r.j0 + (warp + i * kWarps) * K16;
            auto row = [&](int key, ptrdiff_t& off) {
                const uint32_t j = c0 + key;
                if (j >= r.j1 || j == jnew) return false;
                off = r.step(j) * (ptrdiff_t)kv_dim;
                return true;
            };
            wc::stage_chunk<HD>(ring + b * CH, krows, vrows, row);
        }
        copy_commit();
    };
    // the first stages before the wait: rows of earlier steps, written by
    // kernels that had finished before the one ahead of this started
#pragma unroll
    for (int i = 0; i < S - 1; i++) issue(i, i);

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

    uint32_t qa[HD / 16][4];
    wc::load_q<HD, GC>(qhead, qa);
    const ScoreMap scale2 = score_map(p.scale, p.softcap, wc::kLog2e);
    float m, l, o[HD / 8][4];
    wc::start<HD>(m, l, o);
    // A chunk's live keys, once it landed; this step's key put in: Fused from
    // shared memory, else from the cache.
    auto live = [&](uint32_t i, uint16_t* kt) {
        const uint32_t c0 = r.j0 + (warp + i * kWarps) * K16;
        if (jnew >= c0 && jnew < c0 + K16) {
            const int key = jnew - c0;
            for (int d = lane * 8; d < HD; d += 32 * 8) {
                uint4 kv, vv;
                if (Fused && new_in_smem) {
                    kv = *reinterpret_cast<const uint4*>(knew + d);
                    vv = *reinterpret_cast<const uint4*>(vnew + d);
                } else {
                    kv = *reinterpret_cast<const uint4*>(krows + r.step(jnew) * kv_dim + d);
                    vv = *reinterpret_cast<const uint4*>(vrows + r.step(jnew) * kv_dim + d);
                }
                *reinterpret_cast<uint4*>(kt + key * LD + d) = kv;
                *reinterpret_cast<uint4*>(kt + (K16 + key) * LD + d) = vv;
            }
            __syncwarp();
        }
        return (int)min((uint32_t)K16, r.j1 - c0);
    };
    wc::walk<HD, S>(ring, mine, issue, live, qa, scale2, m, l, o);
    // The warps meet in shared memory (over the rings, now read); maxima back to natural logarithms.
    __syncthreads();
    __shared__ float wm[kWarps][GC], wl[kWarps][GC];
    float(*wacc)[GC][HD] = reinterpret_cast<float(*)[GC][HD]>(rings);
    wc::store_warp<HD, GC>(m, l, o, 0.6931471805599453f, wm[warp], wl[warp], &wacc[warp][0][0]);
    __syncthreads();
    finish_heads<HD, GC>(p, h0, split, r.used, n_splits, wm, wl, wacc, out, partials, counters, q8, sinks);
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
                   const uint32_t*, ActQ8, HeadPrologue, const float*) = attention_decode_gqa_kernel<HD, GC, false>;
    HeadPrologue pro{};
    if (a.absorbed.set) {
        kernel = attention_decode_gqa_kernel<HD, GC, true>;
        const CudaArgs::Absorbed& qk = a.absorbed;
        pro = HeadPrologue{qk.p<QKRopeKVParams>(), qk.b<float>(1), qk.b<float>(2), qk.b<float>(3), qk.b<float>(4),
                           nullptr};
        if (pro.p.has_freq_factors) pro.factors = qk.b<float>(5);
    }
    allow_dynamic_shared((const void*)kernel, (int)ring_bytes<HD>());  // (rings past the 48 KB default)
    launch_pdl(kernel, grid, kWarps * 32, ring_bytes<HD>(), a, p, n_splits, a.b<float>(0), a.b<uint16_t>(1),
               a.b<uint16_t>(2), a.b<float>(3), partials, counters, a.replay_pos, a.q8_out, pro, sinks_of(a, p));
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
    uint32_t n_splits = std::clamp<uint32_t>((span + kTileKeys - 1) / kTileKeys, 1, most);
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
