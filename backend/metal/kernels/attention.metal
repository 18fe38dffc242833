// KV-cache write and attention (CPU twin: backend/cpu/kernels/attention.cpp),
// with GQA, sliding window, causal or bidirectional masks, packed sequences
// and fixed key ranges; and their paged forms, which read each row's
// (sequence, position) and find its keys in a pool of fixed-size blocks
// through the sequence's block table. The caches hold F16, BF16, Q8_0 or Q4_0
// rows, K and V apart (kv_cache.h).
// Precision follows the CPU: Q rounded to F16 for the Q.K dots, softmax
// weights rounded to F16 before weighting V, sums in float; quantized rows
// are read as the CPU reads them (kv_cache.h kv_block_value).
#include "kv_cache.h"

// Value i of token t's K and V rows into the cache rows at kdst / vdst. The
// threads of a SIMD group take consecutive values (32-aligned), so a block
// type's block is one SIMD group's; the thread of value 0 zeroes the padding.
inline void kv_write_value(device const float* k, device const float* v, device uint8_t* kdst, device uint8_t* vdst,
                           uint k_type, uint v_type, uint kv_dim, uint i, uint lane) {
    kv_store(k_type, kdst, kv_dim, i, k[i], lane);
    kv_store(v_type, vdst, kv_dim, i, v[i], lane);
    if (i == 0) {
        kv_zero_padding(k_type, kdst, kv_dim);
        kv_zero_padding(v_type, vdst, kv_dim);
    }
}

// grid (ceil(kv_dim / threads), n_tokens); threads a multiple of 32. A thread
// past kv_dim returns, which for the block types (kv_dim % 32 == 0) leaves
// whole SIMD groups, never part of one. Token t goes to the ring row of
// position pos0 + t (max_ctx rows; the launch rejects a cache of none).
kernel void kv_write(device const float* k [[buffer(0)]], device const float* v [[buffer(1)]],
                     device uint8_t* kc [[buffer(2)]], device uint8_t* vc [[buffer(3)]],
                     constant KVWriteParams& p [[buffer(AK_PARAMS)]], AK_THREAD_ARGS) {
    const uint i = tgpig.x * ntg + tiitg, t = tgpig.y;
    if (i >= p.kv_dim) return;
    const ulong row = kv_ring_row(p.pos0 + t, p.max_ctx);
    kv_write_value(k + (ulong)t * p.k_stride, v + (ulong)t * p.v_stride,
                   kc + row * kv_row_bytes(p.k_type, p.kv_dim), vc + row * kv_row_bytes(p.v_type, p.kv_dim),
                   p.k_type, p.v_type, p.kv_dim, i, tiisg);
}
AK_EXPORT_KERNEL(kv_write)

// Keys per chunk of the weighted-V pass: one per thread.
enum { kAttnThreads = 128, kAttnMaxHeadDim = 256 };

// One cache (K or V) of a layer: its rows and their element type.
struct KvRows {
    device const uint8_t* base;  // row 0 of the cache (or pool)
    uint type;
    uint kv_dim;
    ulong row_bytes;  // kv_row_bytes(type, kv_dim)
    device const uint8_t* row(ulong r) const { return base + r * row_bytes; }
};

// q . (head slice [koff, koff + hd) of cache row `row`), summed in d order
// for every type; F16 is the plain half loop the F16 cache always ran.
inline float qk_dot(threadgroup const float* q, KvRows c, device const uint8_t* row, uint koff, uint hd) {
    float s = 0.0f;
    if (c.type == kKvF16) {
        device const half* krow = (device const half*)row + koff;
        for (uint d = 0; d < hd; d++) s += q[d] * float(krow[d]);
    } else if (c.type == kKvBF16) {
        device const ushort* krow = (device const ushort*)row + koff;
        for (uint d = 0; d < hd; d++) s += q[d] * bf16_to_f32(krow[d]);
    } else {  // whole blocks (head_dim % 32 == 0): one scale load a block
        for (uint d0 = 0; d0 < hd; d0 += kKvBlock) {
            const float scale = kv_block_scale(c.type, row, c.kv_dim, (koff + d0) / kKvBlock);
            for (uint d = d0; d < d0 + kKvBlock; d++)
                s += q[d] * kv_block_value(scale, kv_block_quant(c.type, row, koff + d));
        }
    }
    return s;
}

// Where key position j of the row's sequence lives in the caches: the
// contiguous cache keeps it at its ring row (kv_ring_row: j itself on a
// full-context cache, a compare and no division); the paged pool at the row
// the sequence's block table gives (PagedKVWriteParams). attend_row asks once
// per key and pass, and the weighted-V pass reuses the rows it stored.
struct ContiguousKeys {
    uint rows;  // AttentionParams::max_ctx
    ulong row(uint j) const { return kv_ring_row(j, rows); }
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
// (as kv_write: whole SIMD groups return)
kernel void kv_write_paged(device const float* k [[buffer(0)]], device const float* v [[buffer(1)]],
                           device uint8_t* kc [[buffer(2)]], device uint8_t* vc [[buffer(3)]],
                           device const int* rows [[buffer(4)]], device const int* tables [[buffer(5)]],
                           constant PagedKVWriteParams& p [[buffer(AK_PARAMS)]], AK_THREAD_ARGS) {
    const uint i = tgpig.x * ntg + tiitg, t = tgpig.y;
    if (i >= p.kv_dim) return;
    const ulong dst = paged_row(tables, p.max_blocks, p.block_size, (uint)rows[2 * t], (uint)rows[2 * t + 1]);
    kv_write_value(k + (ulong)t * p.k_stride, v + (ulong)t * p.v_stride,
                   kc + dst * kv_row_bytes(p.k_type, p.kv_dim), vc + dst * kv_row_bytes(p.v_type, p.kv_dim),
                   p.k_type, p.v_type, p.kv_dim, i, tiisg);
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
// A key's score from its dot product with the query: scale * dot, or with a
// soft cap (Gemma 2) cap * tanh(dot * (scale / cap)).
struct Score {
    float scale, cap;
    float of(float dot) const { return cap > 0.0f ? cap * tanh(dot * (scale / cap)) : dot * scale; }
};

// sink: the head's sink logit (gpt-oss) when has_sink, which joins the
// maximum and the softmax sum once, with a value vector of zeros.
template <typename Keys>
inline void attend_row(device const float* qsrc, KvRows kc, KvRows vc, device float* o, uint hd, uint koff,
                       uint lo, uint last, Score score, Keys keys, bool has_sink, float sink,
                       threadgroup float* shared, uint tid, uint n_threads, uint lane, uint sg, uint n_sg) {
    threadgroup float* qs = shared;
    threadgroup float* wts = shared + kAttnMaxHeadDim;
    threadgroup uint* krows = (threadgroup uint*)(wts + kAttnThreads);
    threadgroup float* scratch = wts + 2 * kAttnThreads;
    for (uint d = tid; d < hd; d += n_threads) qs[d] = round_f16(qsrc[d]);
    threadgroup_barrier(mem_flags::mem_threadgroup);

    float mx = -INFINITY;
    for (uint j = lo + tid; j <= last; j += n_threads) mx = max(mx, score.of(qk_dot(qs, kc, kc.row(keys.row(j)), koff, hd)));
    mx = tg_max(mx, scratch, lane, sg, n_sg);
    if (has_sink) mx = max(mx, sink);
    float sum = 0.0f;
    for (uint j = lo + tid; j <= last; j += n_threads) sum += exp(score.of(qk_dot(qs, kc, kc.row(keys.row(j)), koff, hd)) - mx);
    sum = tg_sum(sum, scratch, lane, sg, n_sg);
    if (has_sink) sum += exp(sink - mx);
    const float inv_sum = 1.0f / sum;

    float acc[kAttnMaxHeadDim / kAttnThreads];  // this thread's output dimensions d = tid + i * n_threads
    for (uint i = 0; i < kAttnMaxHeadDim / kAttnThreads; i++) acc[i] = 0.0f;
    for (uint c0 = lo; c0 <= last; c0 += n_threads) {
        const uint j = c0 + tid;
        if (j <= last) {
            const ulong r = keys.row(j);
            krows[tid] = (uint)r;
            wts[tid] = round_f16(exp(score.of(qk_dot(qs, kc, kc.row(r), koff, hd)) - mx) * inv_sum);
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        const uint n = min(n_threads, last - c0 + 1);
        for (uint i = 0, d = tid; d < hd; i++, d += n_threads) {
            float a = acc[i];
            if (vc.type == kKvF16) {  // the F16 cache's column walk, as it always ran
                device const half* vcol = (device const half*)vc.base + koff + d;
                for (uint jj = 0; jj < n; jj++) a += wts[jj] * float(vcol[(ulong)krows[jj] * vc.kv_dim]);
            } else {
                for (uint jj = 0; jj < n; jj++) a += wts[jj] * kv_value(vc.type, vc.row(krows[jj]), vc.kv_dim, koff + d);
            }
            acc[i] = a;
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    for (uint i = 0, d = tid; d < hd; i++, d += n_threads) o[d] = acc[i];
}

inline KvRows key_cache(device const uint8_t* base, uint type, uint kv_dim) {
    return KvRows{base, type, kv_dim, (ulong)kv_row_bytes(type, kv_dim)};
}

// One threadgroup per (head, token), grid (n_heads, n_tokens). Keys are read
// at their ring rows of the max_ctx-row caches; the launch checks that the
// rows still hold every key the pass reads (core/kv_rows_check.h). Buffers 5
// and 6 (another backend's staging rows) are declared, unread, so that the
// sinks are the eighth argument (the emulation binds buffers by position).
kernel void attention(device const float* q [[buffer(0)]], device const uint8_t* kc [[buffer(1)]],
                      device const uint8_t* vc [[buffer(2)]], device float* out [[buffer(3)]],
                      device const int* seg [[buffer(4)]], device const uint8_t* [[buffer(5)]],
                      device const uint8_t* [[buffer(6)]], device const float* sinks [[buffer(7)]],
                      constant AttentionParams& p [[buffer(AK_PARAMS)]],
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
    attend_row(q + (ulong)t * p.q_stride + (ulong)h * hd, key_cache(kc, p.k_type, kv_dim),
               key_cache(vc, p.v_type, kv_dim), out + (ulong)t * p.out_stride + (ulong)h * hd, hd, (h / group) * hd,
               lo, last, Score{p.scale, p.softcap}, ContiguousKeys{p.max_ctx}, p.sinks != 0, p.sinks ? sinks[h] : 0.0f,
               shared, tiitg, ntg, tiisg, sgitg, nsg);
}
AK_EXPORT_KERNEL(attention)

// Causal attention of each row (sequence, position) = rows[2t], rows[2t + 1]
// over its own sequence's keys [lo, position], read through the block table.
// One threadgroup per (head, token), grid (n_heads, n_tokens).
kernel void attention_paged(device const float* q [[buffer(0)]], device const uint8_t* kc [[buffer(1)]],
                            device const uint8_t* vc [[buffer(2)]], device float* out [[buffer(3)]],
                            device const int* rows [[buffer(4)]], device const int* tables [[buffer(5)]],
                            device const float* sinks [[buffer(6)]], constant PagedAttentionParams& p [[buffer(AK_PARAMS)]],
                            threadgroup float* shared AK_THREADGROUP_MEMORY, AK_THREAD_ARGS) {
    const uint h = tgpig.x, t = tgpig.y, hd = p.head_dim;
    const uint kv_dim = p.n_kv_heads * hd, group = p.n_heads / p.n_kv_heads;
    const uint seq = (uint)rows[2 * t], pos = (uint)rows[2 * t + 1];
    const uint lo = (p.window && pos + 1 > p.window) ? pos + 1 - p.window : 0;
    const PagedKeys keys{tables + (ulong)seq * p.max_blocks, p.block_size};
    attend_row(q + (ulong)t * p.q_stride + (ulong)h * hd, key_cache(kc, p.k_type, kv_dim),
               key_cache(vc, p.v_type, kv_dim), out + (ulong)t * p.out_stride + (ulong)h * hd, hd, (h / group) * hd,
               lo, pos, Score{p.scale, p.softcap}, keys, p.sinks != 0, p.sinks ? sinks[h] : 0.0f, shared, tiitg, ntg,
               tiisg, sgitg, nsg);
}
AK_EXPORT_KERNEL(attention_paged)
