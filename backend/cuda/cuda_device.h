// The CUDA backend: buffers are device memory (weights uploaded once at
// load), pipelines are host launchers, and a dispatch table is replayed as a
// stream of asynchronous kernel launches; reads synchronize.
#pragma once
#include <cuda_runtime.h>

#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/dispatch_table.h"
#include "cuda_tuning.h"
#include "kernels/cuda_kernel.h"
#include "kernels/gemm_blas.h"

namespace akunu {

class NcclCollective;  // nccl_collective.h

class CudaDevice : public Device {
public:
    explicit CudaDevice(int ordinal = 0);
    ~CudaDevice() override;

    // Whether a usable GPU is visible (for "auto" and clear errors).
    static bool available(std::string* why = nullptr);

    const char* name() const override { return name_.c_str(); }
    const char* backend_name() const override { return "cuda"; }
    size_t total_memory() const override;
    size_t available_memory() const override;

    Pipeline get_pipeline(const std::string& name) override;

    Buffer allocate(size_t bytes) override;
    Buffer allocate(const void* data, size_t bytes) override;
    Buffer wrap_host(const void* data, size_t bytes) override { return allocate(data, bytes); }
    void free_buffer(Buffer buf) override;
    uint32_t weight_layout(uint32_t dtype, uint64_t rows, uint64_t cols) const override;
    void write_buffer(Buffer dst, const void* src, size_t bytes, size_t offset = 0) override;
    void read_buffer(void* dst, Buffer src, size_t bytes, size_t offset = 0) override;
    void copy_buffer(Buffer dst, size_t dst_offset, Buffer src, size_t src_offset, size_t bytes) override;

    void begin_encoding() override {}
    void set_pipeline(Pipeline pso) override { bound_.fn = (const CudaKernelEntry*)pso.handle; }
    void set_buffer(Buffer buf, size_t offset, int index) override;
    void set_bytes(const void* data, int size, int index) override;
    void dispatch(Dim3 grid, Dim3 threadgroup) override;
    void end_encoding_sync() override { sync(); }

    bool fused_decode() const override { return true; }
    bool fused_batch() const override { return tuning_.fused_batch; }
    void set_batch_rows(int max_rows) override;
    bool stages_typed_kv() const override { return true; }
    int prefill_chunk() const override { return 512; }
    void encode_dispatch_table(const DispatchTable& table, const ReplayState& state) override;
    void encode_chain(const DispatchTable& table, uint32_t pos0, int steps) override;
    void encode_decode_pass(const DispatchTable& table, const ReplayState& state) override;
    double time_table(const DispatchTable& table, const ReplayState& state) override;
    // Tensor parallelism: `c` must be this GPU's NCCL collective
    // (make_nccl_collectives); the collective commands (kernels/collective.cu)
    // enqueue through it. nullptr: not a rank.
    void set_collective(Collective* c) override;

    const CudaTuning& tuning() const { return tuning_; }
    uint64_t command_launches() const override { return command_launches_; }

private:
    void sync();
    // Throws once this rank's collective was aborted (another rank failed):
    // a graph holding its operations must not run again.
    void check_collective() const;
    // Enqueues every command; with `in_graph` the position-dependent commands
    // read the replay state from device memory instead of `st`.
    CudaArgs scratch_args() const;
    CudaArgs command_args(const DispatchCmd& cmd, const ReplayState& st, bool in_graph) const;
    void launch_commands(const DispatchTable& table, const ReplayState& st, bool in_graph);
    // `steps` decode steps of `table` as an instantiated graph (captured on
    // first use), or nullptr when a command of it cannot run in a graph.
    cudaGraphExec_t step_graph(const DispatchTable& table, int steps);

    struct StepGraph {
        uint64_t table_id = 0;
        int steps = 1;
        cudaGraphExec_t exec = nullptr;  // nullptr: the table is not capturable
    };
    std::vector<StepGraph> graphs_;  // most recent last; a few tables at most
    // Graphs of batch decode passes, one per (table, sizes) met twice.
    struct PassGraph {
        uint64_t table_id = 0;
        uint32_t n_tokens = 0, n_out = 0;
        bool captured = false;            // tried: exec, or nullptr when the capture failed
        cudaGraphExec_t exec = nullptr;
    };
    std::vector<PassGraph> pass_graphs_;  // most recent last
    uint64_t command_launches_ = 0;
    uint32_t* replay_state_ = nullptr;  // device: {pos0, token slot}
    uint8_t* workspace_ = nullptr;
    size_t workspace_bytes_ = 0;
    uint8_t* act_scratch_ = nullptr;
    uint8_t* split_scratch_ = nullptr;
    std::unique_ptr<BlasGemm> blas_;  // prefill GEMMs through cuBLAS, when it loads
    Collective* collective_ = nullptr;      // tensor parallelism (set_collective), not owned
    const NcclCollective* nccl_ = nullptr;  // the same, as what it is
    int ordinal_ = 0;
    std::string name_;
    CudaTuning tuning_;  // decided from the GPU's properties at creation (cuda_tuning.h)
    cudaStream_t stream_ = nullptr;
    struct Bound {
        const CudaKernelEntry* fn = nullptr;
        uint8_t* buf[DispatchCmd::MAX_BUFFERS] = {};
        size_t bytes[DispatchCmd::MAX_BUFFERS] = {};  // CudaArgs::buf_bytes
        uint8_t params[DispatchCmd::MAX_PARAM_BYTES] = {};
    } bound_;
};

}  // namespace akunu
