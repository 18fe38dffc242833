// Per-layer K and V caches in F16, allocated once at load for n_ctx positions
// (book, "KV Cache Design"). Layout: [position][kv_head * head_dim].
#pragma once
#include <vector>

#include "core/device.h"

namespace akunu {

struct KVCache {
    int n_ctx = 0;
    int kv_dim = 0;
    std::vector<Buffer> k, v;

    void allocate(Device& dev, int n_layers, int ctx, int kv_dim_) {
        n_ctx = ctx;
        kv_dim = kv_dim_;
        for (int l = 0; l < n_layers; l++) {
            k.push_back(dev.allocate((size_t)ctx * kv_dim * 2));
            v.push_back(dev.allocate((size_t)ctx * kv_dim * 2));
        }
    }
    void release(Device& dev) {
        for (Buffer b : k) dev.free_buffer(b);
        for (Buffer b : v) dev.free_buffer(b);
        k.clear();
        v.clear();
    }
    size_t bytes() const { return 2 * k.size() * (size_t)n_ctx * kv_dim * 2; }
};

}  // namespace akunu
