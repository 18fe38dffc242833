// The CPU backend: buffers are host memory, pipelines are kernel function
// pointers, and a dispatch runs the kernel at once on the thread pool.
#pragma once
#include <map>
#include <memory>
#include <string>

#include "core/device.h"
#include "core/dispatch_table.h"
#include "kernels/cpu_kernel.h"
#include "thread_pool.h"

namespace akunu {

class CpuDevice : public Device {
    bool fused_decode_ = false;
    bool fused_batch_ = false;

public:
    explicit CpuDevice(int n_threads = 0);
    ~CpuDevice() override;

    const char* name() const override { return "CPU"; }
    const char* backend_name() const override { return "cpu"; }
    // Prompt tokens a pass: every weight is read once a pass, and the float
    // GEMMs keep a pass's activations in L2 (matmul.cpp kTokenBlock).
    int prefill_chunk() const override { return 256; }
    size_t total_memory() const override;
    size_t available_memory() const override;

    Pipeline get_pipeline(const std::string& name) override;
    // The fused decode tables on the CPU, for tests of the table builder
    // (AKUNU_CPU_FUSED_DECODE=1); the CPU's own tables stay unfused.
    bool fused_decode() const override { return fused_decode_; }
    // Likewise the fused batch tables (AKUNU_CPU_FUSED_BATCH=1).
    bool fused_batch() const override { return fused_batch_; }

    Buffer allocate(size_t bytes) override;
    Buffer allocate(const void* data, size_t bytes) override;
    Buffer wrap_host(const void* data, size_t bytes) override;
    void free_buffer(Buffer buf) override;
    void write_buffer(Buffer dst, const void* src, size_t bytes, size_t offset = 0) override;
    void read_buffer(void* dst, Buffer src, size_t bytes, size_t offset = 0) override;
    void copy_buffer(Buffer dst, size_t dst_offset, Buffer src, size_t src_offset, size_t bytes) override;

    void begin_encoding() override {}
    void set_pipeline(Pipeline pso) override { bound_.fn = (const CpuKernelEntry*)pso.handle; }
    void set_buffer(Buffer buf, size_t offset, int index) override;
    void set_bytes(const void* data, int size, int index) override;
    void dispatch(Dim3 grid, Dim3 threadgroup) override;
    void end_encoding_sync() override {}

    void encode_dispatch_table(const DispatchTable& table, const ReplayState& state) override;
    void set_collective(Collective* c) override { collective_ = c; }

    int n_threads() const { return pool_->size(); }

private:
    void encode_profiled(const DispatchTable& table, const ReplayState& state);
    bool profile_ = false;
    std::map<std::string, double> profile_times_;
    struct Bound {
        const CpuKernelEntry* fn = nullptr;
        uint8_t* buf[DispatchCmd::MAX_BUFFERS] = {};
        uint8_t params[DispatchCmd::MAX_PARAM_BYTES] = {};
    } bound_;
    std::unique_ptr<ThreadPool> pool_;
    Collective* collective_ = nullptr;
};

}  // namespace akunu
