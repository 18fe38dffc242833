// Rounding to and reading from the KV cache's element types (core/kv_layout.h).
// The block rules are GGUF's reference quantizers (ggml quantize_row_q8_0_ref
// and quantize_row_q4_0_ref, gguf-py's quants), so a cache holds the numbers
// llama.cpp's -ctk / -ctv cache would. The per-value rules are AKUNU_HD: the
// CUDA writers find a block's extreme across a warp and round each value here.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/half.h"
#include "core/kv_layout.h"

namespace akunu {

AKUNU_HD inline uint16_t f32_to_bf16(float f) {
    uint32_t u;
    __builtin_memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 64);  // NaN stays NaN
    return (uint16_t)((u + (0x7fffu + ((u >> 16) & 1u))) >> 16);            // nearest, ties to even
}

// Q8_0: scale amax / 127; quants round half away from zero (roundf).
AKUNU_HD inline float kv_q8_scale(float amax) { return amax / 127.0f; }
AKUNU_HD inline int8_t kv_q8_quant(float x, float inv_scale) { return (int8_t)roundf(x * inv_scale); }
// Q4_0: scale (the value of largest magnitude, sign kept) / -8; quants 0..15
// with 8 as zero.
AKUNU_HD inline float kv_q4_scale(float extreme) { return extreme / -8.0f; }
AKUNU_HD inline uint8_t kv_q4_quant(float x, float inv_scale) {
    // x * inv_scale, then + 8.5, each rounded to float as the reference does:
    // a fused multiply-add (which compilers form from x * s + c) rounds once
    // and moves values that sit on a half step.
#if defined(__CUDA_ARCH__)
    const float t = __fadd_rn(__fmul_rn(x, inv_scale), 8.5f);
#else
    // (a volatile product: GCC at -O3 with its default -ffp-contract=fast
    // sees through casts to double and forms the fused multiply-add anyway)
    const volatile float product = x * inv_scale;
    const float t = product + 8.5f;
#endif
    const int q = (int8_t)t;
    return (uint8_t)(q < 15 ? q : 15);
}
AKUNU_HD inline float kv_inverse(float scale) { return scale != 0.0f ? 1.0f / scale : 0.0f; }
// A block type's value as every kernel reads it: scale * quant rounded to F16
// (the tensor-core prefill kernels take F16 tiles, so every path reads the
// same numbers; an F16 cache's values are F16 already).
AKUNU_HD inline float kv_block_value(float scale, int q) {
#if defined(__CUDA_ARCH__)
    // two conversion instructions, no branch: this runs for every value a
    // decode step reads (f32_to_f16's NaN path, inlined at each of them,
    // made the attention kernels' code too large for the instruction cache)
    const float x = scale * (float)q;
    uint16_t h;
    float r;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(x));
    asm("cvt.f32.f16 %0, %1;" : "=f"(r) : "h"(h));
    return r;
#else
    return f16_to_f32(f32_to_f16(scale * (float)q));
#endif
}

// One position's row of kv_dim values into `row` (kv_row_bytes bytes).
inline void kv_store_row(uint32_t t, const float* x, uint32_t kv_dim, uint8_t* row) {
    if (t == kKvF16 || t == kKvBF16) {
        uint16_t* h = reinterpret_cast<uint16_t*>(row);
        for (uint32_t i = 0; i < kv_dim; i++) h[i] = t == kKvF16 ? f32_to_f16(x[i]) : f32_to_bf16(x[i]);
        return;
    }
    uint8_t* scales = row + kv_quant_bytes(t, kv_dim);
    for (uint32_t b = 0; b < kv_dim / kKvBlock; b++) {
        const float* v = x + b * kKvBlock;
        float amax = 0.0f, extreme = 0.0f;  // (all zeros: the extreme is +0)
        for (uint32_t j = 0; j < kKvBlock; j++)
            if (amax < std::fabs(v[j])) {
                amax = std::fabs(v[j]);
                extreme = v[j];
            }
        const float d = t == kKvQ8_0 ? kv_q8_scale(amax) : kv_q4_scale(extreme);
        const float id = kv_inverse(d);
        const uint16_t dh = f32_to_f16(d);
        std::memcpy(scales + 2 * b, &dh, 2);
        if (t == kKvQ8_0) {
            int8_t* q = reinterpret_cast<int8_t*>(row) + b * kKvBlock;
            for (uint32_t j = 0; j < kKvBlock; j++) q[j] = kv_q8_quant(v[j], id);
        } else {
            uint8_t* q = row + b * kKvBlock / 2;
            for (uint32_t j = 0; j < kKvBlock / 2; j++)
                q[j] = (uint8_t)(kv_q4_quant(v[2 * j], id) | (kv_q4_quant(v[2 * j + 1], id) << 4));
        }
    }
    const uint32_t used = kv_quant_bytes(t, kv_dim) + kv_dim / kKvBlock * 2;
    std::memset(row + used, 0, kv_row_bytes(t, kv_dim) - used);  // padding: defined bytes
}

// Values [off, off + n) of a row as floats (kv_block_value for the block
// types); off and n whole blocks for the block types.
inline void kv_load(uint32_t t, const uint8_t* row, uint32_t kv_dim, uint32_t off, uint32_t n, float* out) {
    if (t == kKvF16) {
        f16_row_to_f32(reinterpret_cast<const uint16_t*>(row) + off, out, (int)n);
        return;
    }
    if (t == kKvBF16) {
        const uint16_t* h = reinterpret_cast<const uint16_t*>(row) + off;
        for (uint32_t i = 0; i < n; i++) out[i] = bf16_to_f32(h[i]);
        return;
    }
    const uint8_t* scales = row + kv_quant_bytes(t, kv_dim);
    for (uint32_t b = off / kKvBlock; b < (off + n) / kKvBlock; b++) {
        uint16_t dh;
        std::memcpy(&dh, scales + 2 * b, 2);
        const float d = f16_to_f32(dh);
        float* o = out + (b * kKvBlock - off);
        if (t == kKvQ8_0) {
            const int8_t* q = reinterpret_cast<const int8_t*>(row) + b * kKvBlock;
            for (uint32_t j = 0; j < kKvBlock; j++) o[j] = kv_block_value(d, q[j]);
        } else {
            const uint8_t* q = row + b * kKvBlock / 2;
            for (uint32_t j = 0; j < kKvBlock / 2; j++) {
                o[2 * j] = kv_block_value(d, (int)(q[j] & 15) - 8);
                o[2 * j + 1] = kv_block_value(d, (int)(q[j] >> 4) - 8);
            }
        }
    }
}

}  // namespace akunu
