// The paged KV cache of batched decode (continuous batching): per layer one
// K and one V pool of n_blocks * block_size rows, laid out as the
// contiguous cache (rows in the K / V element types, core/kv_layout.h); each sequence owns a list of blocks (its row of the block
// table, on the device), so memory follows the tokens in use rather than
// n_ctx per sequence. Kernels find position p of sequence s at pool row
// tables[s * max_blocks + p / block_size] * block_size + p % block_size.
#pragma once
#include <vector>

#include "cache/owned_buffers.h"
#include "core/device.h"
#include "core/kv_layout.h"

namespace akunu {

struct PagedKVCache {
    int n_blocks = 0;
    int block_size = 0;
    int max_seqs = 0;
    int max_blocks = 0;  // block-table row length: blocks of the longest sequence (n_ctx)
    int kv_dim = 0;
    uint32_t k_type = kKvF16, v_type = kKvF16;
    std::vector<Buffer> k, v;
    Buffer tables;  // int32 [max_seqs][max_blocks]

    void allocate(Device& d, int n_layers, int blocks, int bsize, int seqs, int n_ctx, int kv_dim_,
                  uint32_t k_type_ = kKvF16, uint32_t v_type_ = kKvF16) {
        n_blocks = blocks;
        block_size = bsize;
        max_seqs = seqs;
        max_blocks = (n_ctx + bsize - 1) / bsize;
        kv_dim = kv_dim_;
        k_type = k_type_;
        v_type = v_type_;
        const size_t rows = (size_t)blocks * bsize;
        for (int l = 0; l < n_layers; l++) {
            k.push_back(owned_.allocate(d, rows * kv_row_bytes(k_type, (uint32_t)kv_dim_)));
            v.push_back(owned_.allocate(d, rows * kv_row_bytes(v_type, (uint32_t)kv_dim_)));
        }
        tables = owned_.allocate(d, (size_t)seqs * max_blocks * 4);
    }
    void release(Device& d) {
        owned_.release(d);
        k.clear();
        v.clear();
    }
    size_t bytes() const { return owned_.bytes(); }
    // KV bytes one token takes across all layers.
    static size_t bytes_per_token(int n_layers, int kv_dim_, uint32_t k_type_, uint32_t v_type_) {
        return (size_t)n_layers * (kv_row_bytes(k_type_, (uint32_t)kv_dim_) + kv_row_bytes(v_type_, (uint32_t)kv_dim_));
    }

private:
    OwnedBuffers owned_;
};

}  // namespace akunu
