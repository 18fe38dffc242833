// Host-side guard shared by every backend's KV write and attention launch:
// whether a pass's positions fit a cache of `rows` rows (kv_ring_row,
// core/kv_layout.h). A full-context cache must hold every position; a ring
// (rows below the positions) only serves a sliding window, and needs room
// for the window of the pass's first query plus the pass's own tokens, or a
// write of this pass would overwrite a key a query of it still reads.
#pragma once
#include <cstdint>

#include "core/kernel_params.h"
#include "core/kv_layout.h"

namespace akunu {

// nullptr when the pass fits, else what is wrong (for the caller's error).
inline const char* kv_rows_problem(uint32_t rows, uint64_t pos_end, uint32_t n_tokens, uint32_t window) {
    if (rows == 0) return "the KV cache has no rows (max_ctx 0)";
    if (pos_end <= rows) return nullptr;
    if (window == 0) return "positions past the end of the KV cache (a ring of rows serves sliding-window layers only)";
    if ((uint64_t)rows + 1 < (uint64_t)window + n_tokens)
        return "the KV ring has fewer rows than the window plus the pass's tokens";
    return nullptr;
}

// A KV write of n_tokens positions into `rows` rows: positions may pass the
// rows (a ring), but a pass of more tokens than rows would write one row
// twice at once (the result undefined on a GPU).
inline const char* kv_write_rows_problem(uint32_t rows, uint32_t n_tokens) {
    if (rows == 0) return "the KV cache has no rows (max_ctx 0)";
    if (n_tokens > rows) return "a pass of more tokens than the KV ring has rows";
    return nullptr;
}

// The block types (Q8_0 / Q4_0) scale 32 values at a time: an attention
// head reads whole blocks of its cache row only if head_dim is a multiple
// of 32 (models are checked at load; this guards a kernel called directly).
inline const char* kv_head_problem(uint32_t k_type, uint32_t v_type, uint32_t head_dim) {
    if ((kv_type_is_block(k_type) || kv_type_is_block(v_type)) && head_dim % kKvBlock != 0)
        return "a Q8_0 / Q4_0 KV cache needs head_dim a multiple of 32";
    return nullptr;
}

inline const char* kv_rows_problem(const AttentionParams& p) {
    if (const char* why = kv_head_problem(p.k_type, p.v_type, p.head_dim)) return why;
    const uint64_t end = p.n_keys ? p.n_keys : (uint64_t)p.pos0 + p.n_tokens;
    return kv_rows_problem(p.max_ctx, end, p.n_tokens, p.causal && !p.segmented && !p.n_keys ? p.window : 0);
}

}  // namespace akunu
