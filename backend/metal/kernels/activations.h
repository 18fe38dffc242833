// The activations shared by the element-wise kernels and the fused gated
// GEMV (fused.metal): one definition, so gate + up + act in one kernel gives
// what silu_gate / gelu_gate give after two GEMVs (CPU twin:
// backend/cpu/kernels/elementwise.cpp).
#pragma once
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
