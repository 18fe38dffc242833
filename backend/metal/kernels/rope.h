// The rotary angle, shared by rope / rope_rows (norm_rope.metal) and the
// fused qk_norm_rope_kv (fused.metal), so both rotate by the same float
// expression (CPU twin: backend/cpu/kernels/norm_rope.cpp).
#pragma once
#include "akunu_msl.h"

// theta_i = pos * scale * base^(-2i/d) / factor_i (factors only when given)
inline float rope_theta(float pos, uint i, uint head_dim, float base, float scale, uint has_factors,
                        device const float* factors) {
    float theta = scale * pos * pow(base, -2.0f * (float)i / (float)head_dim);
    if (has_factors) theta /= factors[i];
    return theta;
}
