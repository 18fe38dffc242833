// Reading and writing rows of the KV cache in its element type
// (core/kv_layout.h: F16, BF16, or Q8_0 / Q4_0 as a quant plane then an F16
// scale plane a row). The rounding rules are core/kv_codec.h's, the CPU twin's,
// so a row written here has the CPU's bytes: a block type's 32 values are
// rounded by one warp (its extreme found by shuffles, the first lane of the
// largest magnitude for Q4_0's signed extreme, as the CPU's scan finds it).
#pragma once
#include <cuda_fp16.h>

#include <string>

#include "core/error.h"
#include "core/half.h"
#include "core/kv_codec.h"
#include "core/kv_layout.h"
#include "core/kv_rows_check.h"

namespace akunu {
namespace kv_cache {

constexpr unsigned kFull = 0xffffffffu;

// Row `row` of a cache of rows of `kv_dim` values of type `t`: a position's
// ring row (kv_ring_row, core/kv_layout.h) or a paged pool row (paged_pool.cuh).
__device__ __forceinline__ uint8_t* row_at(uint8_t* cache, uint32_t t, uint32_t kv_dim, size_t row) {
    return cache + row * kv_row_bytes(t, kv_dim);
}
__device__ __forceinline__ const uint8_t* row_at(const uint8_t* cache, uint32_t t, uint32_t kv_dim, size_t row) {
    return cache + row * kv_row_bytes(t, kv_dim);
}

// The ring row of the position j after the one at row `row0`, in a cache of
// `rows` rows (kv_ring_row of both), for j < rows: the keys a query sees
// are no more than the rows, so their span wraps at most once and needs no
// division. Unsigned r - rows wraps above r exactly when r < rows, so the
// min is the row: one add and one min a key (on a full-context cache, row0 + j).
__device__ __forceinline__ uint32_t ring_add(uint32_t row0, uint32_t j, uint32_t rows) {
    const uint32_t r = row0 + j;
    return min(r, r - rows);
}

// Host side, before a launch that writes positions to their ring rows
// (core/kv_rows_check.h: positions may pass max_ctx, a pass may not have
// more tokens than rows).
inline void check_ring_write(const char* what, uint32_t max_ctx, uint32_t n_tokens) {
    if (const char* problem = kv_write_rows_problem(max_ctx, n_tokens)) throw Error(std::string(what) + ": " + problem);
}

// Value i of a row, as a float.
__device__ __forceinline__ float load(uint32_t t, const uint8_t* row, uint32_t kv_dim, uint32_t i) {
    switch (t) {
        case kKvF16: return f16_to_f32(reinterpret_cast<const uint16_t*>(row)[i]);
        case kKvBF16: return bf16_to_f32(reinterpret_cast<const uint16_t*>(row)[i]);
        case kKvQ8_0: {
            const float d = f16_to_f32(reinterpret_cast<const uint16_t*>(row + kv_dim)[i / kKvBlock]);
            return kv_block_value(d, reinterpret_cast<const int8_t*>(row)[i]);
        }
        default: {
            const float d = f16_to_f32(reinterpret_cast<const uint16_t*>(row + kv_dim / 2)[i / kKvBlock]);
            const uint8_t b = row[i / 2];
            return kv_block_value(d, (int)((i & 1) ? b >> 4 : b & 15) - 8);
        }
    }
}

// x rounded to F16 and back (the CPU's rounding of Q and of the block
// types' values), in two instructions with no branch.
__device__ __forceinline__ float round_f16(float x) {
    uint16_t h;
    float r;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(x));
    asm("cvt.f32.f16 %0, %1;" : "=f"(r) : "h"(h));
    return r;
}

// Values i .. i + 7 of a row (i a multiple of 8) as floats, in one load each
// of the quants (16, 8 or 4 bytes) and, for the block types, one of the scale.
__device__ __forceinline__ void load8(uint32_t t, const uint8_t* row, uint32_t kv_dim, uint32_t i, float* out) {
    if (t == kKvF16 || t == kKvBF16) {
        const uint4 w = *reinterpret_cast<const uint4*>(row + 2 * (size_t)i);
        const uint16_t* h = reinterpret_cast<const uint16_t*>(&w);
#pragma unroll
        for (int j = 0; j < 8; j++) out[j] = t == kKvF16 ? f16_to_f32(h[j]) : bf16_to_f32(h[j]);
    } else if (t == kKvQ8_0) {
        const float d = f16_to_f32(reinterpret_cast<const uint16_t*>(row + kv_dim)[i / kKvBlock]);
        const uint2 w = *reinterpret_cast<const uint2*>(row + i);
        const int8_t* q = reinterpret_cast<const int8_t*>(&w);
#pragma unroll
        for (int j = 0; j < 8; j++) out[j] = kv_block_value(d, q[j]);
    } else {
        const float d = f16_to_f32(reinterpret_cast<const uint16_t*>(row + kv_dim / 2)[i / kKvBlock]);
        const uint32_t w = *reinterpret_cast<const uint32_t*>(row + i / 2);
#pragma unroll
        for (int j = 0; j < 4; j++) {
            out[2 * j] = kv_block_value(d, (int)((w >> (8 * j)) & 15u) - 8);
            out[2 * j + 1] = kv_block_value(d, (int)((w >> (8 * j + 4)) & 15u) - 8);
        }
    }
}

// Values i .. i + 7 of a row (i a multiple of 8) as 8 F16 values (the F16
// cache's bits as they are; other types converted, for tensor-core tiles).
__device__ __forceinline__ uint4 load8_f16(uint32_t t, const uint8_t* row, uint32_t kv_dim, uint32_t i) {
    if (t == kKvF16) return *reinterpret_cast<const uint4*>(row + 2 * (size_t)i);
    float f[8];
    load8(t, row, kv_dim, i, f);
    uint4 w;
    uint16_t* h = reinterpret_cast<uint16_t*>(&w);
#pragma unroll
    for (int j = 0; j < 8; j++) h[j] = f32_to_f16(f[j]);
    return w;
}

// Element b * 32 + lane of a row, written by a whole warp (every lane, one
// block b): lane holds value x. The last block's lane 0 zeroes the row's
// padding, as the CPU does.
__device__ __forceinline__ void store_block_warp(uint32_t t, uint8_t* row, uint32_t kv_dim, uint32_t b, float x) {
    const uint32_t lane = threadIdx.x % 32, i = b * kKvBlock + lane;
    if (t == kKvF16 || t == kKvBF16) {
        reinterpret_cast<uint16_t*>(row)[i] = t == kKvF16 ? f32_to_f16(x) : f32_to_bf16(x);
        return;
    }
    float amax = fabsf(x);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(kFull, amax, o));
    float d;
    if (t == kKvQ8_0) {
        d = kv_q8_scale(amax);
    } else {
        // the first value of the largest magnitude, as the CPU's scan finds it
        // (all zeros: +0, so a block of -0 gets the CPU's scale sign)
        const int first = __ffs(__ballot_sync(kFull, fabsf(x) == amax)) - 1;
        const float extreme = __shfl_sync(kFull, x, first);
        d = kv_q4_scale(amax > 0.0f ? extreme : 0.0f);
    }
    const float id = kv_inverse(d);
    const uint32_t quant = kv_quant_bytes(t, kv_dim);
    if (t == kKvQ8_0) {
        reinterpret_cast<int8_t*>(row)[i] = kv_q8_quant(x, id);
    } else {
        const uint32_t q = kv_q4_quant(x, id);
        const uint32_t hi = __shfl_down_sync(kFull, q, 1);
        if (lane % 2 == 0) row[i / 2] = (uint8_t)(q | (hi << 4));
    }
    if (lane == 0) {
        reinterpret_cast<uint16_t*>(row + quant)[b] = f32_to_f16(d);
        if (b + 1 == kv_dim / kKvBlock)
            for (uint32_t at = quant + kv_dim / kKvBlock * 2; at < kv_row_bytes(t, kv_dim); at++) row[at] = 0;
    }
}

// Values [first, first + n) of a row from src[0 .. n), by the whole thread
// block (every thread calls; n and first whole blocks for the block types):
// 16-bit types a value a thread, block types a 32-value block a warp.
__device__ __forceinline__ void store_span_block(uint32_t t, uint8_t* row, uint32_t kv_dim, uint32_t first,
                                                 uint32_t n, const float* src) {
    if (t == kKvF16 || t == kKvBF16) {
        uint16_t* h = reinterpret_cast<uint16_t*>(row) + first;
        for (uint32_t i = threadIdx.x; i < n; i += blockDim.x) h[i] = t == kKvF16 ? f32_to_f16(src[i]) : f32_to_bf16(src[i]);
        return;
    }
    const uint32_t warp = threadIdx.x / 32, lane = threadIdx.x % 32, n_warps = blockDim.x / 32;
    for (uint32_t b = warp; b < n / kKvBlock; b += n_warps)
        store_block_warp(t, row, kv_dim, first / kKvBlock + b, src[b * kKvBlock + lane]);
}

}  // namespace kv_cache
}  // namespace akunu
