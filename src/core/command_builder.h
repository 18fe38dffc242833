// Fluent helper that appends one DispatchCmd to a table (the book's
// CmdBuilder), shared by the decoder and encoder table builders.
#pragma once
#include <cstring>
#include <string>

#include "core/device.h"
#include "core/dispatch_table.h"

namespace akunu {

class Cmd {
public:
    Cmd(DispatchTable& t, Device& d, const char* kernel, const char* label) : table_(t) {
        cmd_.pso = d.get_pipeline(kernel);
        label_ = label;
    }
    Cmd& buf(Buffer b, size_t offset = 0) {
        cmd_.buffers[cmd_.buffer_count] = b;
        cmd_.offsets[cmd_.buffer_count] = (uint32_t)offset;
        cmd_.buffer_count++;
        return *this;
    }
    template <typename P>
    Cmd& params(const P& p) {
        static_assert(sizeof(P) <= DispatchCmd::MAX_PARAM_BYTES, "params too large");
        std::memcpy(cmd_.param_bytes, &p, sizeof(P));
        cmd_.param_size = (int)sizeof(P);
        cmd_.param_index = cmd_.buffer_count;
        return *this;
    }
    Cmd& patch_n(size_t off) { cmd_.patch_n_tokens = (int16_t)off; return *this; }
    Cmd& patch_pos(size_t off) { cmd_.patch_pos0 = (int16_t)off; return *this; }
    Cmd& patch_row0(size_t off) { cmd_.patch_row0 = (int16_t)off; return *this; }
    Cmd& patch_n_out(size_t off) { cmd_.patch_n_out = (int16_t)off; return *this; }
    Cmd& patch_n_generated(size_t off) { cmd_.patch_n_generated = (int16_t)off; return *this; }
    Cmd& patch_n_out_generated(size_t off) { cmd_.patch_n_out_generated = (int16_t)off; return *this; }
    Cmd& patch_token_buffer(int index) { cmd_.patch_token_buffer = (int8_t)index; return *this; }
    Cmd& head() { cmd_.is_head = true; return *this; }
    Cmd& patch_rank(size_t off) { cmd_.patch_rank = (int16_t)off; return *this; }
    void emit() {
        table_.commands.push_back(cmd_);
        table_.labels.push_back(label_);
    }

private:
    DispatchTable& table_;
    DispatchCmd cmd_;
    std::string label_;
};

}  // namespace akunu
