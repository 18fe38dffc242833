// Gated activations, residual add, row gather, erf-GELU, learned positions
// and the 1-D convolution's columns: one thread per element (CPU twin:
// backend/cpu/kernels/elementwise.cpp).
#include "akunu_msl.h"

inline float silu(float x) { return x / (1.0f + exp(-x)); }

// tanh approximation, as ggml_gelu and Gemma's gelu_pytorch_tanh
inline float gelu_tanh(float x) {
    const float k = 0.7978845608028654f;  // sqrt(2/pi)
    return 0.5f * x * (1.0f + tanh(k * x * (1.0f + 0.044715f * x * x)));
}

// erf is not in the Metal standard library: W. J. Cody's rational
// approximations (as in most libm), accurate to float precision.
inline float erf_f32(float x) {
    const float a = fabs(x);
    float r;
    if (a < 0.84375f) {
        const float z = x * x;
        const float p = 1.28379166e-01f + z * (-3.25042107e-01f + z * (-2.84817495e-02f + z * (-5.77027029e-03f + z * -2.37630166e-05f)));
        const float q = 1.0f + z * (3.97917223e-01f + z * (6.50222499e-02f + z * (5.08130628e-03f + z * (1.32494738e-04f + z * -3.96022827e-06f))));
        return x + x * (p / q);
    } else if (a < 1.25f) {
        const float s = a - 1.0f;
        const float p = -2.36211856e-03f + s * (4.14856118e-01f + s * (-3.72207875e-01f + s * (3.18346619e-01f + s * (-1.10894694e-01f + s * (3.54783043e-02f + s * -2.16637559e-03f)))));
        const float q = 1.0f + s * (1.06420880e-01f + s * (5.40397918e-01f + s * (7.18286544e-02f + s * (1.26171219e-01f + s * (1.36370839e-02f + s * 1.19844998e-02f)))));
        r = 8.45062911e-01f + p / q;
    } else if (a < 6.0f) {
        const float z = 1.0f / (a * a);
        float p, q;
        if (a < 2.857143f) {
            p = -9.86494403e-03f + z * (-6.93858572e-01f + z * (-1.05586262e+01f + z * (-6.23753324e+01f + z * (-1.62396669e+02f + z * (-1.84605092e+02f + z * (-8.12874355e+01f + z * -9.81432934e+00f))))));
            q = 1.0f + z * (1.96512716e+01f + z * (1.37657754e+02f + z * (4.34565877e+02f + z * (6.45387271e+02f + z * (4.29008140e+02f + z * (1.08635005e+02f + z * (6.57024977e+00f + z * -6.04244152e-02f)))))));
        } else {
            p = -9.86494292e-03f + z * (-7.99283237e-01f + z * (-1.77579549e+01f + z * (-1.60636384e+02f + z * (-6.37566443e+02f + z * (-1.02509513e+03f + z * -4.83519191e+02f)))));
            q = 1.0f + z * (3.03380607e+01f + z * (3.25792512e+02f + z * (1.53672958e+03f + z * (3.19985821e+03f + z * (2.55305040e+03f + z * (4.74528541e+02f + z * -2.24409524e+01f))))));
        }
        r = 1.0f - exp(-a * a - 0.5625f) * exp(p / q) / a;
    } else {
        r = 1.0f;
    }
    return x < 0.0f ? -r : r;
}

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
