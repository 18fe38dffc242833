// Element types of the KV cache (llama.cpp's -ctk / -ctv, chosen apart for K
// and V) and how one cached position's row of kv_dim values is laid out.
//
// F16 / BF16: kv_dim 2-byte values. Q8_0 / Q4_0: the values of GGUF's blocks
// of 32 (the same numbers llama.cpp's cache holds), stored as planes inside
// the row so that GPU loads stay 16-byte aligned:
//   Q8_0: [kv_dim int8 quants][kv_dim / 32 F16 scales], value = scale * q
//   Q4_0: [kv_dim / 2 bytes, value 2i in the low nibble of byte i, 2i + 1 in
//          the high one][kv_dim / 32 F16 scales], value = scale * (nibble - 8)
// and the row padded to 16 bytes. A head's slice [h * head_dim, + head_dim)
// is whole blocks (head_dim % 32 == 0 for the block types, checked at load).
// Plain 4-byte enum values and arithmetic only: included by the CPU and CUDA
// kernels and by the Metal kernels (AKUNU_MSL).
#pragma once
#if !defined(AKUNU_MSL)
#include <cstddef>
#include <cstdint>
#endif

#if defined(__CUDACC__)
#define AKUNU_KV_HD __host__ __device__
#else
#define AKUNU_KV_HD
#endif

namespace akunu {

// Zero is F16, so parameter structs that never set a type read the default cache.
enum KvType : uint32_t { kKvF16 = 0, kKvBF16 = 1, kKvQ8_0 = 2, kKvQ4_0 = 3, kKvTypeCount = 4 };

constexpr uint32_t kKvBlock = 32;  // values per scale in the block types

AKUNU_KV_HD inline bool kv_type_is_block(uint32_t t) { return t == kKvQ8_0 || t == kKvQ4_0; }

// Bytes of the quant plane (before the scales) for n values.
AKUNU_KV_HD inline uint32_t kv_quant_bytes(uint32_t t, uint32_t n) {
    return t == kKvQ8_0 ? n : t == kKvQ4_0 ? n / 2 : 2 * n;
}

// Bytes one position takes for a row of kv_dim values (16-byte multiple for
// the block types; plain 2 * kv_dim for the 16-bit types, as the F16 cache always was).
AKUNU_KV_HD inline uint32_t kv_row_bytes(uint32_t t, uint32_t kv_dim) {
    if (!kv_type_is_block(t)) return 2 * kv_dim;
    const uint32_t b = kv_quant_bytes(t, kv_dim) + kv_dim / kKvBlock * 2;
    return (b + 15u) & ~15u;
}

// The row of a cache of `rows` rows that holds position `pos`. A layer that
// sees only a sliding window keeps a ring of window + (one pass) rows, so
// position p lives at row p % rows and a new position overwrites one the
// window has left; a full-context layer has rows = n_ctx > p, where this is
// p itself (the branch every full-context read takes, no division).
AKUNU_KV_HD inline uint32_t kv_ring_row(uint32_t pos, uint32_t rows) { return pos < rows ? pos : pos % rows; }

}  // namespace akunu
