// The fused kernels of batch passes (continuous batching) on CUDA; their
// meaning is the CPU twins' (backend/cpu/kernels/fused_batch.cpp):
// - qk_norm_rope_kv_paged: QK norm, RoPE at each row's own position and the
//   K / V rows into the paged pool, one launch for what rmsnorm (x2),
//   rope_rows (x2) and kv_write_paged do in five;
// - add_rmsnorm: the residual add and the next RMSNorm in one launch.
// Each row's arithmetic is its own (one block per row and head, or per row):
// nothing depends on the other rows of the pass.
#include <string>

#include "core/error.h"
#include "core/half.h"
#include "core/kernel_params.h"
#include "cuda_kernel.h"
#include "paged_pool.cuh"
#include "device_math.cuh"
#include "head_prologue.cuh"
#include "kv_cache.cuh"

namespace akunu {
namespace {

constexpr int kPrologueThreads = 128;

// One block per (row, head) over the q, k and v heads, as qk_norm_rope_kv
// (fused.cu), with the row's position and pool row from its (sequence,
// position) pair.
__global__ void __launch_bounds__(kPrologueThreads)
    qk_rope_kv_paged_kernel(PagedQKRopeKVParams pp, float* q, float* k, const float* v, const float* q_norm,
                            const float* k_norm, const float* factors, uint8_t* kc, uint8_t* vc,
                            const int32_t* rows, const int32_t* tables) {
    QKRopeKVParams p{pp.n_heads, pp.n_kv_heads, pp.head_dim, pp.n_tokens, 0, pp.has_qk_norm, pp.eps,
                     pp.weight_offset, pp.neox, pp.has_freq_factors, pp.freq_base, pp.freq_scale, 0, pp.attn_factor};
    const uint32_t t = blockIdx.x, head = blockIdx.y, hd = p.head_dim;
    const uint32_t qd = p.n_heads * hd, kvd = p.n_kv_heads * hd;
    pdl_wait();
    pdl_launch_dependents();
    const uint32_t seq = (uint32_t)rows[2 * (size_t)t], pos = (uint32_t)rows[2 * (size_t)t + 1];
    const size_t pool_at = pool_row(tables + (size_t)seq * pp.max_blocks, pp.block_size, pos);
    const bool is_q = head < p.n_heads;
    if (head >= p.n_heads + p.n_kv_heads) {  // a V head: straight to the pool
        const uint32_t j = head - p.n_heads - p.n_kv_heads;
        kv_cache::store_span_block(pp.v_type, kv_cache::row_at(vc, pp.v_type, kvd, pool_at), kvd, j * hd, hd,
                                   v + (size_t)t * kvd + j * hd);
        return;
    }
    HeadPairs pairs = head_pairs_at(p, pos, factors, is_q ? q_norm : k_norm, nullptr);
    const uint32_t j = is_q ? head : head - p.n_heads;
    float* row = is_q ? q + (size_t)t * qd + j * hd : k + (size_t)t * kvd + j * hd;
    rope_head_store_k(p, pairs, row, is_q, pp.k_type, kv_cache::row_at(kc, pp.k_type, kvd, pool_at), kvd, j);
}

void launch_qk_rope_kv_paged(const CudaArgs& a) {
    const PagedQKRopeKVParams p = a.p<PagedQKRopeKVParams>();
    if (p.head_dim > 256 || p.head_dim % 2)
        throw Error("qk_norm_rope_kv_paged: head_dim " + std::to_string(p.head_dim) + " (even, up to 256)");
    if (p.block_size == 0) throw Error("qk_norm_rope_kv_paged: block_size 0");
    if (p.k_type >= kKvTypeCount || p.v_type >= kKvTypeCount) throw Error("qk_norm_rope_kv_paged: unknown KV cache type");
    if ((kv_type_is_block(p.k_type) || kv_type_is_block(p.v_type)) && p.head_dim % kKvBlock)
        throw Error("qk_norm_rope_kv_paged: a Q8_0 / Q4_0 cache needs heads of whole 32-value blocks");
    if (p.n_tokens == 0) return;
    if (p.n_tokens > 2147483647u) throw Error("qk_norm_rope_kv_paged: too many rows");
    const dim3 grid(p.n_tokens, p.n_heads + 2 * p.n_kv_heads);
    launch_pdl(qk_rope_kv_paged_kernel, grid, kPrologueThreads, 0, a, p, a.b<float>(0), a.b<float>(1),
               a.b<float>(2), a.b<float>(3), a.b<float>(4), p.has_freq_factors ? a.b<float>(5) : nullptr,
               a.b<uint8_t>(6), a.b<uint8_t>(7), a.b<int32_t>(8), a.b<int32_t>(9));
}

// h += y, then xn = rmsnorm(h) * (w + offset): one block a row; the sum of
// squares as the rmsnorm kernel takes it (rms_scale).
__global__ void add_rmsnorm_kernel(NormParams p, float* h, const float* y, const float* w, float* xn) {
    pdl_wait();
    pdl_launch_dependents();
    float* hr = h + (size_t)blockIdx.x * p.x_stride;
    const float* yr = y + (size_t)blockIdx.x * p.x_stride;
    for (uint32_t i = threadIdx.x; i < p.dim; i += blockDim.x) hr[i] += yr[i];
    __syncthreads();  // the block's sums visible to every thread of it
    const float scale = rms_scale(hr, p.dim, p.eps);
    float* out = xn + (size_t)blockIdx.x * p.y_stride;
    for (uint32_t i = threadIdx.x; i < p.dim; i += blockDim.x) out[i] = hr[i] * scale * (w[i] + p.weight_offset);
}

void launch_add_rmsnorm(const CudaArgs& a) {
    const NormParams p = a.p<NormParams>();
    if (p.rows_per_token != 1 || p.row0 != 0) throw Error("add_rmsnorm: one row a token, from row 0");
    if (p.n_tokens == 0) return;
    launch_pdl(add_rmsnorm_kernel, p.n_tokens, 256, 0, a, p, a.b<float>(0), a.b<float>(1), a.b<float>(2),
               a.b<float>(3));
}

}  // namespace

extern const CudaKernelEntry kCudaFusedBatchKernels[] = {
    {"qk_norm_rope_kv_paged", launch_qk_rope_kv_paged},
    {"add_rmsnorm", launch_add_rmsnorm},
    {nullptr, nullptr},
};

}  // namespace akunu
