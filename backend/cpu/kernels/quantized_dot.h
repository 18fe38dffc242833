// Integer dot products for quantized weights, the way llama.cpp's CPU backend
// computes them: activations are rounded to 8 bits per block (Q8_0 blocks of 32
// for Q4_0/Q5_0/Q8_0 weights, Q8_K blocks of 256 for K-quants), then each
// weight block is unpacked to int8 and multiplied in integers. Faster than
// float dots, and numerically the same as the reference engine.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/half.h"
#include "core/quant_blocks.h"

namespace akunu {
namespace qdot {

inline int32_t dot_i8(const int8_t* a, const int8_t* b, int n) {
    int32_t s = 0;
    for (int i = 0; i < n; i++) s += (int16_t)a[i] * (int16_t)b[i];
    return s;
}

// Q8_0 activations: per 32 values, d = amax/127 (stored as f16, as ggml does), q = round(x/d).
inline void quantize_q8_0(const float* x, int K, int8_t* q, float* d) {
    for (int b = 0; b < K / 32; b++) {
        const float* xb = x + b * 32;
        float amax = 0;
        for (int j = 0; j < 32; j++) amax = std::fmax(amax, std::fabs(xb[j]));
        float db = amax / 127.0f;
        float id = db != 0.0f ? 1.0f / db : 0.0f;
        for (int j = 0; j < 32; j++) q[b * 32 + j] = (int8_t)std::nearbyint(xb[j] * id);
        d[b] = f16_to_f32(f32_to_f16(db));
    }
}

// Q8_K activations: per 256 values, scale from the signed value of largest
// magnitude (so it maps to -127 exactly), plus sums of each 16 for the K-quant mins.
inline void quantize_q8_k(const float* x, int K, int8_t* q, float* d, int16_t* bsums) {
    for (int b = 0; b < K / 256; b++) {
        const float* xb = x + b * 256;
        int8_t* qb = q + b * 256;
        float amax = 0, maxv = 0;
        for (int j = 0; j < 256; j++)
            if (std::fabs(xb[j]) > amax) { amax = std::fabs(xb[j]); maxv = xb[j]; }
        if (amax == 0) {
            d[b] = 0;
            std::memset(qb, 0, 256);
            std::memset(bsums + b * 16, 0, 32);
            continue;
        }
        const float iscale = -127.0f / maxv;
        for (int j = 0; j < 256; j++) {
            int v = (int)std::nearbyint(iscale * xb[j]);
            qb[j] = (int8_t)(v > 127 ? 127 : v);
        }
        for (int g = 0; g < 16; g++) {
            int s = 0;
            for (int j = 0; j < 16; j++) s += qb[g * 16 + j];
            bsums[b * 16 + g] = (int16_t)s;
        }
        d[b] = 1.0f / iscale;
    }
}

// One weight block times one activation block. xd is the activation scale.
inline float q8_0_block(const uint8_t* w, const int8_t* xq, float xd) {
    return blocks::h(w) * xd * (float)dot_i8((const int8_t*)(w + 2), xq, 32);
}

inline float q4_0_block(const uint8_t* w, const int8_t* xq, float xd) {
    int8_t u[32];
    const uint8_t* qs = w + 2;
    for (int j = 0; j < 16; j++) {
        u[j] = (int8_t)((qs[j] & 0xF) - 8);
        u[j + 16] = (int8_t)((qs[j] >> 4) - 8);
    }
    return blocks::h(w) * xd * (float)dot_i8(u, xq, 32);
}

inline float q5_0_block(const uint8_t* w, const int8_t* xq, float xd) {
    int8_t u[32];
    uint32_t qh;
    std::memcpy(&qh, w + 2, 4);
    const uint8_t* qs = w + 6;
    for (int j = 0; j < 16; j++) {
        u[j] = (int8_t)(((qs[j] & 0xF) | (((qh >> j) << 4) & 0x10)) - 16);
        u[j + 16] = (int8_t)(((qs[j] >> 4) | ((qh >> (j + 12)) & 0x10)) - 16);
    }
    return blocks::h(w) * xd * (float)dot_i8(u, xq, 32);
}

inline float q4_k_block(const uint8_t* w, const int8_t* xq, float xd, const int16_t* bsums) {
    const float d = blocks::h(w), dmin = blocks::h(w + 2);
    const uint8_t* scales = w + 4;
    const uint8_t* q = w + 16;
    int32_t sum_q = 0, sum_m = 0;
    int8_t u[64];
    for (int j = 0; j < 4; j++) {  // 4 chunks of 64 = two sub-blocks of 32
        for (int l = 0; l < 32; l++) {
            u[l] = (int8_t)(q[l] & 0xF);
            u[l + 32] = (int8_t)(q[l] >> 4);
        }
        uint8_t sc0, m0, sc1, m1;
        blocks::q4k_scale_min(2 * j, scales, &sc0, &m0);
        blocks::q4k_scale_min(2 * j + 1, scales, &sc1, &m1);
        sum_q += sc0 * dot_i8(u, xq + 64 * j, 32) + sc1 * dot_i8(u + 32, xq + 64 * j + 32, 32);
        sum_m += m0 * (bsums[4 * j] + bsums[4 * j + 1]) + m1 * (bsums[4 * j + 2] + bsums[4 * j + 3]);
        q += 32;
    }
    return xd * (d * (float)sum_q - dmin * (float)sum_m);
}

inline float q6_k_block(const uint8_t* w, const int8_t* xq, float xd) {
    const uint8_t* ql = w;
    const uint8_t* qh = w + 128;
    const int8_t* sc = (const int8_t*)(w + 192);
    const float d = blocks::h(w + 208);
    int8_t u[256];
    for (int n = 0; n < 256; n += 128) {
        for (int l = 0; l < 32; l++) {
            u[n + l] = (int8_t)(((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32);
            u[n + l + 32] = (int8_t)(((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
            u[n + l + 64] = (int8_t)(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
            u[n + l + 96] = (int8_t)(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
        }
        ql += 64;
        qh += 32;
    }
    int32_t sum = 0;
    for (int s = 0; s < 16; s++) sum += sc[s] * dot_i8(u + 16 * s, xq + 16 * s, 16);
    return d * xd * (float)sum;
}

}  // namespace qdot
}  // namespace akunu
