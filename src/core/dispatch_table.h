// A flat, precompiled list of commands for one forward pass (book Part V,
// "The Dispatch Table"). Built once at load; replay only patches the few
// position-dependent fields named by the patch offsets below.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/device.h"

namespace akunu {

struct DispatchCmd {
    static constexpr int MAX_BUFFERS = 10;
    static constexpr int MAX_PARAM_BYTES = 80;

    Pipeline pso;
    Buffer buffers[MAX_BUFFERS];
    uint32_t offsets[MAX_BUFFERS] = {};
    int buffer_count = 0;

    uint8_t param_bytes[MAX_PARAM_BYTES] = {};
    int param_size = 0;
    int param_index = 0;

    Dim3 grid;
    Dim3 threadgroup;

    // Patch points: byte offsets into param_bytes (or -1). Replay writes
    // ReplayState values there, so one table serves every position.
    int16_t patch_n_tokens = -1;  // uint32 <- n_tokens (1 for the head in last-row mode)
    int16_t patch_pos0 = -1;      // uint32 <- pos0
    int16_t patch_row0 = -1;      // uint32 <- n_tokens-1 in last-row mode, else 0
    int16_t patch_n_out = -1;     // uint32 <- n_out (the gathered rows of a ragged batch pass)
    int16_t patch_n_generated = -1;      // uint32 <- n_generated
    int16_t patch_n_out_generated = -1;  // uint32 <- n_out_generated
    int8_t patch_token_buffer = -1;  // buffer index whose offset += 4 * token_index
    // Tensor parallelism: the uint32 at this offset is multiplied by the rank
    // when a tensor-parallel device gives each rank its copy of the table
    // (a rank's first expert); -1: none.
    int16_t patch_rank = -1;
    bool is_head = false;         // part of the output head (last-row mode applies)
};

struct DispatchTable {
    std::vector<DispatchCmd> commands;
    std::vector<std::string> labels;  // cold: one per command, for profiling
    // Identity of this content: backends that keep a compiled form of a table
    // (the CUDA graph of a decode step) key it by this. Whoever edits commands
    // after building calls renew_id(), so a stale compiled form is never replayed.
    uint64_t id = next_id();
    // Rebuilt for each use (a batch step's draws, a profiled command): a
    // backend keeps no compiled form or translation of it.
    bool transient = false;

    void renew_id() { id = next_id(); }
    static uint64_t next_id();
};

// Byte offset of buffer `i` of `cmd` for `state`: the command's own offset,
// plus the chain-decode token slot for the token-id buffer.
inline size_t replay_offset(const DispatchCmd& cmd, int i, const ReplayState& st) {
    return cmd.offsets[i] + (i == cmd.patch_token_buffer ? 4u * st.token_index : 0u);
}

// Where buffer `i` of `cmd` starts for `state`, given the buffer's base address
// on the device (host contents, a device pointer): nullptr for an unbound slot.
inline uint8_t* replay_address(const DispatchCmd& cmd, int i, const ReplayState& st, void* base) {
    return base ? static_cast<uint8_t*>(base) + replay_offset(cmd, i, st) : nullptr;
}

// Writes the patched parameter bytes of `cmd` for `state` into `out`.
inline void patch_params(const DispatchCmd& cmd, const ReplayState& st, uint8_t* out) {
    std::memcpy(out, cmd.param_bytes, (size_t)cmd.param_size);
    bool last = st.last_row_only && cmd.is_head;
    uint32_t n = last ? 1u : st.n_tokens;
    uint32_t row0 = last ? st.n_tokens - 1 : 0u;
    if (cmd.patch_n_tokens >= 0) std::memcpy(out + cmd.patch_n_tokens, &n, 4);
    if (cmd.patch_pos0 >= 0) std::memcpy(out + cmd.patch_pos0, &st.pos0, 4);
    if (cmd.patch_row0 >= 0) std::memcpy(out + cmd.patch_row0, &row0, 4);
    if (cmd.patch_n_out >= 0) std::memcpy(out + cmd.patch_n_out, &st.n_out, 4);
    if (cmd.patch_n_generated >= 0) std::memcpy(out + cmd.patch_n_generated, &st.n_generated, 4);
    if (cmd.patch_n_out_generated >= 0) std::memcpy(out + cmd.patch_n_out_generated, &st.n_out_generated, 4);
}

}  // namespace akunu
