// The Metal backend (book, "The Device Abstraction Layer"): buffers in unified
// memory (storageModeShared; mmapped weights wrapped without a copy when
// page-aligned), a pipeline cache keyed by MSL function and function-constant
// values, one open command buffer that commands are appended to, and chain
// decode: encode_dispatch_table only appends, so the N tokens of a chain go
// into one command buffer (positions patched per token) that runs when the
// host next reads or writes memory (or calls sync()).
// This header is plain C++ (the Objective-C objects live in the .mm file).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "chip_config.h"
#include "core/device.h"
#include "metal_launch.h"

namespace akunu {

class MetalDevice : public Device {
public:
    MetalDevice();
    ~MetalDevice() override;
    // True on a Mac with a Metal GPU.
    static bool available();

    const char* name() const override;
    const char* backend_name() const override { return "metal"; }
    size_t total_memory() const override;
    size_t available_memory() const override;

    Pipeline get_pipeline(const std::string& name) override;

    Buffer allocate(size_t bytes) override;
    Buffer allocate(const void* data, size_t bytes) override;
    Buffer wrap_host(const void* data, size_t bytes) override;
    void free_buffer(Buffer buf) override;
    void write_buffer(Buffer dst, const void* src, size_t bytes, size_t offset = 0) override;
    void read_buffer(void* dst, Buffer src, size_t bytes, size_t offset = 0) override;
    void copy_buffer(Buffer dst, size_t dst_offset, Buffer src, size_t src_offset, size_t bytes) override;

    void begin_encoding() override;
    void set_pipeline(Pipeline pso) override;
    void set_buffer(Buffer buf, size_t offset, int index) override;
    void set_bytes(const void* data, int size, int index) override;
    void dispatch(Dim3 grid, Dim3 threadgroup) override;
    void end_encoding_sync() override;
    // Commits what is encoded without waiting; sync() waits for it.
    void end_encoding_async();
    void sync();
    // Event variant: commits what is encoded with a shared-event signal and
    // returns its value; wait_event(v) blocks until the GPU has passed it
    // (the host can overlap work with a submission).
    uint64_t end_encoding_event();
    void wait_event(uint64_t value);

    int chain_length() const override { return chip_.chain_decode_chunk; }
    // Decode tables with the fused kernels (kernels/fused.metal): 4 to 6
    // dispatches a plain layer; AKUNU_METAL_FUSED_DECODE=0 turns them off.
    bool fused_decode() const override { return fused_; }
    bool fused_batch() const override { return fused_batch_; }

    void encode_dispatch_table(const DispatchTable& table, const ReplayState& state) override;
    double time_table(const DispatchTable& table, const ReplayState& state) override;

    const ChipConfig& chip() const { return chip_; }

    struct Impl;  // Objective-C state (metal_device.mm)

private:
    std::unique_ptr<Impl> impl_;
    ChipConfig chip_;
    bool fused_ = metal_fused_decode_from_env();
    bool fused_batch_ = metal_fused_batch_from_env();
};

}  // namespace akunu
