// Gated activations, residual add, row gather, erf-GELU, learned positions
// and the 1-D convolution's columns: one thread per element (CPU twin:
// backend/cpu/kernels/elementwise.cpp).
#include "activations.h"

// out[t, i] = act(gate[t, i]) * up[t, i]; grid (ceil(n / threads), n_tokens)
template <int ACT>
kernel void gated_act(device const float* gate [[buffer(0)]], device const float* up [[buffer(1)]],
                      device float* out [[buffer(2)]], constant GatedActParams& p [[buffer(AK_PARAMS)]],
                      AK_THREAD_ARGS) {
    const uint i = tgpig.x * ntg + tiitg, t = tgpig.y;
    if (i >= p.n) return;
    const float g = gate[(ulong)t * p.gate_stride + i];
    out[(ulong)t * p.out_stride + i] = (ACT == 0 ? silu(g) : gelu_tanh(g)) * up[(ulong)t * p.up_stride + i];
}
AK_EXPORT("silu_gate", gated_act<0>)
AK_EXPORT("gelu_gate", gated_act<1>)

// gpt-oss's clamped SwiGLU (GatedActParams: g = min(gate, L), u = clamp(up,
// -L, L), out = g * sigmoid(alpha g) * (u + 1)); grid as gated_act
kernel void swiglu_oai(device const float* gate [[buffer(0)]], device const float* up [[buffer(1)]],
                       device float* out [[buffer(2)]], constant GatedActParams& p [[buffer(AK_PARAMS)]],
                       AK_THREAD_ARGS) {
    const uint i = tgpig.x * ntg + tiitg, t = tgpig.y;
    if (i >= p.n) return;
    const float g = min(gate[(ulong)t * p.gate_stride + i], kSwigluOaiLimit);
    const float u = min(max(up[(ulong)t * p.up_stride + i], -kSwigluOaiLimit), kSwigluOaiLimit);
    out[(ulong)t * p.out_stride + i] = g / (1.0f + exp(-kSwigluOaiAlpha * g)) * (u + 1.0f);
}
AK_EXPORT_KERNEL(swiglu_oai)

// x += y over n * n_tokens floats
kernel void add_inplace(device float* x [[buffer(0)]], device const float* y [[buffer(1)]],
                        constant AddParams& p [[buffer(AK_PARAMS)]], AK_THREAD_ARGS) {
    const ulong i = (ulong)tgpig.x * ntg + tiitg;
    if (i < (ulong)p.n * p.n_tokens) x[i] += y[i];
}
AK_EXPORT_KERNEL(add_inplace)

// dst[r, :] = src[idx[r], :] (the rows of a ragged pass whose logits are
// wanted); grid (ceil(dim / threads), n_rows)
kernel void gather_rows(device const float* src [[buffer(0)]], device const int* idx [[buffer(1)]],
                        device float* dst [[buffer(2)]], constant GatherRowsParams& p [[buffer(AK_PARAMS)]],
                        AK_THREAD_ARGS) {
    const uint i = tgpig.x * ntg + tiitg, r = tgpig.y;
    if (i >= p.dim) return;
    dst[(ulong)r * p.dst_stride + i] = src[(ulong)idx[r] * p.src_stride + i];
}
AK_EXPORT_KERNEL(gather_rows)

// x = gelu(x), erf form
kernel void gelu_erf(device float* x [[buffer(0)]], constant AddParams& p [[buffer(AK_PARAMS)]], AK_THREAD_ARGS) {
    const ulong i = (ulong)tgpig.x * ntg + tiitg;
    if (i < (ulong)p.n * p.n_tokens) x[i] = 0.5f * x[i] * (1.0f + erf_f32(x[i] * 0.70710678118654752f));
}
AK_EXPORT_KERNEL(gelu_erf)

// x = cap * tanh(x / cap) (Gemma 2's final logit soft-capping)
kernel void softcap(device float* x [[buffer(0)]], constant SoftcapParams& p [[buffer(AK_PARAMS)]], AK_THREAD_ARGS) {
    const ulong i = (ulong)tgpig.x * ntg + tiitg;
    if (i < (ulong)p.n * p.n_tokens) x[i] = p.cap * tanh(x[i] * (1.0f / p.cap));
}
AK_EXPORT_KERNEL(softcap)

// x[t, :] += table[pos0 + t (- start of its sequence), :]; grid (ceil(dim / threads), n_tokens)
kernel void add_rows(device float* x [[buffer(0)]], device const float* table [[buffer(1)]],
                     device const int* seg [[buffer(2)]], constant AddRowsParams& p [[buffer(AK_PARAMS)]],
                     AK_THREAD_ARGS) {
    const uint i = tgpig.x * ntg + tiitg, t = tgpig.y;
    if (i >= p.dim) return;
    const uint row = p.segmented ? p.pos0 + t - (uint)seg[2 * t] : p.pos0 + t;
    x[(ulong)t * p.dim + i] += table[(ulong)row * p.dim + i];
}
AK_EXPORT_KERNEL(add_rows)

// col[t, c * kernel + j] = x[t * stride + j - pad, c] (0 outside); grid (ceil(channels * kernel / threads), n_out)
kernel void im2col_1d(device const float* x [[buffer(0)]], device float* col [[buffer(1)]],
                      constant Im2ColParams& p [[buffer(AK_PARAMS)]], AK_THREAD_ARGS) {
    const uint e = tgpig.x * ntg + tiitg, t = tgpig.y;
    const uint width = p.channels * p.kernel_size;
    if (e >= width) return;
    const uint c = e / p.kernel_size, j = e % p.kernel_size;
    const long src = (long)t * p.stride + j - (long)p.pad;
    const bool inside = src >= 0 && src < (long)p.in_len;
    col[(ulong)t * width + e] = inside ? x[(ulong)src * p.channels + c] : 0.0f;
}
AK_EXPORT_KERNEL(im2col_1d)
