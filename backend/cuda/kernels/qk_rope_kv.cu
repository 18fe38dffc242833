// The decode attention prologue in one launch (qk_norm_rope_kv, see
// QKRopeKVParams): per head, RMSNorm (QK norm), RoPE, and the K/V rows into
// the F16 cache. One block per (token, head) over the q, k and v heads; the
// arithmetic is the rmsnorm, rope and kv_write kernels' (elementwise.cu), in
// head_prologue.cuh. In a decode step the attention after it usually does
// this work itself (attention_decode.cu) and this kernel is not launched.
#include "core/error.h"
#include "core/half.h"
#include "core/kernel_params.h"
#include "cuda_kernel.h"
#include "head_prologue.cuh"

namespace akunu {
namespace {

constexpr int kThreads = 128;

__global__ void __launch_bounds__(kThreads)
    qk_rope_kv_kernel(QKRopeKVParams p, float* q, float* k, const float* v, const float* q_norm,
                      const float* k_norm, const float* factors, uint16_t* kc, uint16_t* vc,
                      const uint32_t* replay_pos) {
    const uint32_t t = blockIdx.x, head = blockIdx.y, hd = p.head_dim;
    const uint32_t qd = p.n_heads * hd, kvd = p.n_kv_heads * hd;
    const uint32_t pos = replay_position(replay_pos, p.pos0) + t;
    // (position and weights only: before the wait; a V head's blocks take none)
    const bool is_q = head < p.n_heads;
    HeadPairs pairs = head_pairs_at(p, pos, factors, is_q ? q_norm : k_norm, nullptr);
    pdl_wait();
    pdl_launch_dependents();
    if (head >= p.n_heads + p.n_kv_heads) {  // a V head: straight to the cache
        const uint32_t j = head - p.n_heads - p.n_kv_heads;
        for (uint32_t d = threadIdx.x; d < hd; d += blockDim.x)
            vc[(size_t)pos * kvd + j * hd + d] = f32_to_f16(v[(size_t)t * kvd + j * hd + d]);
        return;
    }
    const uint32_t j = is_q ? head : head - p.n_heads;
    float* row = is_q ? q + (size_t)t * qd + j * hd : k + (size_t)t * kvd + j * hd;
    if (pairs.active) {
        pairs.a0 = row[pairs.at.i0];
        pairs.a1 = row[pairs.at.i1];
    }
    __shared__ float r[256];
    norm_rope_pairs(p, pairs, false, r, nullptr);
    if (!pairs.active) return;
    row[pairs.at.i0] = pairs.a0;
    row[pairs.at.i1] = pairs.a1;
    if (!is_q) {
        kc[(size_t)pos * kvd + j * hd + pairs.at.i0] = f32_to_f16(pairs.a0);
        kc[(size_t)pos * kvd + j * hd + pairs.at.i1] = f32_to_f16(pairs.a1);
    }
}

void launch_qk_rope_kv(const CudaArgs& a) {
    const QKRopeKVParams p = a.p<QKRopeKVParams>();
    if (p.head_dim > 256 || p.head_dim % 2) throw Error("qk_norm_rope_kv: head_dim " + std::to_string(p.head_dim));
    const dim3 grid(p.n_tokens, p.n_heads + 2 * p.n_kv_heads);
    launch_pdl(qk_rope_kv_kernel, grid, kThreads, 0, a.stream,
        p, a.b<float>(0), a.b<float>(1), a.b<float>(2), a.b<float>(3), a.b<float>(4),
        p.has_freq_factors ? a.b<float>(5) : nullptr, a.b<uint16_t>(6), a.b<uint16_t>(7), a.replay_pos);
}

}  // namespace

extern const CudaKernelEntry kCudaPrologueKernels[] = {
    {"qk_norm_rope_kv", launch_qk_rope_kv, true},
    {nullptr, nullptr},
};

}  // namespace akunu
