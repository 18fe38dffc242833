#include "core/device.h"

#include "core/dispatch_table.h"
#include "core/error.h"

#include <atomic>
#include <string>
#include <chrono>
#include <vector>

namespace akunu {

uint64_t DispatchTable::next_id() {
    static std::atomic<uint64_t> counter{1};
    return counter++;
}

void Device::encode_chain(const DispatchTable& table, uint32_t pos0, int steps) {
    ReplayState st;
    for (int i = 0; i < steps; i++) {
        st.pos0 = pos0 + (uint32_t)i;
        st.token_index = (uint32_t)i;
        encode_dispatch_table(table, st);
    }
}

// Generic replay through the virtual encoding interface; backends override
// this with a tighter loop.
void Device::encode_dispatch_table(const DispatchTable& table, const ReplayState& st) {
    uint8_t params[DispatchCmd::MAX_PARAM_BYTES];
    begin_encoding();
    for (const DispatchCmd& cmd : table.commands) {
        set_pipeline(cmd.pso);
        for (int i = 0; i < cmd.buffer_count; i++) {
            set_buffer(cmd.buffers[i], replay_offset(cmd, i, st), i);
        }
        patch_params(cmd, st, params);
        set_bytes(params, cmd.param_size, cmd.param_index);
        dispatch(cmd.grid, cmd.threadgroup);
    }
    end_encoding_sync();
}

void Device::set_collective(Collective*) {
    throw Error(std::string("the ") + backend_name() + " backend cannot be a rank of a tensor-parallel model");
}

void Device::copy_buffer(Buffer dst, size_t dst_offset, Buffer src, size_t src_offset, size_t bytes) {
    std::vector<uint8_t> staging(bytes);
    read_buffer(staging.data(), src, bytes, src_offset);
    write_buffer(dst, staging.data(), bytes, dst_offset);
}

std::vector<double> Device::time_commands(const DispatchTable& table, const ReplayState& st) {
    std::vector<double> out;
    out.reserve(table.commands.size());
    DispatchTable one;
    one.transient = true;
    one.commands.resize(1);
    for (const DispatchCmd& cmd : table.commands) {
        one.commands[0] = cmd;
        one.renew_id();  // new content: a backend's compiled form of the last one must not be replayed
        out.push_back(time_table(one, st));
    }
    return out;
}

double Device::time_table(const DispatchTable& table, const ReplayState& st) {
    end_encoding_sync();  // nothing earlier still running inside the measurement
    auto t0 = std::chrono::steady_clock::now();
    encode_dispatch_table(table, st);
    end_encoding_sync();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace akunu
