// The fused decode ops, as backend/cpu/kernels/fused.cpp defines them:
// gemv_multi (Q, K and V in one launch, gate and up with the activation, a
// projection with its residual add, each optionally behind the input
// RMSNorm; the kernels are in gemv_multi.cuh, the rules that pick one here),
// qk_norm_rope_kv (QK norm, RoPE and the K / V cache rows of a decode step)
// and rmsnorm_residual (a post-norm and the residual add).
//
// gemv_multi's kernels, by what a launch asks:
// - one token, x rounded to 8 bits, large enough (lean_fits):
//   gemv_multi_lean_kernel, compiled for one format at the fewest registers
//   its loop fits (most warps resident: these GEMVs are bound by the weight
//   bytes in flight); gate and up rows of one output on one warp (Paired:
//   x's loads serve both dots, halving the load / store traffic of x).
// - one token of float rows (F16 / BF16 / F32, x normalized ahead): the same
//   lean kernel, rows split among warps until the grid is long enough
//   (float_lean_split).
// - a Q8Link writer (gate + up, or projection + residual, whose output the
//   next GEMV reads): gemv_gate_round_kernel / gemv_residual_round_kernel,
//   32 warps a block that also prepare their 32 outputs for the reader.
// - anything else (several tokens, mixed formats, short grids of short rows,
//   where a larger register budget keeps more loads in flight per warp):
//   gemv_multi_kernel.
#include <algorithm>
#include <string>
#include <vector>

#include "act_q8.h"
#include "core/dtype_descriptor.h"
#include "core/error.h"
#include "core/half.h"
#include "core/kernel_params.h"
#include "cuda_kernel.h"
#include "gemv_multi.cuh"
#include "head_prologue.cuh"
#include "kv_cache.cuh"

namespace akunu {
namespace {

using namespace gemv_formats;
using namespace gemv_multi;

using LeanKernel = void (*)(MultiGemvParams, Geometry, LeanX, uint32_t, int, const uint8_t*, const uint8_t*,
                            const uint8_t*, float*, float*, float*);
using Kernel = void (*)(MultiGemvParams, Geometry, const float*, const float*, ActQ8, uint32_t, const uint8_t*,
                        const uint8_t*, const uint8_t*, float*, float*, float*);

// Gate + up + activation modes: two matrices an output row.
bool is_gated(const MultiGemvParams& p) { return p.mode == kGemvSiluGate || p.mode == kGemvGeluGate; }

uint32_t matrices_used(const MultiGemvParams& p) {
    return p.mode == kGemvSeparate ? p.n_mats : p.mode == kGemvAccumulate ? 1 : 2;
}

uint32_t total_rows(const MultiGemvParams& p) {
    uint32_t rows = p.N[0];
    if (p.mode == kGemvSeparate)
        for (uint32_t i = 1; i < p.n_mats; i++) rows += p.N[i];
    return rows;
}

// Float rows (F16: 2 bytes a weight, 3.6x Q4_0's) split among warps, up to 4,
// until the grid holds 4096 warps, each with at least 4 steps of its row:
// Qwen3-0.6B's O / down projections (1024 rows) would otherwise run 8 warps
// an SM. (Integer rows stay a warp a row: splitting them gave long grids
// nothing and slowed short grids of short rows.)
int float_lean_split(const MultiGemvParams& p, int pair) {
    constexpr int kMost = 4;
    const uint32_t steps = p.K / (8 * 32);  // 16-byte lane loads of F16 (F32: twice as many)
    int split = 1;
    while (split < kMost && (size_t)total_rows(p) * pair * split < 4096 && steps >= 4u * split &&
           pair * split < kWarps)
        split *= 2;
    return split;
}

// Warps a matrix row of the lean kernel (see gemv_multi_lean_kernel).
int lean_split(const MultiGemvParams& p) {
    return gemv_q8::has_q8_layout(p.dtype[0]) ? 1 : float_lean_split(p, is_gated(p) ? 2 : 1);
}

// The lean kernel compiled for one integer format (Paired: gate and up rows
// on one warp); nullptr for a format without one.
template <bool Paired>
LeanKernel typed_lean_kernel(uint32_t dtype) {
    switch (dtype) {
        case GGML_Q4_0: return gemv_multi_lean_kernel<gemv_q8::Q4_0, Paired>;
        case GGML_Q8_0: return gemv_multi_lean_kernel<gemv_q8::Q8_0, Paired>;
        case GGML_Q4_K: return gemv_multi_lean_kernel<gemv_q8::Q4_K, Paired>;
        case GGML_Q6_K: return gemv_multi_lean_kernel<gemv_q8::Q6_K, Paired>;
        case AKUNU_Q4_0_X8: return gemv_multi_lean_kernel<gemv_q8::Q4_0X8, Paired>;
        case AKUNU_Q8_0_X8: return gemv_multi_lean_kernel<gemv_q8::Q8_0X8, Paired>;
        case AKUNU_Q6_K_X8: return gemv_multi_lean_kernel<gemv_q8::Q6_KX8, Paired>;
        default: return nullptr;
    }
}

// The lean kernel for these matrices: compiled for their one format, or the
// switch where they mix (Q4_K_M files: Q4_K beside Q6_K).
LeanKernel lean_kernel(const MultiGemvParams& p, uint32_t used) {
    bool uniform = true;
    for (uint32_t i = 1; i < used; i++) uniform = uniform && p.dtype[i] == p.dtype[0];
    if (uniform)
        if (LeanKernel k = typed_lean_kernel<false>(p.dtype[0])) return k;
    return gemv_multi_lean_kernel<AnyQ8>;
}

// The paired lean kernel (gate and up rows on one warp) for a gated launch
// whose two matrices share one integer format; nullptr otherwise.
LeanKernel paired_lean_kernel(const MultiGemvParams& p) {
    if (!is_gated(p) || p.dtype[1] != p.dtype[0]) return nullptr;
    return typed_lean_kernel<true>(p.dtype[0]);
}

// The lean kernel compiled for one float format (Paired: gate and up rows on
// one warp); nullptr for any other format.
template <bool Paired>
LeanKernel typed_float_lean_kernel(uint32_t dtype) {
    switch (dtype) {
        case GGML_F16: return gemv_multi_lean_kernel<Half<false, true>, Paired>;
        case GGML_BF16: return gemv_multi_lean_kernel<Half<true, true>, Paired>;
        case GGML_F32: return gemv_multi_lean_kernel<F32, Paired>;
        default: return nullptr;
    }
}

// The lean kernel for float rows where every matrix shares one float format
// and x needs no norm in the blocks (kp.norm clear: a kernel of its own or a
// Q8Link writer normalized it); nullptr otherwise. The weights bypass L1
// (Half's Stream) so that x stays there; 40 registers, 6 blocks an SM, where
// the general kernel's format switch allows 2.
LeanKernel float_lean_kernel(const MultiGemvParams& kp, uint32_t used) {
    if (kp.norm || kp.n_tokens != 1) return nullptr;
    for (uint32_t i = 1; i < used; i++)
        if (kp.dtype[i] != kp.dtype[0]) return nullptr;
    return typed_float_lean_kernel<false>(kp.dtype[0]);
}

// The paired lean float kernel (gate and up rows of one output on one warp,
// x read once for both: float_row_dot_pair) for a gated launch the lean
// float kernel takes unsplit; nullptr otherwise.
LeanKernel paired_float_lean_kernel(const MultiGemvParams& kp, uint32_t used) {
    if (!is_gated(kp) || !float_lean_kernel(kp, used) || lean_split(kp) != 1) return nullptr;
    return typed_float_lean_kernel<true>(kp.dtype[0]);
}

// Whether a one-token launch of integer rows takes the lean kernel: where its
// rows are long and many (K and rows both 2048 and up), or its weights are
// many (CudaTuning::lean_min_bytes) and its grid long (3 blocks an SM and
// up), so that warps resident set the pace. Short rows (Qwen3-0.6B's: K 1024
// to 3072, 1024 rows for O / down) run faster on gemv_multi_kernel, whose
// larger register budget keeps more of each warp's loads in flight.
bool lean_fits(const CudaTuning& t, const MultiGemvParams& p, const Geometry& g) {
    const size_t rows = (size_t)total_rows(p) * (is_gated(p) ? 2 : 1);
    if (p.K >= 2048 && rows >= 2048) return true;
    if (rows < (size_t)3 * t.sm_count * kWarps) return false;
    size_t bytes = 0;
    for (uint32_t i = 0; i < matrices_used(p); i++)
        bytes += (size_t)(p.mode == kGemvSeparate ? p.N[i] : p.N[0]) * (p.K / g.elems[i]) * g.bytes[i];
    return bytes >= t.lean_min_bytes;
}

template <bool Q8>
Kernel kernel_for(uint32_t n_tokens) {
    return n_tokens == 1 ? gemv_multi_kernel<Q8, 1> : gemv_multi_kernel<Q8, kMaxTokens>;
}

// The lane layouts' alignment needs (else the general path for that matrix).
bool lane_layout_fits(uint32_t dtype, uint32_t K, const void* W) {
    const uintptr_t w = reinterpret_cast<uintptr_t>(W);
    switch (dtype) {
        case GGML_Q4_0: case GGML_Q8_0: case GGML_Q4_1: case GGML_Q5_0: case GGML_Q5_1: return K % 32 == 0 && w % 2 == 0;
        case GGML_Q4_K: case AKUNU_Q4_0_X8: case AKUNU_Q8_0_X8: return K % 256 == 0 && w % 16 == 0;
        case GGML_Q6_K: return K % 256 == 0 && w % 2 == 0;
        case AKUNU_Q6_K_X8: return K % 2048 == 0 && w % 16 == 0;
        case GGML_F16: case GGML_BF16: return K % 8 == 0 && w % 16 == 0;
        case GGML_F32: return K % 4 == 0 && w % 16 == 0;
        default: return true;  // the general path has no alignment needs
    }
}

// Warps a row of the float residual writer: as the lean float kernel would
// split it (float_lean_split), so the writer's grid fills the GPU as that
// kernel's does; 1 for integer rows (rounding to 8 bits needs a warp a row).
// At most kRoundWarps / kMinSumsqRows (the room act_f32_layout leaves for
// the sums of squares).
int residual_writer_split(const MultiGemvParams& p) {
    constexpr int kMost = kRoundWarps / kMinSumsqRows;
    return gemv_q8::has_q8_layout(p.dtype[0]) ? 1 : std::min(kMost, float_lean_split(p, 1));
}

// Whether the float residual writer beats the lean float kernel plus a
// normalize kernel before the reader: where its grid (32 / split rows a
// block) holds 64 blocks or more. Split as the lean kernel splits, every
// benchmark shape's O / down projection gets 128.
bool float_block_writer_pays(const MultiGemvParams& p) {
    return p.N[0] / (kRoundWarps / residual_writer_split(p)) >= 64;
}

// Whether this launch, a Q8Link gate or residual writer, prepares its
// outputs inside 32-row blocks (gemv_gate_round_kernel,
// gemv_residual_round_kernel): one token, whole blocks, one integer format
// whose x is rounded to 8 bits ahead of it, or float rows (the residual
// writer, where float_block_writer_pays); gate + up only where lean_fits
// leaves it to gemv_multi_kernel (elsewhere the paired lean kernel and a
// rounding kernel after it are faster).
bool block_writer_fits(const CudaArgs& a, const MultiGemvParams& p) {
    if (p.n_tokens != 1 || p.N[0] % kQ8Block != 0 || p.K % kQ8Block != 0) return false;
    if ((reinterpret_cast<uintptr_t>(a.buf[0]) & 15) != 0) return false;
    if (p.mode == kGemvAccumulate && !gemv_q8::has_q8_layout(p.dtype[0]))  // float rows against float x
        return lane_layout_fits(p.dtype[0], p.K, a.buf[2]) &&
               typed_round_kernel<ResidualRound, ResidualRoundKernel, true>(p.dtype[0]) && float_block_writer_pays(p);
    ActQ8 own;  // where its own rounding of x goes, when no writer ahead did it
    if (!a.q8_in.q && !act_q8_layout(a, 1, p.K, 0, &own)) return false;
    Geometry g{};
    for (uint32_t i = 0; i < matrices_used(p); i++) {
        if (!gemv_q8::has_q8_layout(p.dtype[i]) || !lane_layout_fits(p.dtype[i], p.K, a.buf[2 + i])) return false;
        const DTypeDescriptor* dt = dtype_lookup(p.dtype[i]);
        g.elems[i] = (int)dt->block_elems;
        g.bytes[i] = (int)dt->block_bytes;
    }
    if (is_gated(p))
        return p.dtype[1] == p.dtype[0] && typed_round_kernel<GateRound, GateRoundKernel>(p.dtype[0]) &&
               !lean_fits(*a.tuning, p, g);
    return p.mode == kGemvAccumulate && typed_round_kernel<ResidualRound, ResidualRoundKernel>(p.dtype[0]);
}

// Q8Link reader: x (behind the input norm, if any) rounded to 8 bits by a
// kernel of its own before integer GEMVs, or normalized by one before float
// GEMVs; a writer ahead may do it instead.
bool gemv_multi_q8_input(const CudaArgs& a, Q8Link* link) {
    const MultiGemvParams p = a.p<MultiGemvParams>();
    if (p.n_mats < 1 || p.n_mats > 3 || p.mode > kGemvAccumulate || p.n_tokens == 0 ||
        p.n_tokens > (uint32_t)kMaxTokens || p.K % kQ8Block != 0)
        return false;
    if ((reinterpret_cast<uintptr_t>(a.buf[0]) & 15) != 0) return false;
    bool q8 = true;
    for (uint32_t i = 0; i < matrices_used(p); i++)
        q8 = q8 && gemv_q8::has_q8_layout(p.dtype[i]) && lane_layout_fits(p.dtype[i], p.K, a.buf[2 + i]);
    // float GEMVs read x itself, or behind the norm a kernel of its own computes (which a writer may do instead)
    if (!q8 && !p.norm) return false;
    *link = Q8Link{a.b<float>(0), p.K, p.n_tokens};
    if (p.norm) link->norm = ActQ8Norm{a.b<float>(1), p.eps, p.weight_offset};
    link->f32 = !q8;
    link->scales = p.n_tokens == 1;  // (every one-token kernel applies act_scale)
    return true;
}

// Q8Link writer: gate + up + activation, or a projection + residual, prepares
// its outputs for the next command (the down projection, the next normed
// projection) where a block writer takes it.
bool gemv_multi_q8_output(const CudaArgs& a, Q8Link* link) {
    const MultiGemvParams p = a.p<MultiGemvParams>();
    if (!block_writer_fits(a, p)) return false;
    *link = Q8Link{a.b<float>(5), p.N[0], p.n_tokens};
    link->kind = is_gated(p) ? kQ8LinkGate : kQ8LinkResidual;
    link->norms = link->defers_norm = !is_gated(p);
    if (!is_gated(p)) link->sumsq_rows = kRoundWarps / residual_writer_split(p);
    return true;
}

void launch_gemv_multi(const CudaArgs& a) {
    const MultiGemvParams p = a.p<MultiGemvParams>();
    const CudaTuning& t = *a.tuning;
    if (p.n_mats < 1 || p.n_mats > 3 || p.mode > kGemvAccumulate || (p.mode != kGemvSeparate && p.n_mats < 2 &&
                                                                      p.mode != kGemvAccumulate))
        throw Error("gemv_multi: bad matrix count or mode");
    if (p.n_tokens == 0 || p.n_tokens > (uint32_t)kMaxTokens)
        throw Error("gemv_multi: " + std::to_string(p.n_tokens) + " tokens (at most 8)");
    const uint32_t used = matrices_used(p);
    Geometry g{};
    for (uint32_t i = 0; i < used; i++) {
        const DTypeDescriptor* dt = dtype_lookup(p.dtype[i]);
        if (!dt || !dt->supported || is_mlx_dtype(p.dtype[i]) || p.K % dt->block_elems)
            throw Error(std::string("gemv_multi: weight type ") + dtype_name(p.dtype[i]) + " is not supported here");
        if (!lane_layout_fits(p.dtype[i], p.K, a.buf[2 + i]))
            throw Error("gemv_multi: weights not aligned for their format");
        g.elems[i] = (int)dt->block_elems;
        g.bytes[i] = (int)dt->block_bytes;
    }
    if ((reinterpret_cast<uintptr_t>(a.buf[0]) & 15) != 0 || p.K % 4 != 0)
        throw Error("gemv_multi: x must be 16-byte aligned with K a multiple of 4");
    bool q8 = true;
    for (uint32_t i = 0; i < used; i++) q8 = q8 && gemv_q8::has_q8_layout(p.dtype[i]);
    ActQ8 xq;
    ActQ8Norm norm;
    if (p.norm) norm = ActQ8Norm{a.b<float>(1), p.eps, p.weight_offset};
    if (q8 && a.q8_in.q)
        xq = a.q8_in;  // rounded (and normalized) by the command before: a Q8Link
    else
        q8 = q8 && quantize_activations(a, a.b<float>(0), p.K, p.n_tokens, p.K, norm, &xq);
    const float* x = a.b<float>(0);
    MultiGemvParams kp = p;
    if (p.norm && !q8 && a.f32_in) {
        x = a.f32_in;  // normalized by the command before: a Q8Link
        kp.norm = 0;
        xq.sumsq = const_cast<float*>(a.f32_in_sumsq);  // (or ahead of the norm's scale)
        xq.eps = a.f32_in_eps;
        xq.sumsq_rows = a.f32_in_sumsq_rows;
    } else if (p.norm && !q8) {
        float* xn = nullptr;
        if (normalize_activations(a, x, p.n_tokens, p.K, norm, &xn)) {
            x = xn;
            kp.norm = 0;
        }
    }
    // (kp.norm still set: the scratch could not hold x, every block normalizes it into shared memory)
    const size_t shared = kp.norm && !q8 ? (size_t)p.n_tokens * p.K * sizeof(float) : 0;
    if (shared > kMaxShared) throw Error("gemv_multi: K " + std::to_string(p.K) + " too large to normalize in shared memory");
    const uint32_t prefetch = q8 ? t.prefetch_bytes : t.float_prefetch_bytes;
    if (a.q8_out.q || a.f32_out) {  // a Q8Link writer (gemv_multi_q8_output: block_writer_fits)
        const unsigned round_blocks = p.N[0] / kRoundWarps;
        if (is_gated(p)) {
            launch_pdl(typed_round_kernel<GateRound, GateRoundKernel>(p.dtype[0]), round_blocks, kRoundWarps * 32, 0,
                       a, kp, g, xq, prefetch, a.b<uint8_t>(2), a.b<uint8_t>(3), a.b<float>(5), a.q8_out);
        } else {
            ActQ8 out = a.q8_out;
            if (a.f32_out) out.sumsq = a.f32_out_sumsq;
            const int split = residual_writer_split(p);
            launch_pdl(typed_round_kernel<ResidualRound, ResidualRoundKernel, true>(p.dtype[0]),
                       round_blocks * split, kRoundWarps * 32, 0, a, kp, g, LeanX{xq, x}, prefetch, split,
                       a.b<uint8_t>(2), a.b<float>(5), out, a.f32_out, a.q8_out_norm);
        }
        return;
    }
    // a paired lean kernel: a warp an output row, both its matrices' rows
    auto launch_paired = [&](LeanKernel paired) {
        launch_pdl(paired, (p.N[0] + kWarps - 1) / kWarps, kWarps * 32, 0, a, kp, g, LeanX{xq, x}, prefetch, 1,
                   a.b<uint8_t>(2), a.b<uint8_t>(3), a.b<uint8_t>(4), a.b<float>(5), a.b<float>(6), a.b<float>(7));
    };
    LeanKernel lean = nullptr;
    if (q8 && p.n_tokens == 1 && lean_fits(t, p, g)) {
        if (LeanKernel paired = paired_lean_kernel(p)) {
            launch_paired(paired);
            return;
        }
        lean = lean_kernel(p, used);
    } else if (!q8) {
        if (LeanKernel paired = paired_float_lean_kernel(kp, used)) {
            launch_paired(paired);
            return;
        }
        lean = float_lean_kernel(kp, used);
    }
    if (lean) {
        const int split = lean_split(p);
        const int rows_per_block = kWarps / (split * (is_gated(p) ? 2 : 1));
        const unsigned lean_blocks = (total_rows(p) + rows_per_block - 1) / rows_per_block;
        launch_pdl(lean, lean_blocks, kWarps * 32, 0, a, kp, g, LeanX{xq, x}, prefetch, split, a.b<uint8_t>(2),
                   a.b<uint8_t>(3), a.b<uint8_t>(4), a.b<float>(5), a.b<float>(6), a.b<float>(7));
        return;
    }
    const Kernel k = q8 ? kernel_for<true>(p.n_tokens) : kernel_for<false>(p.n_tokens);
    if (shared > 0) allow_dynamic_shared(reinterpret_cast<const void*>(k), (int)kMaxShared);  // the input norm's
    const unsigned blocks = (total_rows(p) + kWarps - 1) / kWarps;
    launch_pdl(k, blocks, kWarps * 32, shared, a, kp, g, x, a.b<float>(1), xq, prefetch, a.b<uint8_t>(2),
               a.b<uint8_t>(3), a.b<uint8_t>(4), a.b<float>(5), a.b<float>(6), a.b<float>(7));
}

// qk_norm_rope_kv: per head, RMSNorm (QK norm), RoPE, and the K / V rows
// into the cache; one block per (token, head) over the q, k and v heads. An
// F16 cache takes each value as it is rotated; other types (kv_cache.cuh)
// take the head's rotated row, a 32-value block a warp, once the block has it.
// The arithmetic is the rmsnorm, rope and kv_write kernels', in
// head_prologue.cuh, which the decode attention shares: in a decode step the
// attention after it usually does this work itself (attention_absorbs,
// attention_decode.cuh) and this kernel is not launched.
constexpr int kPrologueThreads = 128;

__global__ void __launch_bounds__(kPrologueThreads)
    qk_rope_kv_kernel(QKRopeKVParams p, float* q, float* k, const float* v, const float* q_norm,
                      const float* k_norm, const float* factors, uint8_t* kc, uint8_t* vc,
                      const uint32_t* replay_pos) {
    const uint32_t t = blockIdx.x, head = blockIdx.y, hd = p.head_dim;
    const uint32_t qd = p.n_heads * hd, kvd = p.n_kv_heads * hd;
    const uint32_t pos = replay_position(replay_pos, p.pos0) + t;
    // (position and weights only: before the wait; a V head's blocks take none)
    const bool is_q = head < p.n_heads;
    HeadPairs pairs = head_pairs_at(p, pos, factors, is_q ? q_norm : k_norm, nullptr);
    const uint32_t cache_row = kv_ring_row(pos, p.max_ctx);  // the position's row (a ring's on sliding-window layers)
    pdl_wait();
    pdl_launch_dependents();
    if (head >= p.n_heads + p.n_kv_heads) {  // a V head: straight to the cache
        const uint32_t j = head - p.n_heads - p.n_kv_heads;
        kv_cache::store_span_block(p.v_type, kv_cache::row_at(vc, p.v_type, kvd, cache_row), kvd, j * hd, hd,
                                   v + (size_t)t * kvd + j * hd);
        return;
    }
    const uint32_t j = is_q ? head : head - p.n_heads;
    float* row = is_q ? q + (size_t)t * qd + j * hd : k + (size_t)t * kvd + j * hd;
    rope_head_store_k(p, pairs, row, is_q, p.k_type, kv_cache::row_at(kc, p.k_type, kvd, cache_row), kvd, j);
}

void launch_qk_rope_kv(const CudaArgs& a) {
    const QKRopeKVParams p = a.p<QKRopeKVParams>();
    if (p.head_dim > 256 || p.head_dim % 2) throw Error("qk_norm_rope_kv: head_dim " + std::to_string(p.head_dim));
    if (p.k_type >= kKvTypeCount || p.v_type >= kKvTypeCount) throw Error("qk_norm_rope_kv: unknown KV cache type");
    if ((kv_type_is_block(p.k_type) || kv_type_is_block(p.v_type)) && p.head_dim % kKvBlock)
        throw Error("qk_norm_rope_kv: a Q8_0 / Q4_0 cache needs heads of whole 32-value blocks");
    kv_cache::check_ring_write("qk_norm_rope_kv", p.max_ctx, p.n_tokens);
    const dim3 grid(p.n_tokens, p.n_heads + 2 * p.n_kv_heads);
    launch_pdl(qk_rope_kv_kernel, grid, kPrologueThreads, 0, a,
        p, a.b<float>(0), a.b<float>(1), a.b<float>(2), a.b<float>(3), a.b<float>(4),
        p.has_freq_factors ? a.b<float>(5) : nullptr, a.b<uint8_t>(6), a.b<uint8_t>(7), a.replay_pos);
}

// Gemma 3's post-norms fused with the residual add (the CPU twin: fused.cpp):
// h += rmsnorm(y) * (w + offset), one block per token; one launch and one
// dependent step fewer than rmsnorm then add_inplace.
__global__ void rmsnorm_residual_kernel(NormParams p, const float* y, const float* w, float* h) {
    pdl_wait();
    pdl_launch_dependents();
    const float* yr = y + (size_t)blockIdx.x * p.x_stride;
    float* hr = h + (size_t)blockIdx.x * p.y_stride;
    const float scale = rms_scale(yr, p.dim, p.eps);
    for (uint32_t i = threadIdx.x; i < p.dim; i += blockDim.x) hr[i] += yr[i] * scale * (w[i] + p.weight_offset);
}

void launch_rmsnorm_residual(const CudaArgs& a) {
    NormParams p = a.p<NormParams>();
    if (p.rows_per_token != 1 || p.row0 != 0) throw Error("rmsnorm_residual: one row a token, from row 0");
    launch_pdl(rmsnorm_residual_kernel, p.n_tokens, 256, 0, a, p, a.b<float>(0), a.b<float>(1), a.b<float>(2));
}

}  // namespace

extern const CudaKernelEntry kCudaFusedKernels[] = {
    {"gemv_multi", launch_gemv_multi, false, gemv_multi_q8_output, gemv_multi_q8_input},
    {"qk_norm_rope_kv", launch_qk_rope_kv, true},
    {"rmsnorm_residual", launch_rmsnorm_residual},
    {nullptr, nullptr},
};

}  // namespace akunu
