// KV-cache write and attention over the F16 cache (CPU twin:
// backend/cpu/kernels/attention.cpp), with GQA, sliding window, causal or
// bidirectional masks, packed sequences and fixed key ranges.
// Precision follows the CPU: Q rounded to F16 for the Q.K dots, softmax
// weights rounded to F16 before weighting V, sums in float.
#include "akunu_msl.h"

// grid (ceil(kv_dim / threads), n_tokens)
kernel void kv_write(device const float* k [[buffer(0)]], device const float* v [[buffer(1)]],
                     device half* kc [[buffer(2)]], device half* vc [[buffer(3)]],
                     constant KVWriteParams& p [[buffer(AK_PARAMS)]], AK_THREAD_ARGS) {
    const uint i = tgpig.x * ntg + tiitg, t = tgpig.y;
    if (i >= p.kv_dim) return;
    const ulong dst = (ulong)(p.pos0 + t) * p.kv_dim + i;
    kc[dst] = half(k[(ulong)t * p.k_stride + i]);
    vc[dst] = half(v[(ulong)t * p.v_stride + i]);
}
AK_EXPORT_KERNEL(kv_write)

// Keys per chunk of the weighted-V pass: one per thread.
enum { kAttnThreads = 128, kAttnMaxHeadDim = 256 };

inline float qk_dot(threadgroup const float* q, device const half* krow, uint hd) {
    float s = 0.0f;
    for (uint d = 0; d < hd; d++) s += q[d] * float(krow[d]);
    return s;
}

// One threadgroup per (head, token), grid (n_heads, n_tokens). Flash-style:
// the scores are never stored whole (the context may exceed threadgroup
// memory); pass 1 finds the maximum, pass 2 the softmax sum, pass 3 walks the
// keys in chunks of one key per thread: weights into threadgroup memory, then
// each thread accumulates its output dimensions over the chunk in key order.
// Threadgroup memory: q [256], weights [128], reduction scratch [32].
kernel void attention(device const float* q [[buffer(0)]], device const half* kc [[buffer(1)]],
                      device const half* vc [[buffer(2)]], device float* out [[buffer(3)]],
                      device const int* seg [[buffer(4)]], constant AttentionParams& p [[buffer(AK_PARAMS)]],
                      threadgroup float* shared AK_THREADGROUP_MEMORY, AK_THREAD_ARGS) {
    threadgroup float* qs = shared;
    threadgroup float* wts = shared + kAttnMaxHeadDim;
    threadgroup float* scratch = wts + kAttnThreads;
    const uint h = tgpig.x, t = tgpig.y, hd = p.head_dim;
    const uint kv_dim = p.n_kv_heads * hd, group = p.n_heads / p.n_kv_heads;
    const uint pos = p.pos0 + t;
    uint lo = (p.window && pos + 1 > p.window) ? pos + 1 - p.window : 0;
    uint last = p.causal ? pos : p.pos0 + p.n_tokens - 1;
    if (p.segmented) {
        lo = (uint)seg[2 * t];
        last = (uint)seg[2 * t + 1] - 1;
    }
    if (p.n_keys) {
        lo = 0;
        last = p.n_keys - 1;
    }
    device const float* qsrc = q + (ulong)t * p.q_stride + (ulong)h * hd;
    for (uint d = tiitg; d < hd; d += ntg) qs[d] = round_f16(qsrc[d]);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    const ulong koff = (ulong)(h / group) * hd;

    float mx = -INFINITY;
    for (uint j = lo + tiitg; j <= last; j += ntg) mx = max(mx, qk_dot(qs, kc + (ulong)j * kv_dim + koff, hd) * p.scale);
    mx = tg_max(mx, scratch, tiisg, sgitg, nsg);
    float sum = 0.0f;
    for (uint j = lo + tiitg; j <= last; j += ntg) sum += exp(qk_dot(qs, kc + (ulong)j * kv_dim + koff, hd) * p.scale - mx);
    const float inv_sum = 1.0f / tg_sum(sum, scratch, tiisg, sgitg, nsg);

    float acc[kAttnMaxHeadDim / kAttnThreads];  // this thread's output dimensions d = tiitg + i * ntg
    for (uint i = 0; i < kAttnMaxHeadDim / kAttnThreads; i++) acc[i] = 0.0f;
    for (uint c0 = lo; c0 <= last; c0 += ntg) {
        const uint j = c0 + tiitg;
        if (j <= last) wts[tiitg] = round_f16(exp(qk_dot(qs, kc + (ulong)j * kv_dim + koff, hd) * p.scale - mx) * inv_sum);
        threadgroup_barrier(mem_flags::mem_threadgroup);
        const uint n = min(ntg, last - c0 + 1);
        for (uint i = 0, d = tiitg; d < hd; i++, d += ntg) {
            device const half* vcol = vc + (ulong)c0 * kv_dim + koff + d;
            float a = acc[i];
            for (uint jj = 0; jj < n; jj++) a += wts[jj] * float(vcol[(ulong)jj * kv_dim]);
            acc[i] = a;
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    device float* o = out + (ulong)t * p.out_stride + (ulong)h * hd;
    for (uint i = 0, d = tiitg; d < hd; i++, d += ntg) o[d] = acc[i];
}
AK_EXPORT_KERNEL(attention)
