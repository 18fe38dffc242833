// Per-layer K and V caches, allocated once at load for n_ctx positions
// (book, "KV Cache Design"). Layout: [row][kv_head * head_dim values in the
// cache's element type] (core/kv_layout.h); F16 unless the model was loaded
// with another KV type (K and V apart). A sliding-window layer may hold a
// ring of fewer rows (layer_rows): position p at row p % rows
// (kv_ring_row), the window's keys always among them.
#pragma once
#include <vector>

#include "core/device.h"
#include "core/kv_layout.h"

namespace akunu {

struct KVCache {
    int n_ctx = 0;
    int kv_dim = 0;
    uint32_t k_type = kKvF16, v_type = kKvF16;
    std::vector<Buffer> k, v;
    std::vector<int> rows;  // per layer: n_ctx, or a ring's rows
    // F16 rows of one layer for a typed cache on a device that stages them
    // (Device::stages_typed_kv); empty otherwise.
    Buffer stage_k, stage_v;

    // layer_rows: rows of each layer (empty: n_ctx for every layer).
    void allocate(Device& dev, int n_layers, int ctx, int kv_dim_, uint32_t k_type_ = kKvF16,
                  uint32_t v_type_ = kKvF16, const std::vector<int>& layer_rows = {}) {
        n_ctx = ctx;
        kv_dim = kv_dim_;
        k_type = k_type_;
        v_type = v_type_;
        rows = layer_rows.empty() ? std::vector<int>((size_t)n_layers, ctx) : layer_rows;
        for (int l = 0; l < n_layers; l++) {
            k.push_back(dev.allocate((size_t)rows[(size_t)l] * kv_row_bytes(k_type, (uint32_t)kv_dim)));
            v.push_back(dev.allocate((size_t)rows[(size_t)l] * kv_row_bytes(v_type, (uint32_t)kv_dim)));
        }
        if ((k_type != kKvF16 || v_type != kKvF16) && dev.stages_typed_kv()) {
            stage_k = dev.allocate(stage_bytes());
            stage_v = dev.allocate(stage_bytes());
        }
    }
    void release(Device& dev) {
        for (Buffer b : k) dev.free_buffer(b);
        for (Buffer b : v) dev.free_buffer(b);
        if (stage_k.handle) dev.free_buffer(stage_k);
        if (stage_v.handle) dev.free_buffer(stage_v);
        stage_k = stage_v = Buffer{};
        k.clear();
        v.clear();
        rows.clear();
    }
    // Rows of layer l (the max_ctx its KV writes and attention are given).
    uint32_t rows_of(int l) const { return (uint32_t)rows[(size_t)l]; }
    size_t stage_bytes() const { return (size_t)n_ctx * kv_dim * 2; }
    size_t bytes() const {
        size_t all_rows = 0;
        for (int r : rows) all_rows += (size_t)r;
        return all_rows * bytes_per_layer_token() + (stage_k.handle ? 2 * stage_bytes() : 0);
    }
    // K and V bytes of one position in one layer.
    size_t bytes_per_layer_token() const {
        return (size_t)kv_row_bytes(k_type, (uint32_t)kv_dim) + kv_row_bytes(v_type, (uint32_t)kv_dim);
    }
};

}  // namespace akunu
