#include "core/device.h"

#include "core/dispatch_table.h"

namespace akunu {

// Generic replay through the virtual encoding interface; backends override
// this with a tighter loop.
void Device::encode_dispatch_table(const DispatchTable& table, const ReplayState& st) {
    uint8_t params[DispatchCmd::MAX_PARAM_BYTES];
    begin_encoding();
    for (const DispatchCmd& cmd : table.commands) {
        set_pipeline(cmd.pso);
        for (int i = 0; i < cmd.buffer_count; i++) {
            size_t off = cmd.offsets[i] + (i == cmd.patch_token_buffer ? 4u * st.token_index : 0u);
            set_buffer(cmd.buffers[i], off, i);
        }
        patch_params(cmd, st, params);
        set_bytes(params, cmd.param_size, cmd.param_index);
        dispatch(cmd.grid, cmd.threadgroup);
    }
    end_encoding_sync();
}

}  // namespace akunu
