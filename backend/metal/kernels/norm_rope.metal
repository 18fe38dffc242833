// RMSNorm (also the per-head QK norm), LayerNorm and rotary embeddings (CPU
// twin: backend/cpu/kernels/norm_rope.cpp). Norms: one threadgroup per row,
// sums of squares reduced in float across SIMD groups (the CPU sums in double).
#include "rope.h"

// y[row] = x[row] * rsqrt(mean(x^2) + eps) * (w + weight_offset); grid (n_tokens * rows_per_token)
kernel void rmsnorm(device const float* x [[buffer(0)]], device const float* w [[buffer(1)]],
                    device float* y [[buffer(2)]], constant NormParams& p [[buffer(AK_PARAMS)]],
                    threadgroup float* scratch AK_THREADGROUP_MEMORY, AK_THREAD_ARGS) {
    const uint t = tgpig.x / p.rows_per_token, r = tgpig.x % p.rows_per_token;
    device const float* xr = x + (ulong)(p.row0 + t) * p.x_stride + (ulong)r * p.dim;
    device float* yr = y + (ulong)t * p.y_stride + (ulong)r * p.dim;
    float ss = 0.0f;
    for (uint i = tiitg; i < p.dim; i += ntg) ss += xr[i] * xr[i];
    ss = tg_sum(ss, scratch, tiisg, sgitg, nsg);
    const float scale = 1.0f / sqrt(ss / (float)p.dim + p.eps);
    for (uint i = tiitg; i < p.dim; i += ntg) yr[i] = xr[i] * scale * (w[i] + p.weight_offset);
}
AK_EXPORT_KERNEL(rmsnorm)

// y = (x - mean) / sqrt(var + eps) * w + b (in place allowed: every read
// happens before the reductions' barriers, every write after them)
kernel void layernorm(device const float* x [[buffer(0)]], device const float* w [[buffer(1)]],
                      device float* y [[buffer(2)]], device const float* b [[buffer(3)]],
                      constant NormParams& p [[buffer(AK_PARAMS)]], threadgroup float* scratch AK_THREADGROUP_MEMORY,
                      AK_THREAD_ARGS) {
    const uint t = tgpig.x / p.rows_per_token, r = tgpig.x % p.rows_per_token;
    device const float* xr = x + (ulong)(p.row0 + t) * p.x_stride + (ulong)r * p.dim;
    device float* yr = y + (ulong)t * p.y_stride + (ulong)r * p.dim;
    float s = 0.0f;
    for (uint i = tiitg; i < p.dim; i += ntg) s += xr[i];
    const float mean = tg_sum(s, scratch, tiisg, sgitg, nsg) / (float)p.dim;
    float v = 0.0f;
    for (uint i = tiitg; i < p.dim; i += ntg) v += (xr[i] - mean) * (xr[i] - mean);
    const float var = tg_sum(v, scratch, tiisg, sgitg, nsg) / (float)p.dim;
    const float scale = 1.0f / sqrt(var + p.eps);
    for (uint i = tiitg; i < p.dim; i += ntg) yr[i] = (xr[i] - mean) * scale * w[i] + b[i];
}
AK_EXPORT_KERNEL(layernorm)

// Rotates pairs of one token row's heads in place: (2i, 2i+1), or (i, i + d/2)
// for NeoX. theta_i = pos * scale * base^(-2i/d) / factor_i, cos and sin scaled
// by attn_factor (YaRN's magnitude; 1 otherwise); threads over (head, i).
inline void rope_row(device float* row, device const float* factors, constant RopeParams& p, uint position, uint first,
                     uint step) {
    const uint half_dim = p.head_dim / 2;
    const float pos = (float)position;
    for (uint e = first; e < p.n_heads * half_dim; e += step) {
        const uint h = e / half_dim, i = e % half_dim;
        const float theta = rope_theta(pos, i, p.head_dim, p.freq_base, p.freq_scale, p.has_freq_factors, factors);
        const float c = cos(theta) * p.attn_factor, s = sin(theta) * p.attn_factor;
        device float* v = row + (ulong)h * p.head_dim;
        const uint i0 = p.neox ? i : 2 * i, i1 = p.neox ? i + half_dim : 2 * i + 1;
        const float x0 = v[i0], x1 = v[i1];
        v[i0] = x0 * c - x1 * s;
        v[i1] = x0 * s + x1 * c;
    }
}

// Token t at position pos0 + t; grid (n_tokens)
kernel void rope(device float* x [[buffer(0)]], device const float* factors [[buffer(1)]],
                 constant RopeParams& p [[buffer(AK_PARAMS)]], AK_THREAD_ARGS) {
    const uint t = tgpig.x;
    rope_row(x + (ulong)t * p.row_stride, factors, p, p.pos0 + t, tiitg, ntg);
}
AK_EXPORT_KERNEL(rope)

// Token t at its own position rows[2t + 1] (rows: (sequence, position) pairs;
// pos0 unused); grid (n_tokens)
kernel void rope_rows(device float* x [[buffer(0)]], device const float* factors [[buffer(1)]],
                      device const int* rows [[buffer(2)]], constant RopeParams& p [[buffer(AK_PARAMS)]],
                      AK_THREAD_ARGS) {
    const uint t = tgpig.x;
    rope_row(x + (ulong)t * p.row_stride, factors, p, (uint)rows[2 * t + 1], tiitg, ntg);
}
AK_EXPORT_KERNEL(rope_rows)
