// The KV cache's element types on Metal: F16, BF16, Q8_0, Q4_0, K and V
// chosen apart. The row layout is core/kv_layout.h (shared with the CPU and
// CUDA); the rounding rules are the CPU's core/kv_codec.h (GGUF's reference
// quantizers), restated here in MSL so that a Metal cache holds the CPU's
// bytes: Q8_0 scale amax / 127 with quants rounded half away from zero; Q4_0
// scale (the value of largest magnitude, the first on ties) / -8 with quants
// min(15, trunc(x / scale + 8.5)); scales stored as F16; BF16 nearest-even;
// the row's padding zero. A block type's value is read as the CPU's
// kv_block_value: F16 scale * quant rounded to F16 (CUDA's tensor-core
// prefill takes F16 tiles, so every kernel on every backend reads the same
// numbers).
//
// Writers of the block types give a block's 32 values to one SIMD group, one
// value a lane, and reduce the block's extreme with SIMD-group functions; the
// callers' geometry guarantees it (a row's kv_dim and a head's head_dim are
// multiples of 32 for those types, and so are the threadgroup sizes).
#pragma once
#include "akunu_msl.h"
#include "core/kv_layout.h"

// Bit for bit the CPU's f32_to_bf16: nearest, ties to even; NaN stays a quiet NaN.
inline ushort kv_f32_to_bf16(float f) {
    const uint u = as_type<uint>(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return ushort((u >> 16) | 64u);
    return ushort((u + (0x7fffu + ((u >> 16) & 1u))) >> 16);
}

// F16 scale of block b of a row (block types).
inline float kv_block_scale(uint t, device const uint8_t* row, uint kv_dim, uint b) {
    return float(((device const half*)(row + kv_quant_bytes(t, kv_dim)))[b]);
}

// Quant i of a block row (Q8_0: int8; Q4_0: its nibble - 8).
inline int kv_block_quant(uint t, device const uint8_t* row, uint i) {
    if (t == kKvQ8_0) return int(((device const char*)row)[i]);
    const uint byte = row[i / 2];
    return int((i & 1) ? byte >> 4 : byte & 15u) - 8;
}

// A block value as every kernel reads it (kv_codec.h kv_block_value).
inline float kv_block_value(float scale, int q) { return round_f16(scale * float(q)); }

// Value i of a row, for any type. F16 is the plain half load the F16 cache
// always used.
inline float kv_value(uint t, device const uint8_t* row, uint kv_dim, uint i) {
    if (t == kKvF16) return float(((device const half*)row)[i]);
    if (t == kKvBF16) return bf16_to_f32(((device const ushort*)row)[i]);
    return kv_block_value(kv_block_scale(t, row, kv_dim, i / kKvBlock), kv_block_quant(t, row, i));
}

// The value a thread stores: x is value i of the row (i % 32 == lane for the
// block types, the other 31 values of i's block held by the other lanes of
// the SIMD group, all of them calling this together).
inline void kv_store(uint t, device uint8_t* row, uint kv_dim, uint i, float x, uint lane) {
    if (t == kKvF16) {
        ((device half*)row)[i] = half(x);
        return;
    }
    if (t == kKvBF16) {
        ((device ushort*)row)[i] = kv_f32_to_bf16(x);
        return;
    }
    // The CPU scans the block with amax < |v|: NaN never becomes the extreme,
    // and on ties the first value of the largest magnitude wins.
    const float ax = isnan(x) ? 0.0f : fabs(x);
    const float amax = simd_max(ax);
    float d;
    if (t == kKvQ8_0) {
        d = amax / 127.0f;
    } else {
        const uint first = simd_min(ax == amax ? lane : 32u);
        const float extreme = simd_shuffle(x, ushort(first));
        // an all-zero (or all-NaN) block keeps the CPU's initial extreme +0,
        // whatever the sign of the zero in the first lane
        d = (amax == 0.0f ? 0.0f : extreme) / -8.0f;
    }
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const uint b = i / kKvBlock;
    if (lane == 0) ((device half*)(row + kv_quant_bytes(t, kv_dim)))[b] = half(d);
    if (t == kKvQ8_0) {
        ((device char*)row)[i] = char(round(x * id));
        return;
    }
    // the product rounded to float before the add, as the CPU (two statements:
    // the compiler's default contraction fuses within one expression only)
    const float scaled = x * id;
    const float shifted = scaled + 8.5f;
    const int q = min(int(shifted), 15);
    const int hi = simd_shuffle_down(q, ushort(1));  // value i + 1 goes in the high nibble
    if ((lane & 1) == 0) row[i / 2] = uint8_t(q | (hi << 4));
}

// Zeroes the bytes past a block row's scales (up to the 16-byte row size), so
// the cache holds defined bytes, the CPU's. One thread a row calls it.
inline void kv_zero_padding(uint t, device uint8_t* row, uint kv_dim) {
    if (!kv_type_is_block(t)) return;
    const uint used = kv_quant_bytes(t, kv_dim) + kv_dim / kKvBlock * 2;
    for (uint j = used; j < kv_row_bytes(t, kv_dim); j++) row[j] = 0;
}
