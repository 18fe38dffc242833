// KV-cache write and attention over the F16 cache (CPU twin:
// backend/cpu/kernels/attention.cpp), with GQA, sliding window, causal or
// bidirectional masks, packed sequences and fixed key ranges; and their paged
// forms, which read each row's (sequence, position) and find its keys in a
// pool of fixed-size blocks through the sequence's block table.
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

// Where key position j of the row's sequence lives in the caches: the
// contiguous cache keeps it at row j; the paged pool at the row the
// sequence's block table gives (PagedKVWriteParams).
struct ContiguousKeys {
    ulong row(uint j) const { return j; }
};
struct PagedKeys {
    device const int* table;  // this sequence's block ids
    uint block_size;
    ulong row(uint j) const { return (ulong)table[j / block_size] * block_size + j % block_size; }
};

// Pool row of position `pos` of sequence `seq` (PagedKVWriteParams).
inline ulong paged_row(device const int* tables, uint max_blocks, uint block_size, uint seq, uint pos) {
    return (ulong)tables[(ulong)seq * max_blocks + pos / block_size] * block_size + pos % block_size;
}

// kv_write at each row's own (sequence, position); grid (ceil(kv_dim / threads), n_tokens)
kernel void kv_write_paged(device const float* k [[buffer(0)]], device const float* v [[buffer(1)]],
                           device half* kc [[buffer(2)]], device half* vc [[buffer(3)]],
                           device const int* rows [[buffer(4)]], device const int* tables [[buffer(5)]],
                           constant PagedKVWriteParams& p [[buffer(AK_PARAMS)]], AK_THREAD_ARGS) {
    const uint i = tgpig.x * ntg + tiitg, t = tgpig.y;
    if (i >= p.kv_dim) return;
    const ulong dst = paged_row(tables, p.max_blocks, p.block_size, (uint)rows[2 * t], (uint)rows[2 * t + 1]) * p.kv_dim + i;
    kc[dst] = half(k[(ulong)t * p.k_stride + i]);
    vc[dst] = half(v[(ulong)t * p.v_stride + i]);
}
AK_EXPORT_KERNEL(kv_write_paged)

// One query row of one head over keys [lo, last], run by a whole threadgroup.
// Flash-style: the scores are never stored whole (the context may exceed
// threadgroup memory); pass 1 finds the maximum, pass 2 the softmax sum, pass
// 3 walks the keys in chunks of one key per thread: weights and cache rows into
// threadgroup memory, then each thread accumulates its output dimensions over
// the chunk in key order. The result depends only on q, the keys and [lo, last]
// (no other row of the pass takes part), which keeps batched passes invariant.
// Threadgroup memory: q [256], weights [128], cache rows [128], reduction scratch [32].
template <typename Keys>
inline void attend_row(device const float* qsrc, device const half* kc, device const half* vc, device float* o,
                       uint hd, uint kv_dim, ulong koff, uint lo, uint last, float scale, Keys keys,
                       threadgroup float* shared, uint tid, uint n_threads, uint lane, uint sg, uint n_sg) {
    threadgroup float* qs = shared;
    threadgroup float* wts = shared + kAttnMaxHeadDim;
    threadgroup uint* krows = (threadgroup uint*)(wts + kAttnThreads);
    threadgroup float* scratch = wts + 2 * kAttnThreads;
    for (uint d = tid; d < hd; d += n_threads) qs[d] = round_f16(qsrc[d]);
    threadgroup_barrier(mem_flags::mem_threadgroup);

    float mx = -INFINITY;
    for (uint j = lo + tid; j <= last; j += n_threads) mx = max(mx, qk_dot(qs, kc + keys.row(j) * kv_dim + koff, hd) * scale);
    mx = tg_max(mx, scratch, lane, sg, n_sg);
    float sum = 0.0f;
    for (uint j = lo + tid; j <= last; j += n_threads) sum += exp(qk_dot(qs, kc + keys.row(j) * kv_dim + koff, hd) * scale - mx);
    const float inv_sum = 1.0f / tg_sum(sum, scratch, lane, sg, n_sg);

    float acc[kAttnMaxHeadDim / kAttnThreads];  // this thread's output dimensions d = tid + i * n_threads
    for (uint i = 0; i < kAttnMaxHeadDim / kAttnThreads; i++) acc[i] = 0.0f;
    for (uint c0 = lo; c0 <= last; c0 += n_threads) {
        const uint j = c0 + tid;
        if (j <= last) {
            const ulong r = keys.row(j);
            krows[tid] = (uint)r;
            wts[tid] = round_f16(exp(qk_dot(qs, kc + r * kv_dim + koff, hd) * scale - mx) * inv_sum);
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        const uint n = min(n_threads, last - c0 + 1);
        for (uint i = 0, d = tid; d < hd; i++, d += n_threads) {
            device const half* vcol = vc + koff + d;
            float a = acc[i];
            for (uint jj = 0; jj < n; jj++) a += wts[jj] * float(vcol[(ulong)krows[jj] * kv_dim]);
            acc[i] = a;
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    for (uint i = 0, d = tid; d < hd; i++, d += n_threads) o[d] = acc[i];
}

// One threadgroup per (head, token), grid (n_heads, n_tokens).
kernel void attention(device const float* q [[buffer(0)]], device const half* kc [[buffer(1)]],
                      device const half* vc [[buffer(2)]], device float* out [[buffer(3)]],
                      device const int* seg [[buffer(4)]], constant AttentionParams& p [[buffer(AK_PARAMS)]],
                      threadgroup float* shared AK_THREADGROUP_MEMORY, AK_THREAD_ARGS) {
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
    attend_row(q + (ulong)t * p.q_stride + (ulong)h * hd, kc, vc, out + (ulong)t * p.out_stride + (ulong)h * hd, hd,
               kv_dim, (ulong)(h / group) * hd, lo, last, p.scale, ContiguousKeys{}, shared, tiitg, ntg, tiisg, sgitg,
               nsg);
}
AK_EXPORT_KERNEL(attention)

// Causal attention of each row (sequence, position) = rows[2t], rows[2t + 1]
// over its own sequence's keys [lo, position], read through the block table.
// One threadgroup per (head, token), grid (n_heads, n_tokens).
kernel void attention_paged(device const float* q [[buffer(0)]], device const half* kc [[buffer(1)]],
                            device const half* vc [[buffer(2)]], device float* out [[buffer(3)]],
                            device const int* rows [[buffer(4)]], device const int* tables [[buffer(5)]],
                            constant PagedAttentionParams& p [[buffer(AK_PARAMS)]],
                            threadgroup float* shared AK_THREADGROUP_MEMORY, AK_THREAD_ARGS) {
    const uint h = tgpig.x, t = tgpig.y, hd = p.head_dim;
    const uint kv_dim = p.n_kv_heads * hd, group = p.n_heads / p.n_kv_heads;
    const uint seq = (uint)rows[2 * t], pos = (uint)rows[2 * t + 1];
    const uint lo = (p.window && pos + 1 > p.window) ? pos + 1 - p.window : 0;
    const PagedKeys keys{tables + (ulong)seq * p.max_blocks, p.block_size};
    attend_row(q + (ulong)t * p.q_stride + (ulong)h * hd, kc, vc, out + (ulong)t * p.out_stride + (ulong)h * hd, hd,
               kv_dim, (ulong)(h / group) * hd, lo, pos, p.scale, keys, shared, tiitg, ntg, tiisg, sgitg, nsg);
}
AK_EXPORT_KERNEL(attention_paged)
