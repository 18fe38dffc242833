// Mixture-of-experts kernels: router gating with top-k selection, the expert
// matmuls over the selected experts (llama.cpp's mul_mat_id), and the shared
// expert's add. Their meaning is in core/kernel_params.h (MoeRouteParams,
// MoeMatmulParams, MoeSharedAddParams); this file is the reference.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/dtype_descriptor.h"
#include "core/error.h"
#include "core/kernel_params.h"
#include "cpu_kernel.h"

namespace akunu {
namespace {

// Per token: probabilities, the n_used largest (ties: the lower id), their
// weights. Written so that NaN logits still give n_used distinct valid ids.
void moe_route(const CpuArgs& a) {
    const MoeRouteParams p = a.p<MoeRouteParams>();
    const float* logits = a.b<float>(0);
    uint8_t* out = a.buf[1];
    const uint32_t n = p.n_experts, k = std::min(p.n_used, p.n_experts);
    if (n == 0 || k == 0) return;
    thread_local std::vector<float> probs;
    thread_local std::vector<uint8_t> taken;
    if (probs.size() < n) {  // grows once (the first pass of a model), never in steady state
        probs.resize(n);
        taken.resize(n);
    }
    for (uint32_t t = 0; t < p.n_tokens; t++) {
        const float* l = logits + (size_t)t * p.logit_stride;
        if (p.gating == kMoeSigmoid) {
            for (uint32_t e = 0; e < n; e++) probs[e] = 1.0f / (1.0f + std::exp(-l[e]));
        } else {
            float m = l[0];
            for (uint32_t e = 1; e < n; e++) m = std::max(m, l[e]);
            double sum = 0.0;
            for (uint32_t e = 0; e < n; e++) {
                probs[e] = std::exp(l[e] - m);
                sum += probs[e];
            }
            const float inv = (float)(1.0 / sum);
            for (uint32_t e = 0; e < n; e++) probs[e] *= inv;
        }
        int32_t* ids = reinterpret_cast<int32_t*>(out + (size_t)t * p.route_stride * 4);
        float* w = reinterpret_cast<float*>(ids + p.n_used);
        std::fill(taken.begin(), taken.begin() + n, 0);
        for (uint32_t j = 0; j < k; j++) {
            uint32_t best = 0;
            while (taken[best]) best++;
            for (uint32_t e = best + 1; e < n; e++)
                if (!taken[e] && probs[e] > probs[best]) best = e;
            taken[best] = 1;
            ids[j] = (int32_t)best;
            w[j] = probs[best];
        }
        if (p.norm_topk) {
            float s = 0.0f;
            for (uint32_t j = 0; j < k; j++) s += w[j];
            s = std::max(s, 6.103515625e-5f);  // llama.cpp's clamp (the smallest normal F16)
            for (uint32_t j = 0; j < k; j++) w[j] /= s;
        }
        if (p.weight_scale != 0.0f && p.weight_scale != 1.0f)
            for (uint32_t j = 0; j < k; j++) w[j] *= p.weight_scale;
    }
}

// The dtype's own matmul kernel (gemm_<format>), looked up once per format.
CpuKernel matmul_for(uint32_t dtype) {
    static std::atomic<CpuKernel> cache[64];  // zero-initialized (static storage)
    if (dtype >= 64) return nullptr;
    CpuKernel fn = cache[dtype].load(std::memory_order_acquire);
    if (fn) return fn;
    const DTypeDescriptor* dt = dtype_lookup(dtype);
    if (!dt || !dt->gemm_kernel) return nullptr;
    const CpuKernelEntry* e = find_cpu_kernel(dt->gemm_kernel);
    if (!e) return nullptr;
    cache[dtype].store(e->fn, std::memory_order_release);
    return e->fn;
}

// Tokens grouped by expert: each selected expert's rows (token, slot) are
// gathered and go through the format's matmul kernel once, over that expert's
// matrix alone; experts nobody chose are never touched. Rows keep ascending
// token order within an expert, so the first rows of each group are the
// batch's generated rows (MatmulParams::generated_rows for that call).
void moe_matmul(const CpuArgs& a) {
    const MoeMatmulParams p = a.p<MoeMatmulParams>();
    const CpuKernel fn = matmul_for(p.dtype);
    const DTypeDescriptor* dt = dtype_lookup(p.dtype);
    if (!fn || !dt || is_mlx_dtype(p.dtype) || p.K % dt->block_elems != 0)
        throw Error(std::string("moe_matmul: unsupported weight type ") + dtype_name(p.dtype) + " or row length");
    if (p.n_tokens == 0 || p.n_used == 0) return;
    const size_t row_bytes = (size_t)p.K / dt->block_elems * dt->block_bytes;
    const size_t expert_bytes = row_bytes * p.N;
    const uint8_t* W = a.buf[0];
    const float* x = a.b<float>(1);
    float* y = a.b<float>(2);
    const uint8_t* route = a.buf[3];
    auto id_of = [&](uint32_t t, uint32_t j) {  // the matrix of this tensor (first_expert: a rank's first)
        return reinterpret_cast<const int32_t*>(route + (size_t)t * p.route_stride * 4)[j] - (int32_t)p.first_expert;
    };
    auto weight_of = [&](uint32_t t, uint32_t j) {
        return reinterpret_cast<const float*>(route + (size_t)t * p.route_stride * 4)[p.n_used + j];
    };

    // Counting sort of the rows by expert (stable: ascending row = token, slot).
    thread_local std::vector<uint32_t> start, order;
    thread_local std::vector<float> xg, yg;
    const size_t n_rows = (size_t)p.n_tokens * p.n_used;
    if (start.size() < (size_t)p.n_experts + 1) start.resize((size_t)p.n_experts + 1);
    if (order.size() < n_rows) order.resize(n_rows);
    std::fill(start.begin(), start.begin() + p.n_experts + 1, 0u);
    for (uint32_t t = 0; t < p.n_tokens; t++)
        for (uint32_t j = 0; j < p.n_used; j++) {
            const int32_t e = id_of(t, j);
            if (e >= 0 && (uint32_t)e < p.n_experts) start[(size_t)e + 1]++;  // an id out of range adds nothing
        }
    for (uint32_t e = 0; e < p.n_experts; e++) start[e + 1] += start[e];
    {
        thread_local std::vector<uint32_t> fill;
        fill.assign(start.begin(), start.begin() + p.n_experts);
        for (uint32_t t = 0; t < p.n_tokens; t++)
            for (uint32_t j = 0; j < p.n_used; j++) {
                const int32_t e = id_of(t, j);
                if (e >= 0 && (uint32_t)e < p.n_experts) order[fill[(size_t)e]++] = t * p.n_used + j;
            }
    }
    if (p.weighted)
        for (uint32_t t = 0; t < p.n_tokens; t++) std::memset(y + (size_t)t * p.y_stride, 0, (size_t)p.N * 4);

    size_t most = 0;
    for (uint32_t e = 0; e < p.n_experts; e++) most = std::max<size_t>(most, start[e + 1] - start[e]);
    if (xg.size() < most * p.K) xg.resize(most * p.K);
    if (yg.size() < most * p.N) yg.resize(most * p.N);

    for (uint32_t e = 0; e < p.n_experts; e++) {
        const uint32_t r0 = start[e], cnt = start[e + 1] - r0;
        if (cnt == 0) continue;
        uint32_t generated = 0;
        for (uint32_t i = 0; i < cnt; i++) {
            const uint32_t r = order[r0 + i], t = r / p.n_used, j = r % p.n_used;
            std::memcpy(xg.data() + (size_t)i * p.K, x + (size_t)t * p.x_stride + (size_t)j * p.x_slot_stride,
                        (size_t)p.K * 4);
            if (t < p.generated_rows) generated++;
        }
        MatmulParams mp{p.N, p.K, cnt, p.dtype, p.K, p.N, 0, 0, p.invariant, generated};
        CpuArgs sub{};
        sub.buf[0] = const_cast<uint8_t*>(W + (size_t)e * expert_bytes);
        sub.buf[1] = reinterpret_cast<uint8_t*>(xg.data());
        sub.buf[2] = reinterpret_cast<uint8_t*>(yg.data());
        sub.params = reinterpret_cast<const uint8_t*>(&mp);
        sub.pool = a.pool;
        fn(sub);
        const float* bias = p.bias ? a.b<float>(4) + (size_t)e * p.N : nullptr;  // expert e's (gpt-oss)
        for (uint32_t i = 0; i < cnt; i++) {
            const uint32_t r = order[r0 + i], t = r / p.n_used, j = r % p.n_used;
            float* src = yg.data() + (size_t)i * p.N;
            if (bias)
                for (uint32_t n = 0; n < p.N; n++) src[n] += bias[n];
            if (p.weighted) {
                const float w = weight_of(t, j);
                float* dst = y + (size_t)t * p.y_stride;
                for (uint32_t n = 0; n < p.N; n++) dst[n] += w * src[n];
            } else {
                std::memcpy(y + (size_t)t * p.y_stride + (size_t)j * p.y_slot_stride, src, (size_t)p.N * 4);
            }
        }
    }
}

void moe_shared_add(const CpuArgs& a) {
    const MoeSharedAddParams p = a.p<MoeSharedAddParams>();
    const float* x = a.b<float>(0);
    const float* gate = a.b<float>(1);
    float* y = a.b<float>(2);
    for (uint32_t t = 0; t < p.n_tokens; t++) {
        const float g = p.gated ? 1.0f / (1.0f + std::exp(-gate[(size_t)t * p.gate_stride])) : 1.0f;
        const float* xr = x + (size_t)t * p.x_stride;
        float* yr = y + (size_t)t * p.y_stride;
        for (uint32_t i = 0; i < p.dim; i++) yr[i] += g * xr[i];
    }
}

}  // namespace

extern const CpuKernelEntry kMoeKernels[] = {
    {"moe_route", moe_route},
    {"moe_matmul", moe_matmul},
    {"moe_shared_add", moe_shared_add},
    {nullptr, nullptr},
};

}  // namespace akunu
