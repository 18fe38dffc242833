// The buffers a group allocated, so it can free them and report their size
// (shared by the scratch and sampler buffer groups).
#pragma once
#include <vector>

#include "core/device.h"

namespace akunu {

class OwnedBuffers {
public:
    Buffer allocate(Device& d, size_t bytes) {
        Buffer b = d.allocate(bytes);
        all_.push_back(b);
        return b;
    }
    void release(Device& d) {
        for (Buffer b : all_) d.free_buffer(b);
        all_.clear();
    }
    size_t bytes() const {
        size_t s = 0;
        for (const Buffer& b : all_) s += b.size;
        return s;
    }

private:
    std::vector<Buffer> all_;
};

}  // namespace akunu
