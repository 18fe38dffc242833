// The per-head work of qk_norm_rope_kv (QKRopeKVParams) on head rows held in
// shared memory, as device code that the prologue kernel (fused.cu) and the
// decode attention that absorbs it (attention_decode.cuh) share, so both
// write the same bits.
#pragma once
#include "core/kernel_params.h"
#include "device_math.cuh"
#include "kv_cache.cuh"

namespace akunu {

// Thread j < head_dim / 2 of a block holds RoPE pair j of one or two head
// rows (HeadPairs: a, and b where two_rows), as registers. The pair's angle
// (cos and sin scaled by p.attn_factor) and its QK-norm weights (wa for row
// a, wb for row b, when p.has_qk_norm) depend on the position and weights
// only: taken before the wait, the weights' load latency is off the path
// after it.
struct HeadPairs {
    RopePair at;
    bool active;           // threadIdx.x < head_dim / 2
    float a0, a1, b0, b1;  // the rows' pair elements
    float wa0, wa1, wb0, wb1;  // the pair's norm weights, offset added
};

__device__ inline HeadPairs head_pairs_at(const QKRopeKVParams& p, uint32_t pos, const float* factors,
                                          const float* wa, const float* wb) {
    HeadPairs h{};
    h.active = threadIdx.x < p.head_dim / 2;
    if (h.active) {
        h.at = rope_pair_at(threadIdx.x, p.head_dim, p.neox != 0, (float)pos, p.freq_scale, p.freq_base, factors);
        h.at.c *= p.attn_factor;  // YaRN's magnitude (1 otherwise), as the rope kernel
        h.at.s *= p.attn_factor;
        if (p.has_qk_norm) {
            h.wa0 = wa[h.at.i0] + p.weight_offset;
            h.wa1 = wa[h.at.i1] + p.weight_offset;
            if (wb) {
                h.wb0 = wb[h.at.i0] + p.weight_offset;
                h.wb1 = wb[h.at.i1] + p.weight_offset;
            }
        }
    }
    return h;
}

// Normalizes (QK norm, the weights head_pairs_at took, when p.has_qk_norm)
// and rotates the held pairs: the rmsnorm and rope kernels' arithmetic.
// Every thread of the block calls it; with the norm, the pairs go to the
// shared rows sa / sb (head_dim floats) and warp 0 sums a's squares, warp 1
// b's, in double, in an order that does not depend on the block size.
__device__ inline void norm_rope_pairs(const QKRopeKVParams& p, HeadPairs& h, bool two_rows, float* sa, float* sb) {
    if (p.has_qk_norm) {
        __shared__ float scale[2];
        const uint32_t hd = p.head_dim, warp = threadIdx.x / 32;
        if (h.active) {
            sa[h.at.i0] = h.a0;
            sa[h.at.i1] = h.a1;
            if (two_rows) {
                sb[h.at.i0] = h.b0;
                sb[h.at.i1] = h.b1;
            }
        }
        __syncthreads();
        if (warp == 0 || (warp == 1 && two_rows)) {
            const float* r = warp == 0 ? sa : sb;
            double ss = 0;
            for (uint32_t d = threadIdx.x % 32; d < hd; d += 32) ss += (double)r[d] * r[d];
            for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
            if (threadIdx.x % 32 == 0) scale[warp] = 1.0f / sqrtf((float)(ss / hd) + p.eps);
        }
        __syncthreads();
        if (h.active) {
            h.a0 = h.a0 * scale[0] * h.wa0;
            h.a1 = h.a1 * scale[0] * h.wa1;
            if (two_rows) {
                h.b0 = h.b0 * scale[1] * h.wb0;
                h.b1 = h.b1 * scale[1] * h.wb1;
            }
        }
    }
    if (h.active) {
        rope_rotate(h.at, h.a0, h.a1);
        if (two_rows) rope_rotate(h.at, h.b0, h.b1);
    }
}

// The rest of a qk_norm_rope_kv block for a Q or K head (fused.cu, and its
// paged twin in fused_batch.cu) once head_pairs_at has run: the held pair
// read from the head's row, normalized and rotated, written back, and for a
// K head the row stored into the cache row `cache` (type t, kvd values a
// row; head j; the caller's: the position's ring row, or its paged pool
// row): F16 straight from the pair, the other types from the whole head row
// once the block has written it. Every thread of the block calls it.
__device__ inline void rope_head_store_k(const QKRopeKVParams& p, HeadPairs& pairs, float* row, bool is_q,
                                         uint32_t t, uint8_t* cache, uint32_t kvd, uint32_t j) {
    if (pairs.active) {
        pairs.a0 = row[pairs.at.i0];
        pairs.a1 = row[pairs.at.i1];
    }
    __shared__ float r[256];
    norm_rope_pairs(p, pairs, false, r, nullptr);
    if (pairs.active) {
        row[pairs.at.i0] = pairs.a0;
        row[pairs.at.i1] = pairs.a1;
    }
    if (is_q) return;  // (block-uniform: a block is one head)
    const uint32_t hd = p.head_dim;
    if (t == kKvF16) {
        uint16_t* kr = reinterpret_cast<uint16_t*>(cache) + j * hd;
        if (pairs.active) {
            kr[pairs.at.i0] = f32_to_f16(pairs.a0);
            kr[pairs.at.i1] = f32_to_f16(pairs.a1);
        }
        return;
    }
    __syncthreads();  // the head's rotated row is written (global memory, this block)
    kv_cache::store_span_block(t, cache, kvd, j * hd, hd, row);
}

}  // namespace akunu
