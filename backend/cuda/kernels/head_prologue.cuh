// The per-head work of qk_norm_rope_kv (QKRopeKVParams) on head rows held in
// shared memory, as device code that the prologue kernel (qk_rope_kv.cu) and
// the decode attention that absorbs it (attention_decode.cu) share, so both
// write the same bits.
#pragma once
#include "core/kernel_params.h"
#include "device_math.cuh"

namespace akunu {

// Normalizes (QK norm, weights wa / wb, when p.has_qk_norm) and rotates (RoPE
// at pos) the head rows ra and, unless nullptr, rb (shared memory, p.head_dim
// floats each) in place: the rmsnorm and rope kernels' arithmetic. Every
// thread of the block calls it; warp 0 sums ra's squares, warp 1 rb's, in
// double, in an order that does not depend on the block size.
__device__ inline void norm_rope_heads(const QKRopeKVParams& p, uint32_t pos, const float* factors, float* ra,
                                       const float* wa, float* rb, const float* wb) {
    const uint32_t hd = p.head_dim;
    if (p.has_qk_norm) {
        __shared__ float scale[2];
        const uint32_t warp = threadIdx.x / 32;
        if (warp == 0 || (warp == 1 && rb)) {
            const float* r = warp == 0 ? ra : rb;
            double ss = 0;
            for (uint32_t d = threadIdx.x % 32; d < hd; d += 32) ss += (double)r[d] * r[d];
            for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
            if (threadIdx.x % 32 == 0) scale[warp] = 1.0f / sqrtf((float)(ss / hd) + p.eps);
        }
        __syncthreads();
        for (uint32_t d = threadIdx.x; d < hd; d += blockDim.x) {
            ra[d] = ra[d] * scale[0] * (wa[d] + p.weight_offset);
            if (rb) rb[d] = rb[d] * scale[1] * (wb[d] + p.weight_offset);
        }
        __syncthreads();
    }
    for (uint32_t j = threadIdx.x; j < hd / 2; j += blockDim.x) {
        uint32_t i0, i1;
        float o0, o1;
        rope_pair(j, hd, p.neox != 0, (float)pos, p.freq_scale, p.freq_base, factors, ra, ra, i0, i1, o0, o1);
        if (rb) rope_pair(j, hd, p.neox != 0, (float)pos, p.freq_scale, p.freq_base, factors, rb, rb, i0, i1, o0, o1);
    }
    __syncthreads();
}

}  // namespace akunu
