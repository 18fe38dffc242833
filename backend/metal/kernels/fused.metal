// The fused decode kernels (the book's "Fused decode"): what a decode step's
// table runs when Device::fused_decode() is on, 4 to 6 launches a plain
// layer instead of 18. Each has the meaning of the unfused sequence it
// replaces, which the CPU twins spell out (backend/cpu/kernels/fused.cpp):
//   gemv_multi       input RMSNorm, then Q K V as one GEMV / gate + up +
//                    activation / a projection added to the residual stream
//   qk_norm_rope_kv  per-head QK norm, RoPE and the KV cache write (any
//                    cache type, kv_cache.h)
//   rmsnorm_residual Gemma 3's post-norm added to the residual stream
// and of batch passes (Device::fused_batch; twins: backend/cpu/kernels/fused_batch.cpp):
//   qk_norm_rope_kv_paged  qk_norm_rope_kv at each row's own position and pool row
//   add_rmsnorm            the residual add, then the next RMSNorm
// Every float step is the one the unfused Metal kernels take (same norm
// scale expression, same rotary angle, same activation), so a fused table
// and a plain one differ only in the order of float sums.
#include "activations.h"
#include "formats.h"
#include "kv_cache.h"
#include "rope.h"

enum { kMultiMaxTokens = 8 };  // tokens per pass over the weights (more take more passes)

// acc[t] += this lane's share of row . x[t] for t < m: the lanes take the
// row's blocks first, first + step, ... and decode each once for every token. With `norm`,
// x is normalized as it is read (x * scale[t] * (nw + offset), the rmsnorm
// kernel's expression), so the normalized vector is never stored.
inline void multi_row_dot(device const uint8_t* row, uint dtype, uint K, device const float* x,
                          device const float* nw, bool norm, float offset, thread const float* scale, uint m,
                          uint first, uint step, thread float* acc) {
    // float formats: four values a step in one vector load, as matmul.metal's gemv
    const bool vec = any_load4_ok(dtype) && K % 4 == 0;
    const uint be = vec ? 4 : FmtAny::be(dtype), bb = vec ? 4 * FmtAny::bb(dtype) : FmtAny::bb(dtype), nb = K / be;
    float w[FmtAny::MAX_BE];
    for (uint b = first; b < nb; b += step) {
        if (vec) any_load4(row + (ulong)b * bb, w, dtype);
        else FmtAny::decode(row + (ulong)b * bb, w, dtype);
        const uint k0 = b * be;
        for (uint t = 0; t < m; t++) {
            device const float* xb = x + (ulong)t * K + k0;
            float s = 0.0f;
            if (norm)
                for (uint j = 0; j < be; j++) s += w[j] * (xb[j] * scale[t] * (nw[k0 + j] + offset));
            else
                for (uint j = 0; j < be; j++) s += w[j] * xb[j];
            acc[t] += s;
        }
    }
}

// Buffers: 0 x [n_tokens, K], 1 norm weight (p.norm), 2-4 W0..W2, 5-7 y0..y2
// (MultiGemvParams says which are used). SPLIT SIMD groups an output row
// (1: gemv_multi; 2: gemv_multi_large, the large-K variant ChipConfig picks
// for long rows of 32-value blocks, as matmul.metal's gemv_large): Separate
// mode numbers the rows of W0, W1, W2 one after another (each group reads one
// matrix, so the format switch is uniform in it); the gated modes give a
// group one row of gate (W0) and of up (W1); Accumulate adds its row's dot to
// y0. Grid: ceil(rows / (SIMD groups a threadgroup / SPLIT)). Threadgroup
// memory: 32 floats for the norm's sums, then (SPLIT > 1) a gate and an up
// partial sum a (SIMD group, token).
template <uint SPLIT>
kernel void gemv_multi(device const float* x [[buffer(0)]], device const float* nw [[buffer(1)]],
                       device const uint8_t* W0 [[buffer(2)]], device const uint8_t* W1 [[buffer(3)]],
                       device const uint8_t* W2 [[buffer(4)]], device float* y0 [[buffer(5)]],
                       device float* y1 [[buffer(6)]], device float* y2 [[buffer(7)]],
                       constant MultiGemvParams& p [[buffer(AK_PARAMS)]],
                       threadgroup float* scratch AK_THREADGROUP_MEMORY, AK_THREAD_ARGS) {
    threadgroup float* partial = scratch + 32;
    const uint part = sgitg % SPLIT;
    uint row = tgpig.x * (nsg / SPLIT) + sgitg / SPLIT, mat = 0;
    if (p.mode == kGemvSeparate && row >= p.N[0]) {
        row -= p.N[0];
        mat = 1;
        if (row >= p.N[1]) {
            row -= p.N[1];
            mat = 2;
        }
    }
    const bool active = mat < (p.mode == kGemvSeparate ? p.n_mats : 1u) && row < p.N[mat];
    const bool gated = p.mode == kGemvSiluGate || p.mode == kGemvGeluGate;
    device const uint8_t* W = mat == 0 ? W0 : mat == 1 ? W1 : W2;
    device float* y = mat == 0 ? y0 : mat == 1 ? y1 : y2;
    const uint K = p.K, N = p.N[mat], dtype = p.dtype[mat];
    const ulong row_bytes = (ulong)(K / max(FmtAny::be(dtype), 1u)) * FmtAny::bb(dtype);
    const ulong up_row_bytes = (ulong)(K / max(FmtAny::be(p.dtype[1]), 1u)) * FmtAny::bb(p.dtype[1]);
    for (uint t0 = 0; t0 < p.n_tokens; t0 += kMultiMaxTokens) {
        const uint m = min(p.n_tokens - t0, (uint)kMultiMaxTokens);
        device const float* xt = x + (ulong)t0 * K;
        // Every thread of the group takes part in the reductions (barriers),
        // also those without a row.
        float scale[kMultiMaxTokens];
        for (uint t = 0; t < m; t++) {
            float ss = 0.0f;
            if (p.norm)
                for (uint i = tiitg; i < K; i += ntg) ss += xt[(ulong)t * K + i] * xt[(ulong)t * K + i];
            if (p.norm) ss = tg_sum(ss, scratch, tiisg, sgitg, nsg);
            scale[t] = p.norm ? 1.0f / sqrt(ss / (float)K + p.eps) : 1.0f;
        }
        float acc[kMultiMaxTokens], acc_up[kMultiMaxTokens];
        for (uint t = 0; t < kMultiMaxTokens; t++) acc[t] = acc_up[t] = 0.0f;
        if (active) {
            const uint first = part * 32 + tiisg, step = 32 * SPLIT;
            multi_row_dot(W + row * row_bytes, dtype, K, xt, nw, p.norm != 0, p.weight_offset, scale, m, first, step,
                          acc);
            if (gated)
                multi_row_dot(W1 + row * up_row_bytes, p.dtype[1], K, xt, nw, p.norm != 0, p.weight_offset, scale, m,
                              first, step, acc_up);
        }
        for (uint t = 0; t < m; t++) {
            float v = 0.0f, u = 0.0f;
            if (active) {
                v = simd_sum(acc[t]);
                u = gated ? simd_sum(acc_up[t]) : 0.0f;
            }
            if (SPLIT > 1) {  // the row's other SIMD groups' partial sums, through threadgroup memory
                if (tiisg == 0) {
                    partial[(sgitg * kMultiMaxTokens + t) * 2] = v;
                    partial[(sgitg * kMultiMaxTokens + t) * 2 + 1] = u;
                }
                threadgroup_barrier(mem_flags::mem_threadgroup);
                for (uint i = 1; part == 0 && i < SPLIT; i++) {
                    v += partial[((sgitg + i) * kMultiMaxTokens + t) * 2];
                    u += partial[((sgitg + i) * kMultiMaxTokens + t) * 2 + 1];
                }
                threadgroup_barrier(mem_flags::mem_threadgroup);  // before the next token's partials
            }
            if (!active || part != 0 || tiisg != 0) continue;
            device float* out = y + (ulong)(t0 + t) * N + row;
            if (p.mode == kGemvSeparate) *out = v;
            else if (p.mode == kGemvAccumulate) *out += v;
            else *out = (p.mode == kGemvSiluGate ? silu(v) : gelu_tanh(v)) * u;
        }
    }
}
AK_EXPORT("gemv_multi", gemv_multi<1>)
AK_EXPORT("gemv_multi_large", gemv_multi<2>)

// One threadgroup a (head, token): heads [0, n_heads) of q, then the
// n_kv_heads of k. A thread owns rotary pairs, so the norm (whose sum of
// squares is complete before any write), the rotation and, for the 16-bit
// cache types, the K cache write of a pair happen in its registers; a block
// type's K blocks are rounded after the rotation, from the rotated head, 32
// values a SIMD group (the CPU's meaning: kv_write of the rotated k). k's
// groups also copy their head of v to the V cache. The body of
// qk_norm_rope_kv and its paged twin: token t at position pos, its K and V
// cache rows krow / vrow (the caller's: the ring row or the pool row).
inline void qk_norm_rope_kv_head(device float* q, device float* k, device const float* v,
                                 device const float* qw, device const float* kw, device const float* factors,
                                 thread const QKRopeKVParams& p, uint t, uint pos,
                                 device uint8_t* krow, device uint8_t* vrow, threadgroup float* scratch,
                                 uint head_index, uint tid, uint n_threads, uint lane, uint sg, uint n_sg) {
    const uint hd = p.head_dim, half_dim = hd / 2;
    const bool is_k = head_index >= p.n_heads;
    const uint h = is_k ? head_index - p.n_heads : head_index;
    const uint qd = p.n_heads * hd, kvd = p.n_kv_heads * hd;
    device float* head = is_k ? k + (ulong)t * kvd + (ulong)h * hd : q + (ulong)t * qd + (ulong)h * hd;
    device const float* nw = is_k ? kw : qw;
    float scale = 1.0f;
    if (p.has_qk_norm) {  // as rmsnorm over one head's row
        float ss = 0.0f;
        for (uint i = tid; i < hd; i += n_threads) ss += head[i] * head[i];
        ss = tg_sum(ss, scratch, lane, sg, n_sg);
        scale = 1.0f / sqrt(ss / (float)hd + p.eps);
    }
    const bool k_in_pairs = is_k && !kv_type_is_block(p.k_type);
    for (uint i = tid; i < half_dim; i += n_threads) {
        const uint i0 = p.neox ? i : 2 * i, i1 = p.neox ? i + half_dim : 2 * i + 1;
        float x0 = head[i0], x1 = head[i1];
        if (p.has_qk_norm) {
            x0 = x0 * scale * (nw[i0] + p.weight_offset);
            x1 = x1 * scale * (nw[i1] + p.weight_offset);
        }
        const float theta = rope_theta((float)pos, i, hd, p.freq_base, p.freq_scale, p.has_freq_factors, factors);
        const float c = cos(theta) * p.attn_factor, s = sin(theta) * p.attn_factor;
        const float r0 = x0 * c - x1 * s, r1 = x0 * s + x1 * c;
        head[i0] = r0;
        head[i1] = r1;
        if (k_in_pairs) {
            kv_store(p.k_type, krow, kvd, h * hd + i0, r0, lane);
            kv_store(p.k_type, krow, kvd, h * hd + i1, r1, lane);
        }
    }
    if (is_k && kv_type_is_block(p.k_type)) {  // uniform in the threadgroup: every thread reaches the barrier
        // a block's values were rotated by other threads (pairs straddle
        // blocks): read them back from the head once all are written
        threadgroup_barrier(mem_flags::mem_device);
        for (uint i = tid; i < hd; i += n_threads) kv_store(p.k_type, krow, kvd, h * hd + i, head[i], lane);
    }
    if (is_k) {
        device const float* vsrc = v + (ulong)t * kvd + (ulong)h * hd;
        for (uint i = tid; i < hd; i += n_threads) kv_store(p.v_type, vrow, kvd, h * hd + i, vsrc[i], lane);
        if (h == 0 && tid == 0) {
            kv_zero_padding(p.k_type, krow, kvd);
            kv_zero_padding(p.v_type, vrow, kvd);
        }
    }
}

// Buffers: 0 q, 1 k, 2 v, 3 q norm, 4 k norm, 5 freq factors, 6 K cache, 7 V
// cache (rows of n_kv_heads * head_dim values in p.k_type / p.v_type), token
// t at the ring row of position pos0 + t (max_ctx rows, KVWriteParams). Grid
// (n_heads + n_kv_heads, n_tokens); threads a multiple of 32.
kernel void qk_norm_rope_kv(device float* q [[buffer(0)]], device float* k [[buffer(1)]],
                            device const float* v [[buffer(2)]], device const float* qw [[buffer(3)]],
                            device const float* kw [[buffer(4)]], device const float* factors [[buffer(5)]],
                            device uint8_t* kc [[buffer(6)]], device uint8_t* vc [[buffer(7)]],
                            constant QKRopeKVParams& params [[buffer(AK_PARAMS)]],
                            threadgroup float* scratch AK_THREADGROUP_MEMORY, AK_THREAD_ARGS) {
    const QKRopeKVParams p = params;
    const uint t = tgpig.y, pos = p.pos0 + t, kvd = p.n_kv_heads * p.head_dim;
    const ulong row = kv_ring_row(pos, p.max_ctx);  // (the launch rejects a cache of no rows)
    qk_norm_rope_kv_head(q, k, v, qw, kw, factors, p, t, pos, kc + row * kv_row_bytes(p.k_type, kvd),
                         vc + row * kv_row_bytes(p.v_type, kvd), scratch, tgpig.x, tiitg, ntg, tiisg, sgitg, nsg);
}
AK_EXPORT_KERNEL(qk_norm_rope_kv)

// The rows of a batch pass (PagedQKRopeKVParams): row t at its sequence's
// position rows[2t + 1], K / V written at its pool row through the sequence's
// block table (attention.metal paged_row). Buffers as qk_norm_rope_kv, then
// rows and tables at indices 9 and 10 (8 holds the parameters).
kernel void qk_norm_rope_kv_paged(device float* q [[buffer(0)]], device float* k [[buffer(1)]],
                                  device const float* v [[buffer(2)]], device const float* qw [[buffer(3)]],
                                  device const float* kw [[buffer(4)]], device const float* factors [[buffer(5)]],
                                  device uint8_t* kc [[buffer(6)]], device uint8_t* vc [[buffer(7)]],
                                  device const int* rows [[buffer(9)]], device const int* tables [[buffer(10)]],
                                  constant PagedQKRopeKVParams& pp [[buffer(AK_PARAMS)]],
                                  threadgroup float* scratch AK_THREADGROUP_MEMORY, AK_THREAD_ARGS) {
    QKRopeKVParams p;
    p.n_heads = pp.n_heads;
    p.n_kv_heads = pp.n_kv_heads;
    p.head_dim = pp.head_dim;
    p.n_tokens = pp.n_tokens;
    p.pos0 = 0;
    p.has_qk_norm = pp.has_qk_norm;
    p.eps = pp.eps;
    p.weight_offset = pp.weight_offset;
    p.neox = pp.neox;
    p.has_freq_factors = pp.has_freq_factors;
    p.freq_base = pp.freq_base;
    p.freq_scale = pp.freq_scale;
    p.max_ctx = 0;
    p.attn_factor = pp.attn_factor;
    p.k_type = pp.k_type;
    p.v_type = pp.v_type;
    const uint t = tgpig.y, seq = (uint)rows[2 * t], pos = (uint)rows[2 * t + 1];
    const uint kvd = pp.n_kv_heads * pp.head_dim;
    const ulong at = (ulong)tables[(ulong)seq * pp.max_blocks + pos / pp.block_size] * pp.block_size +
                     pos % pp.block_size;
    qk_norm_rope_kv_head(q, k, v, qw, kw, factors, p, t, pos, kc + at * kv_row_bytes(pp.k_type, kvd),
                         vc + at * kv_row_bytes(pp.v_type, kvd), scratch, tgpig.x, tiitg, ntg, tiisg, sgitg, nsg);
}
AK_EXPORT_KERNEL(qk_norm_rope_kv_paged)

// h[t] += rmsnorm(y[t]) * (w + offset), y unchanged (buffers 0 y, 1 w, 2 h;
// y rows at x_stride, h rows at y_stride). Grid (n_tokens).
kernel void rmsnorm_residual(device const float* y [[buffer(0)]], device const float* w [[buffer(1)]],
                             device float* h [[buffer(2)]], constant NormParams& p [[buffer(AK_PARAMS)]],
                             threadgroup float* scratch AK_THREADGROUP_MEMORY, AK_THREAD_ARGS) {
    device const float* yr = y + (ulong)tgpig.x * p.x_stride;
    device float* hr = h + (ulong)tgpig.x * p.y_stride;
    float ss = 0.0f;
    for (uint i = tiitg; i < p.dim; i += ntg) ss += yr[i] * yr[i];
    ss = tg_sum(ss, scratch, tiisg, sgitg, nsg);
    const float scale = 1.0f / sqrt(ss / (float)p.dim + p.eps);
    for (uint i = tiitg; i < p.dim; i += ntg) {
        const float normed = yr[i] * scale * (w[i] + p.weight_offset);
        hr[i] += normed;
    }
}
AK_EXPORT_KERNEL(rmsnorm_residual)

// h[t] += y[t], then xn[t] = rmsnorm(h[t]) * (w + offset) (buffers 0 h, 1 y,
// 2 w, 3 xn; h and y rows at x_stride, xn rows at y_stride): add_inplace and
// rmsnorm's arithmetic, each thread adding the elements it then squares.
// Grid (n_tokens).
kernel void add_rmsnorm(device float* h [[buffer(0)]], device const float* y [[buffer(1)]],
                        device const float* w [[buffer(2)]], device float* xn [[buffer(3)]],
                        constant NormParams& p [[buffer(AK_PARAMS)]], threadgroup float* scratch AK_THREADGROUP_MEMORY,
                        AK_THREAD_ARGS) {
    device float* hr = h + (ulong)tgpig.x * p.x_stride;
    device const float* yr = y + (ulong)tgpig.x * p.x_stride;
    device float* out = xn + (ulong)tgpig.x * p.y_stride;
    float ss = 0.0f;
    for (uint i = tiitg; i < p.dim; i += ntg) {
        const float s = hr[i] + yr[i];
        hr[i] = s;
        ss += s * s;
    }
    ss = tg_sum(ss, scratch, tiisg, sgitg, nsg);
    const float scale = 1.0f / sqrt(ss / (float)p.dim + p.eps);
    for (uint i = tiitg; i < p.dim; i += ntg) out[i] = hr[i] * scale * (w[i] + p.weight_offset);
}
AK_EXPORT_KERNEL(add_rmsnorm)
