#include "cuda_device.h"

#include <algorithm>
#include <string>

#include "core/dispatch_table.h"
#include "core/dtype_descriptor.h"
#include "core/error.h"
#include "kernels/act_q8.h"
#include "kernels/cuda_kernel.h"
#include "nccl_collective.h"

namespace akunu {

// The kernel registry: one table a file of kernels/, as the CPU backend's.
extern const CudaKernelEntry kCudaMatmulKernels[];
extern const CudaKernelEntry kCudaEmbeddingKernels[];
extern const CudaKernelEntry kCudaNormRopeKernels[];
extern const CudaKernelEntry kCudaAttentionKernels[];
extern const CudaKernelEntry kCudaElementwiseKernels[];
extern const CudaKernelEntry kCudaSamplingKernels[];
extern const CudaKernelEntry kCudaFusedKernels[];
extern const CudaKernelEntry kCudaFusedBatchKernels[];
extern const CudaKernelEntry kCudaMoeKernels[];
extern const CudaKernelEntry kCudaCollectiveKernels[];

// The launchers' view of a command (cuda_kernel.h spells its sizes out) holds
// every buffer and parameter byte a command has.
static_assert(sizeof(CommandBytes::buf) == DispatchCmd::MAX_BUFFERS * sizeof(uint8_t*), "CommandBytes::buf");
static_assert(sizeof(CudaArgs::buf_bytes) == DispatchCmd::MAX_BUFFERS * sizeof(size_t), "CudaArgs::buf_bytes");
static_assert(sizeof(CommandBytes::params) == DispatchCmd::MAX_PARAM_BYTES, "CommandBytes::params");

namespace {
void check(cudaError_t e, const char* what) {
    if (e != cudaSuccess) throw Error(std::string("CUDA error in ") + what + ": " + cudaGetErrorString(e));
}

// Split-attention partials: a decode token's, up to 128 heads x 32 splits x
// 256 dims; a prefill pass's key splits (attention_prefill.cuh), 512 rows x
// 32 heads of 128 dims in 3 splits.
constexpr size_t kWorkspaceBytes = 32u << 20;
// 8-bit activations, two halves (act_q8_layout): 8 tokens of K = 200k each
constexpr size_t kActScratchBytes = 4u << 20;
// Split-K partials of batch tables' decode rows: 64 rows x (splits x N) up to 32 x 2048 floats, and counters
constexpr size_t kSplitScratchBytes = (16u << 20) + (64u << 10);
constexpr size_t kMaxStepGraphs = 8;
constexpr size_t kMaxPassGraphs = 96;  // batch decode passes: one per batch size in use  // (a table's one-step and unrolled graphs, a few tables)

// Keeps the stream busy for ns nanoseconds, so that the launches a timing
// enqueues after it wait on the GPU, not the GPU on them (time_table).
__global__ void hold_stream(unsigned long long ns) {
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        __nanosleep(1000);
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (t - t0 < ns);
}

__global__ void set_replay_state(uint32_t* state, uint32_t pos0) {
    state[0] = pos0;
    state[1] = 0;
}

// The last node of a step graph: the next replay runs one position and one token slot on.
__global__ void advance_replay_state(uint32_t* state) {
    state[0] += 1;
    state[1] += 1;
}
}  // namespace

bool CudaDevice::available(std::string* why) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        if (why) *why = e != cudaSuccess ? cudaGetErrorString(e) : "no CUDA device is visible";
        cudaGetLastError();  // clear the sticky-free error state
        return false;
    }
    return true;
}

CudaDevice::CudaDevice(int ordinal) : ordinal_(ordinal) {
    std::string why;
    if (!available(&why)) throw Error("device 'cuda' is not available: " + why);
    check(cudaSetDevice(ordinal_), "cudaSetDevice");
    cudaDeviceProp prop;
    check(cudaGetDeviceProperties(&prop, ordinal_), "cudaGetDeviceProperties");
    name_ = prop.name;
    GpuProperties gpu;
    gpu.sm_count = prop.multiProcessorCount;
    gpu.cc_major = prop.major;
    gpu.cc_minor = prop.minor;
    gpu.memory_mib = (uint64_t)(prop.totalGlobalMem >> 20);
    tuning_ = CudaTuning::from_environment(gpu);
    tuning_.pdl = tuning_.pdl && prop.major >= 9;  // (no griddepcontrol before sm_90)
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    check(cudaMalloc(&replay_state_, 2 * sizeof(uint32_t)), "cudaMalloc (replay state)");
    workspace_bytes_ = kWorkspaceBytes;
    check(cudaMalloc(&workspace_, workspace_bytes_), "cudaMalloc (workspace)");
    check(cudaMemset(workspace_, 0, workspace_bytes_), "cudaMemset (workspace)");
    check(cudaMalloc(&act_scratch_, kActScratchBytes), "cudaMalloc (activation scratch)");
    check(cudaMalloc(&split_scratch_, kSplitScratchBytes), "cudaMalloc (split-K scratch)");
    check(cudaMemset(split_scratch_, 0, kSplitScratchBytes), "cudaMemset (split-K scratch)");
    blas_ = make_blas_gemm(tuning_.prefill_gemm);
}

CudaDevice::~CudaDevice() {
    if (stream_) cudaStreamSynchronize(stream_);
    for (StepGraph& g : graphs_)
        if (g.exec) cudaGraphExecDestroy(g.exec);
    for (PassGraph& g : pass_graphs_)
        if (g.exec) cudaGraphExecDestroy(g.exec);
    blas_.reset();
    cudaFree(replay_state_);
    cudaFree(workspace_);
    cudaFree(act_scratch_);
    cudaFree(split_scratch_);
    if (stream_) cudaStreamDestroy(stream_);
}

size_t CudaDevice::total_memory() const {
    size_t free_b = 0, total = 0;
    cudaSetDevice(ordinal_);
    return cudaMemGetInfo(&free_b, &total) == cudaSuccess ? total : 0;
}

size_t CudaDevice::available_memory() const {
    size_t free_b = 0, total = 0;
    cudaSetDevice(ordinal_);
    return cudaMemGetInfo(&free_b, &total) == cudaSuccess ? free_b : 0;
}

Pipeline CudaDevice::get_pipeline(const std::string& name) {
    for (const CudaKernelEntry* table :
         {kCudaMatmulKernels, kCudaEmbeddingKernels, kCudaNormRopeKernels, kCudaAttentionKernels,
          kCudaElementwiseKernels, kCudaSamplingKernels, kCudaFusedKernels, kCudaFusedBatchKernels,
          kCudaMoeKernels, kCudaCollectiveKernels})
        for (const CudaKernelEntry* e = table; e->name; e++)
            if (name == e->name) return Pipeline{(void*)e};
    throw Error("CUDA backend has no kernel named '" + name + "'");
}

Buffer CudaDevice::allocate(size_t bytes) {
    void* p = nullptr;
    cudaError_t e = cudaMalloc(&p, bytes ? bytes : 16);
    if (e != cudaSuccess) {
        cudaGetLastError();
        throw Error("out of GPU memory allocating " + std::to_string(bytes) + " bytes (" + cudaGetErrorString(e) +
                    "); use a smaller n_ctx or model");
    }
    check(cudaMemsetAsync(p, 0, bytes ? bytes : 16, stream_), "cudaMemset");
    return Buffer{p, bytes, p};
}

Buffer CudaDevice::allocate(const void* data, size_t bytes) {
    Buffer b = allocate(bytes);
    check(cudaMemcpyAsync(b.handle, data, bytes, cudaMemcpyHostToDevice, stream_), "upload");
    sync();  // the host data may be freed or unmapped after return
    return b;
}

// Q4_0 / Q8_0 weights regrouped at load (dtype_descriptor.h: per 8 blocks of
// a row their 8 scales, then their quants, so every block's quants are
// 16-byte aligned and a decode GEMV lane loads them in one or two 16-byte
// loads where GGUF's layout takes 2-byte ones). Q6_K likewise, where a row
// holds whole 2048-weight groups (its 210-byte blocks otherwise allow only
// 2-byte lane loads). CudaTuning::repack = false keeps GGUF's layout.
uint32_t CudaDevice::weight_layout(uint32_t dtype, uint64_t rows, uint64_t cols) const {
    (void)rows;
    if (!tuning_.repack) return dtype;
    if ((dtype == GGML_Q4_0 || dtype == GGML_Q8_0) && cols % 256 == 0)
        return dtype == GGML_Q4_0 ? AKUNU_Q4_0_X8 : AKUNU_Q8_0_X8;
    return dtype == GGML_Q6_K && cols % 2048 == 0 ? AKUNU_Q6_K_X8 : dtype;
}

void CudaDevice::free_buffer(Buffer buf) {
    if (buf.handle) cudaFree(buf.handle);
}

void CudaDevice::write_buffer(Buffer dst, const void* src, size_t bytes, size_t offset) {
    check(cudaMemcpyAsync((uint8_t*)dst.handle + offset, src, bytes, cudaMemcpyHostToDevice, stream_), "write");
    sync();  // src is the caller's stack or vector: it must be read before we return
}

void CudaDevice::copy_buffer(Buffer dst, size_t dst_offset, Buffer src, size_t src_offset, size_t bytes) {
    check(cudaMemcpyAsync((uint8_t*)dst.handle + dst_offset, (const uint8_t*)src.handle + src_offset, bytes,
                          cudaMemcpyDeviceToDevice, stream_),
          "cudaMemcpyAsync (device to device)");
}

void CudaDevice::read_buffer(void* dst, Buffer src, size_t bytes, size_t offset) {
    check(cudaMemcpyAsync(dst, (const uint8_t*)src.handle + offset, bytes, cudaMemcpyDeviceToHost, stream_), "read");
    sync();
}

void CudaDevice::sync() {
    check(cudaStreamSynchronize(stream_), "kernel execution");
    check(cudaGetLastError(), "kernel launch");
}

// Bytes of `buf` from `offset` to its end (0: unbound, or past its end).
static size_t bytes_past(const Buffer& buf, size_t offset) {
    return buf.handle && buf.size > offset ? buf.size - offset : 0;
}

void CudaDevice::set_buffer(Buffer buf, size_t offset, int index) {
    bound_.buf[index] = buf.handle ? (uint8_t*)buf.handle + offset : nullptr;
    bound_.bytes[index] = bytes_past(buf, offset);
}

void CudaDevice::set_bytes(const void* data, int size, int) {
    if (size < 0 || (size_t)size > sizeof(bound_.params))
        throw Error("CUDA: a parameter block of " + std::to_string(size) + " bytes (at most " +
                    std::to_string(sizeof(bound_.params)) + ")");
    std::memcpy(bound_.params, data, (size_t)size);
}

void CudaDevice::dispatch(Dim3, Dim3) {
    CudaArgs a = scratch_args();
    std::memcpy(a.buf, bound_.buf, sizeof(a.buf));
    std::memcpy(a.buf_bytes, bound_.bytes, sizeof(a.buf_bytes));
    std::memcpy(a.params, bound_.params, sizeof(a.params));
    bound_.fn->launch(a);
}

// Arguments with the stream and the device's scratch buffers filled in.
CudaArgs CudaDevice::scratch_args() const {
    CudaArgs a;
    a.stream = stream_;
    a.workspace = workspace_;
    a.workspace_bytes = workspace_bytes_;
    a.act_scratch = act_scratch_;
    a.act_scratch_bytes = kActScratchBytes;
    a.split_scratch = split_scratch_;
    a.split_scratch_bytes = kSplitScratchBytes;
    a.blas = blas_.get();
    a.tuning = &tuning_;
    a.collective = collective_;
    return a;
}

// batch_decode=auto: the row-side GEMM for small engines (CudaTuning::batch_decode).
void CudaDevice::set_batch_rows(int max_rows) {
    if (tuning_.batch_decode == BatchDecode::kAuto)
        tuning_.batch_decode_now = max_rows <= kBatchRowsMax ? BatchDecode::kRows : BatchDecode::kTc;
}

// The ranks of a tensor-parallel model meet in NCCL, enqueued on this
// device's stream by the collective commands (kernels/collective.cu) from the
// rank's thread, eagerly or into this device's graphs.
void CudaDevice::set_collective(Collective* c) {
    const NcclCollective* nccl = c ? dynamic_cast<const NcclCollective*>(c) : nullptr;
    if (c && !nccl)
        throw Error("a CUDA device can be a tensor-parallel rank only through NCCL (make_nccl_collectives): "
                    "its collectives run on the GPU's stream");
    if (nccl && nccl->device() != ordinal_)
        throw Error("rank " + std::to_string(nccl->rank()) + "'s NCCL communicator was made for GPU " +
                    std::to_string(nccl->device()) + ", not for this device's GPU " + std::to_string(ordinal_));
    collective_ = c;
    nccl_ = nccl;
}

void CudaDevice::check_collective() const {
    if (nccl_ && nccl_->aborted()) throw Error("a tensor-parallel rank failed; this model cannot run further");
}

// Launches every command of the table on the stream; nothing waits here.
void CudaDevice::encode_dispatch_table(const DispatchTable& table, const ReplayState& st) {
    check_collective();
    launch_commands(table, st, false);
}

// A command's launch arguments: buffers offset, parameters patched.
CudaArgs CudaDevice::command_args(const DispatchCmd& cmd, const ReplayState& st, bool in_graph) const {
    CudaArgs a = scratch_args();
    for (int i = 0; i < cmd.buffer_count; i++) {
        a.buf[i] = replay_address(cmd, i, st, cmd.buffers[i].handle);
        a.buf_bytes[i] = bytes_past(cmd.buffers[i], replay_offset(cmd, i, st));
    }
    for (int i = cmd.buffer_count; i < DispatchCmd::MAX_BUFFERS; i++) a.buf[i] = nullptr;  // (launchers test optional ones)
    patch_params(cmd, st, a.params);
    a.replay_pos = in_graph && cmd.patch_pos0 >= 0 ? replay_state_ : nullptr;
    a.replay_token = in_graph && cmd.patch_token_buffer >= 0 ? replay_state_ + 1 : nullptr;
    return a;
}

// Links a writer to the next command (Q8Link) when the vector it writes is
// the one the next would round to 8 bits (or normalize) first and its kind
// is on (CudaTuning::q8_link): the writer does it as it writes, the
// reader's kernel for it goes.
static void link_q8(const CudaKernelEntry* we, CudaArgs& writer, const CudaKernelEntry* re, CudaArgs& reader) {
    Q8Link out, in;
    const uint32_t kinds = writer.tuning->q8_link;
    if (!kinds || !we->q8_output || !re->q8_input || !we->q8_output(writer, &out) || !re->q8_input(reader, &in) ||
        !(out.kind & kinds))
        return;
    if ((in.norm.weight || in.f32) && !out.norms) return;
    if (out.defers_norm && in.norm.weight && !in.scales) return;
    if (out.x != in.x || out.K != in.K || out.m != in.m) return;
    // the half the writer does not read its own linked input from (its own
    // rounding or normalization goes to half 0)
    const void* input = writer.q8_in.q ? (const void*)writer.q8_in.q : (const void*)writer.f32_in;
    const int half = input && input != (const void*)reader.act_scratch ? 0 : 1;
    if (in.f32) {
        float* region = nullptr;
        float* sumsq = nullptr;
        const bool deferred = out.defers_norm && in.norm.weight;
        if (deferred && out.sumsq_rows < (uint32_t)kMinSumsqRows) return;  // (no room for that many sums)
        if (!act_f32_layout(reader, in.m, in.K, half, &region, deferred ? &sumsq : nullptr)) return;
        writer.f32_out = region;
        reader.f32_in = region;
        writer.f32_out_sumsq = sumsq;
        reader.f32_in_sumsq = sumsq;
        reader.f32_in_eps = in.norm.eps;
        reader.f32_in_sumsq_rows = out.sumsq_rows;
    } else {
        ActQ8 region;
        if (!act_q8_layout(reader, in.m, in.K, half, &region)) return;
        if (out.defers_norm && in.norm.weight &&
            (out.sumsq_rows != kQ8Block || !act_q8_sumsq_layout(reader, in.m, in.K, half, in.norm.eps, &region)))
            return;
        writer.q8_out = region;
        reader.q8_in = region;
    }
    writer.q8_out_norm = in.norm;
}

// Whether the next command's launch does this one's work too (see
// CudaKernelEntry::absorbs): this one is then not launched.
static bool absorb(const CudaKernelEntry* entry, const CudaArgs& a, const CudaKernelEntry* next_entry,
                   CudaArgs& next) {
    if (!next_entry->absorbs || a.q8_out.q || a.f32_out || a.absorbed_before.set ||
        !next_entry->absorbs(next, entry->name, a))
        return false;
    static_cast<CommandBytes&>(next.absorbed) = a;
    next.absorbed.set = true;
    next.absorbed_before = a.absorbed;
    return true;
}

void CudaDevice::launch_commands(const DispatchTable& table, const ReplayState& st, bool in_graph) {
    const size_t n = table.commands.size();
    if (n == 0) return;
    CudaArgs a = command_args(table.commands[0], st, in_graph);
    for (size_t i = 0; i < n; i++) {
        const auto* entry = (const CudaKernelEntry*)table.commands[i].pso.handle;
        CudaArgs next;
        bool absorbed = false;
        if (i + 1 < n) {
            const auto* next_entry = (const CudaKernelEntry*)table.commands[i + 1].pso.handle;
            next = command_args(table.commands[i + 1], st, in_graph);
            link_q8(entry, a, next_entry, next);
            absorbed = absorb(entry, a, next_entry, next);
        }
        if (!absorbed) {
            entry->launch(a);
            command_launches_++;
        }
        a = next;
    }
}

// Whether every command that patches the position or token slot has a
// launcher that reads them from the replay state instead.
static bool capturable(const DispatchTable& table) {
    for (const DispatchCmd& cmd : table.commands) {
        const bool patched = cmd.patch_pos0 >= 0 || cmd.patch_token_buffer >= 0;
        if (cmd.patch_token_buffer > 1) return false;  // launchers offset buffer 1 only
        if (patched && !((const CudaKernelEntry*)cmd.pso.handle)->reads_replay) return false;
    }
    return true;
}

cudaGraphExec_t CudaDevice::step_graph(const DispatchTable& table, int steps) {
    for (size_t i = 0; i < graphs_.size(); i++)
        if (graphs_[i].table_id == table.id && graphs_[i].steps == steps) {
            std::rotate(graphs_.begin() + (long)i, graphs_.begin() + (long)i + 1, graphs_.end());  // most recent last
            return graphs_.back().exec;
        }
    StepGraph g{table.id, steps, nullptr};
    if (capturable(table)) {
        check(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
        bool launched = true;
        try {
            for (int s = 0; s < steps; s++) {
                launch_commands(table, ReplayState{}, true);
                advance_replay_state<<<1, 1, 0, stream_>>>(replay_state_);
            }
        } catch (const Error&) {
            launched = false;  // a launcher refused the graph: replay this table step by step
        }
        cudaGraph_t graph = nullptr;
        const cudaError_t ended = cudaStreamEndCapture(stream_, &graph);
        cudaGetLastError();
        if (launched && ended == cudaSuccess && graph) {
            const cudaError_t made = cudaGraphInstantiate(&g.exec, graph, 0);
            if (made != cudaSuccess) {
                g.exec = nullptr;
                cudaGetLastError();
            }
        }
        if (graph) cudaGraphDestroy(graph);
    }
    if (graphs_.size() == kMaxStepGraphs) {
        if (graphs_.front().exec) {
            sync();  // it may still be running
            cudaGraphExecDestroy(graphs_.front().exec);
        }
        graphs_.erase(graphs_.begin());
    }
    graphs_.push_back(g);
    return g.exec;
}

// Batch decode passes: the first pass of a (table, sizes) runs command by
// command (launchers set their kernels' attributes then, outside any
// capture), the second is captured with its parameters as patched for those
// sizes, and later ones replay the graph; everything else a pass reads
// (ids, rows, block tables, sampler state) is in device memory.
void CudaDevice::encode_decode_pass(const DispatchTable& table, const ReplayState& st) {
    check_collective();
    auto it = std::find_if(pass_graphs_.begin(), pass_graphs_.end(), [&](const PassGraph& g) {
        return g.table_id == table.id && g.n_tokens == st.n_tokens && g.n_out == st.n_out;
    });
    if (it == pass_graphs_.end()) {
        if (pass_graphs_.size() == kMaxPassGraphs) {
            if (pass_graphs_.front().exec) {
                sync();  // it may still be running
                cudaGraphExecDestroy(pass_graphs_.front().exec);
            }
            pass_graphs_.erase(pass_graphs_.begin());
        }
        PassGraph g;
        g.table_id = table.id;
        g.n_tokens = st.n_tokens;
        g.n_out = st.n_out;
        pass_graphs_.push_back(g);
        launch_commands(table, st, false);
        return;
    }
    PassGraph g = *it;
    pass_graphs_.erase(it);
    if (!g.captured) {
        g.captured = true;
        check(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
        bool launched = true;
        try {
            launch_commands(table, st, false);
        } catch (const Error&) {
            launched = false;
        }
        cudaGraph_t graph = nullptr;
        const cudaError_t ended = cudaStreamEndCapture(stream_, &graph);
        cudaGetLastError();
        if (launched && ended == cudaSuccess && graph && cudaGraphInstantiate(&g.exec, graph, 0) != cudaSuccess) {
            g.exec = nullptr;
            cudaGetLastError();
        }
        if (graph) cudaGraphDestroy(graph);
    }
    pass_graphs_.push_back(g);  // most recent last
    if (g.exec) check(cudaGraphLaunch(g.exec, stream_), "cudaGraphLaunch");
    else launch_commands(table, st, false);
}

// Graph launches only: the host enqueues; positions and token slots
// advance on the device (each step's last node).
void CudaDevice::encode_chain(const DispatchTable& table, uint32_t pos0, int steps) {
    check_collective();
    // CudaTuning::graph_steps a graph where a chunk has that many: the GPU's
    // work between two graph launches then comes once per that many steps.
    const int unrolled = tuning_.graph_steps;
    // (the unrolled graph first: capturing it may evict older graphs, never the one returned last)
    cudaGraphExec_t many = unrolled > 1 && steps >= unrolled ? step_graph(table, unrolled) : nullptr;
    cudaGraphExec_t one = steps % unrolled || !many ? step_graph(table, 1) : nullptr;
    if (!many && !one) {
        Device::encode_chain(table, pos0, steps);
        return;
    }
    set_replay_state<<<1, 1, 0, stream_>>>(replay_state_, pos0);
    int done = 0;
    for (; many && done + unrolled <= steps; done += unrolled) check(cudaGraphLaunch(many, stream_), "cudaGraphLaunch");
    for (; done < steps; done++) check(cudaGraphLaunch(one, stream_), "cudaGraphLaunch");
}

// One replay between two synchronizations, timed by CUDA events.
double CudaDevice::time_table(const DispatchTable& table, const ReplayState& st) {
    cudaEvent_t t0, t1;
    check(cudaEventCreate(&t0), "cudaEventCreate");
    check(cudaEventCreate(&t1), "cudaEventCreate");
    sync();
    // The commands' own time, launch latency excluded: they are enqueued
    // while the stream is held, and the first event runs when the hold ends.
    hold_stream<<<1, 1, 0, stream_>>>(200000);
    cudaEventRecord(t0, stream_);
    encode_dispatch_table(table, st);
    cudaEventRecord(t1, stream_);
    sync();
    float ms = 0;
    cudaEventElapsedTime(&ms, t0, t1);
    cudaEventDestroy(t0);
    cudaEventDestroy(t1);
    return ms / 1e3;
}

}  // namespace akunu
