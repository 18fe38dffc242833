// The one interface between the backend-agnostic core and a backend (book,
// "The Device Abstraction Layer"). The core never sees CUDA or Metal types:
// buffers and pipelines are opaque handles the device hands out and takes back.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace akunu {

struct Buffer {
    void* handle = nullptr;    // backend-specific
    size_t size = 0;           // bytes
    void* contents = nullptr;  // host-visible pointer (CPU, unified memory) or nullptr
};

struct Pipeline {
    void* handle = nullptr;
};

struct Dim3 {
    uint32_t x, y, z;
    Dim3(uint32_t x_ = 1, uint32_t y_ = 1, uint32_t z_ = 1) : x(x_), y(y_), z(z_) {}
};

struct DispatchTable;
struct DTypeDescriptor;
class Collective;

// Per-replay values that the dispatch table patches into commands.
struct ReplayState {
    uint32_t pos0 = 0;         // position of the first token in this pass
    uint32_t n_tokens = 1;     // tokens in this pass (1 for decode)
    uint32_t token_index = 0;  // slot in the token-id buffer (chain decode)
    bool last_row_only = false;  // output head: only the last token's logits
    uint32_t n_out = 0;  // ragged batch passes: rows gathered for the output head
    uint32_t n_generated = 0;      // ragged batch passes: leading rows that hold generated tokens
    uint32_t n_out_generated = 0;  // ... and leading gathered rows that do
};

class Device {
public:
    virtual ~Device() = default;

    virtual const char* name() const = 0;
    virtual const char* backend_name() const = 0;
    virtual size_t total_memory() const = 0;
    // Memory free for new allocations now (0: unknown); checked before the
    // KV cache is allocated so a too-large context is an error, not swapping.
    virtual size_t available_memory() const { return total_memory(); }

    virtual Pipeline get_pipeline(const std::string& name) = 0;

    virtual Buffer allocate(size_t bytes) = 0;
    virtual Buffer allocate(const void* data, size_t bytes) = 0;
    // Wrap host memory that outlives the buffer (mmapped weights) without copying
    // where the backend can address it; otherwise copy.
    virtual Buffer wrap_host(const void* data, size_t bytes) { return allocate(data, bytes); }
    virtual void free_buffer(Buffer buf) = 0;
    // The layout a matmul / embedding weight of GGML type `dtype` ([rows, cols],
    // cols contiguous) should have on this device: `dtype` itself, or a
    // regrouping the loader makes at load (Q4_0 / Q8_0 / Q6_K -> their x8 layouts,
    // dtype_descriptor.h) for a GPU that loads 16 bytes at a time.
    virtual uint32_t weight_layout(uint32_t dtype, uint64_t rows, uint64_t cols) const {
        (void)rows;
        (void)cols;
        return dtype;
    }
    virtual void write_buffer(Buffer dst, const void* src, size_t bytes, size_t offset = 0) = 0;
    virtual void read_buffer(void* dst, Buffer src, size_t bytes, size_t offset = 0) = 0;
    // Device-to-device copy (cold path: beam reordering); the default stages through the host.
    virtual void copy_buffer(Buffer dst, size_t dst_offset, Buffer src, size_t src_offset, size_t bytes);

    // Command encoding, as in the book.
    virtual void begin_encoding() = 0;
    virtual void set_pipeline(Pipeline pso) = 0;
    virtual void set_buffer(Buffer buf, size_t offset, int index) = 0;
    virtual void set_bytes(const void* data, int size, int index) = 0;
    virtual void dispatch(Dim3 grid, Dim3 threadgroup) = 0;
    virtual void end_encoding_sync() = 0;

    // Decode steps per chain submission (book Part V). GPU backends size it to
    // amortize their submission cost (Metal: ChipConfig::chain_decode_chunk).
    virtual int chain_length() const { return 16; }

    // Whether decode tables should use the fused kernels (gemv_multi,
    // qk_norm_rope_kv): GPUs whose per-launch latency dominates small decode
    // steps. The CPU implements them too, as their definition, for the tests.
    virtual bool fused_decode() const { return false; }

    // Whether batch tables (continuous batching) should use the fused batch
    // kernels (qk_norm_rope_kv_paged, add_rmsnorm, and the paged attention's
    // generated-row split): fewer launches a layer, the same meaning.
    virtual bool fused_batch() const { return false; }

    // The most sequences a continuous-batching engine on this device runs at
    // once (BatchOptions::max_seqs), told before it builds its tables: a
    // device may pick its batch kernels by it (CUDA: the decode-row GEMM).
    // Fixed for the engine's life, so a row's kernel still never depends on
    // its company in the batch.
    virtual void set_batch_rows(int max_rows) { (void)max_rows; }

    // Whether a KV cache of another element type than F16 wants F16 staging
    // rows for one layer (KVCache::stage_k / stage_v), into which the prefill
    // attention converts the keys a pass reads once, instead of in every tile
    // (tensor-core tiles are F16; CUDA).
    virtual bool stages_typed_kv() const { return false; }

    // Tokens per prefill pass (the scratch buffers are sized for it). A GPU
    // whose GEMM runs on tensor cores wants long passes: each pass re-reads
    // every weight, and short ones leave most of its SMs idle.
    virtual int prefill_chunk() const { return 64; }

    // Fast replay of a table; the default goes command by command through the
    // virtual encoding calls above.
    virtual void encode_dispatch_table(const DispatchTable& table, const ReplayState& state);

    // A decode chain (book Part V): `steps` replays of a one-token table at
    // positions pos0, pos0 + 1, ... and token slots 0, 1, ... (each step's last
    // command writes slot i + 1, which the next step reads). Enqueued only:
    // the next read waits for it. The default replays step by step; CUDA
    // replays one captured graph per step.
    virtual void encode_chain(const DispatchTable& table, uint32_t pos0, int steps);

    // One pass of a batch table whose rows are all generated tokens. Such
    // passes come back step after step with the same sizes (only device
    // buffers change: ids, rows, block tables), so a backend may keep a
    // compiled form per (table, sizes); CUDA captures a graph the second time
    // it meets one. The default is encode_dispatch_table.
    virtual void encode_decode_pass(const DispatchTable& table, const ReplayState& state) {
        encode_dispatch_table(table, state);
    }

    // Tensor parallelism: makes this device rank `c->rank()` of `c->size()`;
    // its "all_reduce_sum" and "all_gather_cols" commands go through `c`
    // (owned by the caller, alive as long as this device). A backend that
    // cannot be a rank refuses with a clear error.
    virtual void set_collective(Collective* c);

    // Launcher calls this device has made for table commands so far (tables
    // replayed or captured into graphs), where it counts them; 0 where not.
    // A command whose work the next command's launch does (CUDA's
    // CudaKernelEntry::absorbs) makes none: tests count the joins by it.
    virtual uint64_t command_launches() const { return 0; }

    // Profiling (cold path): runs the table one command at a time, each to
    // completion, and returns the seconds each took (time_table of each).
    std::vector<double> time_commands(const DispatchTable& table, const ReplayState& state);
    // Seconds one replay of `table` takes, run alone. The default is the host's
    // clock around a synchronous replay; GPU backends override it with their
    // device timestamps.
    virtual double time_table(const DispatchTable& table, const ReplayState& state);
};

}  // namespace akunu
