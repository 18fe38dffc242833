// The fused decode kernels that GPU backends run (gemv_multi, qk_norm_rope_kv,
// rmsnorm_residual),
// defined here as the unfused sequences they replace: their meaning is exactly
// that of the kernels composed. The CPU's own tables do not use them (the
// passes over memory they save are the GPU's launch latencies); they exist so
// the per-op tests have a reference.
#include <vector>

#include "core/dtype_descriptor.h"
#include "core/error.h"
#include "core/kernel_params.h"
#include "cpu_kernel.h"

namespace akunu {
namespace {

template <typename P>
void run(const char* name, std::initializer_list<void*> bufs, const P& p, ThreadPool* pool) {
    run_cpu_kernel(name, bufs, p, pool);
}

void gemv(uint32_t dtype, void* W, float* x, float* y, uint32_t N, uint32_t K, uint32_t n_tokens, ThreadPool* pool) {
    const DTypeDescriptor* dt = dtype_lookup(dtype);
    if (!dt || !dt->supported) throw Error(std::string("gemv_multi: unsupported weight type ") + dtype_name(dtype));
    MatmulParams mp{N, K, n_tokens, dtype, K, N, 0, 0, 0, 0};
    run(dt->gemv_kernel, {W, x, y}, mp, pool);
}

void gemv_multi(const CpuArgs& a) {
    MultiGemvParams p = a.p<MultiGemvParams>();
    if (p.n_mats < 1 || p.n_mats > 3 || p.mode > kGemvAccumulate)
        throw Error("gemv_multi: bad matrix count or mode");
    float* x = a.b<float>(0);
    std::vector<float> xn;
    if (p.norm) {
        xn.resize((size_t)p.n_tokens * p.K);
        NormParams np{p.K, p.n_tokens, 1, p.K, p.eps, p.weight_offset, 0, p.K};
        run("rmsnorm", {x, a.buf[1], xn.data()}, np, a.pool);
        x = xn.data();
    }
    if (p.mode == kGemvSeparate) {
        for (uint32_t i = 0; i < p.n_mats; i++)
            gemv(p.dtype[i], a.buf[2 + i], x, a.b<float>(5 + i), p.N[i], p.K, p.n_tokens, a.pool);
        return;
    }
    std::vector<float> t0((size_t)p.n_tokens * p.N[0]);
    gemv(p.dtype[0], a.buf[2], x, t0.data(), p.N[0], p.K, p.n_tokens, a.pool);
    if (p.mode == kGemvAccumulate) {
        AddParams ap{p.N[0], p.n_tokens};
        run("add_inplace", {a.buf[5], t0.data()}, ap, a.pool);
        return;
    }
    std::vector<float> t1((size_t)p.n_tokens * p.N[0]);
    gemv(p.dtype[1], a.buf[3], x, t1.data(), p.N[0], p.K, p.n_tokens, a.pool);
    GatedActParams gp{p.N[0], p.n_tokens, p.N[0], p.N[0], p.N[0]};
    run(p.mode == kGemvSiluGate ? "silu_gate" : "gelu_gate", {t0.data(), t1.data(), a.buf[5]}, gp, a.pool);
}

void qk_norm_rope_kv(const CpuArgs& a) {
    QKRopeKVParams p = a.p<QKRopeKVParams>();
    const uint32_t qd = p.n_heads * p.head_dim, kvd = p.n_kv_heads * p.head_dim;
    float* q = a.b<float>(0);
    float* k = a.b<float>(1);
    if (p.has_qk_norm) {
        NormParams nq{p.head_dim, p.n_tokens, p.n_heads, qd, p.eps, p.weight_offset, 0, qd};
        run("rmsnorm", {q, a.buf[3], q}, nq, a.pool);
        NormParams nk{p.head_dim, p.n_tokens, p.n_kv_heads, kvd, p.eps, p.weight_offset, 0, kvd};
        run("rmsnorm", {k, a.buf[4], k}, nk, a.pool);
    }
    RopeParams rq{p.n_heads, p.head_dim, p.n_tokens, p.pos0, qd, p.neox, p.has_freq_factors, p.freq_base,
                  p.freq_scale, p.attn_factor};
    run("rope", {q, a.buf[5]}, rq, a.pool);
    RopeParams rk{p.n_kv_heads, p.head_dim, p.n_tokens, p.pos0, kvd, p.neox, p.has_freq_factors, p.freq_base,
                  p.freq_scale, p.attn_factor};
    run("rope", {k, a.buf[5]}, rk, a.pool);
    KVWriteParams kv{kvd, p.n_tokens, p.pos0, kvd, kvd, p.max_ctx, p.k_type, p.v_type};
    run("kv_write", {k, a.buf[2], a.buf[6], a.buf[7]}, kv, a.pool);
}

// Gemma 3's post-norms: h += rmsnorm(y) * (w + offset), y left as it was
// (buffers y, w, h; NormParams of one row a token, row strides x_stride for
// y and y_stride for h).
void rmsnorm_residual(const CpuArgs& a) {
    NormParams p = a.p<NormParams>();
    if (p.rows_per_token != 1 || p.row0 != 0) throw Error("rmsnorm_residual: one row a token, from row 0");
    std::vector<float> yn((size_t)p.n_tokens * p.dim);
    NormParams np = p;
    np.y_stride = p.dim;
    run("rmsnorm", {a.buf[0], a.buf[1], yn.data()}, np, a.pool);
    float* h = a.b<float>(2);
    for (uint32_t t = 0; t < p.n_tokens; t++) {
        AddParams ap{p.dim, 1};
        run("add_inplace", {h + (size_t)t * p.y_stride, yn.data() + (size_t)t * p.dim}, ap, a.pool);
    }
}

}  // namespace

extern const CpuKernelEntry kFusedKernels[] = {
    {"gemv_multi", gemv_multi},
    {"qk_norm_rope_kv", qk_norm_rope_kv},
    {"rmsnorm_residual", rmsnorm_residual},
    {nullptr, nullptr},
};

}  // namespace akunu
