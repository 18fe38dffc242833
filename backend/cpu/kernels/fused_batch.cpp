// The fused kernels of batch passes (continuous batching) that GPU backends
// run (matmul_multi, qk_norm_rope_kv_paged, add_rmsnorm), defined here as the unfused
// sequences they replace: their meaning is exactly that of the kernels
// composed. The CPU's own batch tables do not use them; they exist as the
// reference of the per-op tests.
#include <string>

#include "core/dtype_descriptor.h"
#include "core/kernel_params.h"
#include "cpu_kernel.h"

namespace akunu {
namespace {

void qk_norm_rope_kv_paged(const CpuArgs& a) {
    const PagedQKRopeKVParams p = a.p<PagedQKRopeKVParams>();
    const uint32_t qd = p.n_heads * p.head_dim, kvd = p.n_kv_heads * p.head_dim;
    if (p.n_tokens == 0) return;
    if (p.has_qk_norm) {
        NormParams nq{p.head_dim, p.n_tokens, p.n_heads, qd, p.eps, p.weight_offset, 0, qd};
        run_cpu_kernel("rmsnorm", {a.buf[0], a.buf[3], a.buf[0]}, nq, a.pool);
        NormParams nk{p.head_dim, p.n_tokens, p.n_kv_heads, kvd, p.eps, p.weight_offset, 0, kvd};
        run_cpu_kernel("rmsnorm", {a.buf[1], a.buf[4], a.buf[1]}, nk, a.pool);
    }
    void* factors = p.has_freq_factors ? a.buf[5] : a.buf[0];
    RopeParams rq{p.n_heads, p.head_dim, p.n_tokens, 0, qd, p.neox, p.has_freq_factors, p.freq_base, p.freq_scale,
                  p.attn_factor};
    run_cpu_kernel("rope_rows", {a.buf[0], factors, a.buf[8]}, rq, a.pool);
    RopeParams rk{p.n_kv_heads, p.head_dim, p.n_tokens, 0, kvd, p.neox, p.has_freq_factors, p.freq_base,
                  p.freq_scale, p.attn_factor};
    run_cpu_kernel("rope_rows", {a.buf[1], factors, a.buf[8]}, rk, a.pool);
    PagedKVWriteParams kv{kvd, p.n_tokens, kvd, kvd, p.block_size, p.max_blocks, p.k_type, p.v_type};
    run_cpu_kernel("kv_write_paged", {a.buf[1], a.buf[2], a.buf[6], a.buf[7], a.buf[8], a.buf[9]}, kv, a.pool);
}

void add_rmsnorm(const CpuArgs& a) {
    const NormParams p = a.p<NormParams>();
    if (p.rows_per_token != 1 || p.row0 != 0) throw Error("add_rmsnorm: one row a token, from row 0");
    float* h = a.b<float>(0);
    const float* y = a.b<float>(1);
    for (uint32_t t = 0; t < p.n_tokens; t++) {
        AddParams ap{p.dim, 1};
        run_cpu_kernel("add_inplace", {h + (size_t)t * p.x_stride, const_cast<float*>(y) + (size_t)t * p.x_stride},
                       ap, a.pool);
    }
    NormParams np = p;
    run_cpu_kernel("rmsnorm", {a.buf[0], a.buf[2], a.buf[3]}, np, a.pool);
}

void matmul_multi(const CpuArgs& a) {
    const MultiMatmulParams m = a.p<MultiMatmulParams>();
    if (m.n_mats == 0 || m.n_mats > 3)
        throw Error("matmul_multi: 1 to 3 matrices, got " + std::to_string(m.n_mats));
    const DTypeDescriptor* dt = dtype_lookup(m.dtype);
    if (!dt || !dt->supported) throw Error(std::string("matmul_multi: unsupported weight type ") + dtype_name(m.dtype));
    for (uint32_t i = 0; i < m.n_mats; i++) {
        MatmulParams p{m.N[i], m.K, m.n_tokens, m.dtype, m.x_stride, m.y_stride[i], m.has_bias, 0, 1,
                       m.generated_rows};
        run_cpu_kernel(dt->gemm_kernel, {a.buf[1 + i], a.buf[0], a.buf[4 + i], a.buf[7 + i]}, p, a.pool);
    }
}

}  // namespace

extern const CpuKernelEntry kFusedBatchKernels[] = {
    {"matmul_multi", matmul_multi},
    {"qk_norm_rope_kv_paged", qk_norm_rope_kv_paged},
    {"add_rmsnorm", add_rmsnorm},
    {nullptr, nullptr},
};

}  // namespace akunu
