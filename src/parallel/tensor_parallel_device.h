// A tensor-parallel model's device: N rank devices (one a GPU, or CPU ranks
// for tests and machines without GPUs) behind the one Device interface, so
// that the model, the batch engine and the sampler drive all ranks as they
// drive one device. Every buffer is one buffer a rank (the weights' shards
// differ between ranks, everything else is the same size on each); every
// table is replayed by every rank at once, each on its own host thread (a
// GPU rank's thread keeps its GPU current), and the ranks meet in the
// collectives the table builder placed in the tables. Reads come from rank 0
// (the residual stream and the logits are the same bits on every rank) while
// the other ranks synchronize, so a rank's failure is seen at once. One
// caller at a time (Model and BatchEngine take turns on the device).
#pragma once
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/collective.h"
#include "core/device.h"
#include "core/dispatch_table.h"

namespace akunu {

class TensorParallelDevice : public Device {
public:
    using RankFactory = std::function<std::unique_ptr<Device>(int rank)>;
    // Makes rank r's device by make_rank(r) on that rank's own thread and
    // gives it collectives[r].
    TensorParallelDevice(std::vector<std::unique_ptr<Collective>> collectives, const RankFactory& make_rank);
    ~TensorParallelDevice() override;

    int ranks() const { return (int)ranks_.size(); }
    Device& rank(int r) { return *ranks_[(size_t)r]; }
    // One buffer a rank (rank r's own contents, sizes alike) as one buffer of
    // this device; freed through free_buffer like any other.
    Buffer compose(const std::vector<Buffer>& per_rank);
    // Rank r's buffer of a buffer of this device.
    static Buffer part(Buffer b, int r);
    // f(r, rank r's device) on every rank's own thread at once (loading:
    // a GPU rank's allocations and copies must come from its thread).
    void for_each_rank(const std::function<void(int, Device&)>& f) {
        on_all([&](int r) { f(r, *ranks_[(size_t)r]); });
    }

    const char* name() const override { return name_.c_str(); }
    const char* backend_name() const override { return ranks_[0]->backend_name(); }
    // N times the smallest rank's memory; free memory is per rank (what a
    // rank's share of the KV cache and buffers is checked against).
    size_t total_memory() const override;
    size_t available_memory() const override;

    Pipeline get_pipeline(const std::string& name) override;
    Buffer allocate(size_t bytes) override;
    Buffer allocate(const void* data, size_t bytes) override;
    Buffer wrap_host(const void* data, size_t bytes) override;
    void free_buffer(Buffer buf) override;
    uint32_t weight_layout(uint32_t dtype, uint64_t rows, uint64_t cols) const override {
        return ranks_[0]->weight_layout(dtype, rows, cols);
    }
    void write_buffer(Buffer dst, const void* src, size_t bytes, size_t offset = 0) override;
    void read_buffer(void* dst, Buffer src, size_t bytes, size_t offset = 0) override;
    void copy_buffer(Buffer dst, size_t dst_offset, Buffer src, size_t src_offset, size_t bytes) override;

    // The per-command encoding calls record a table, replayed by every rank
    // at end_encoding_sync.
    void begin_encoding() override { pending_ = DispatchTable(); }
    void set_pipeline(Pipeline pso) override;
    void set_buffer(Buffer buf, size_t offset, int index) override;
    void set_bytes(const void* data, int size, int index) override;
    void dispatch(Dim3 grid, Dim3 threadgroup) override;
    void end_encoding_sync() override;

    int chain_length() const override { return ranks_[0]->chain_length(); }
    bool fused_decode() const override { return ranks_[0]->fused_decode(); }
    bool fused_batch() const override { return ranks_[0]->fused_batch(); }
    void set_batch_rows(int max_rows) override {
        for (auto& r : ranks_) r->set_batch_rows(max_rows);
    }
    bool stages_typed_kv() const override { return ranks_[0]->stages_typed_kv(); }
    int prefill_chunk() const override { return ranks_[0]->prefill_chunk(); }
    void encode_dispatch_table(const DispatchTable& table, const ReplayState& state) override;
    void encode_chain(const DispatchTable& table, uint32_t pos0, int steps) override;
    void encode_decode_pass(const DispatchTable& table, const ReplayState& state) override;
    // The slowest rank's time (every rank runs the table at once).
    double time_table(const DispatchTable& table, const ReplayState& state) override;

private:
    // A non-owning reference to a callable taking the rank (no allocation per call).
    struct RankFn {
        const void* obj;
        void (*call)(const void*, int);
    };
    // f(rank) on every rank's thread at once. A job that replays tables
    // (`meets`: the ranks may wait for each other in its collectives, or for
    // a GPU that faulted) aborts the collectives when a rank fails in it, so
    // that no rank waits forever; a failed allocation or copy leaves the
    // model usable.
    template <typename F>
    void on_all(const F& f, bool meets = false) {
        run({&f, [](const void* o, int r) { (*static_cast<const F*>(o))(r); }}, meets);
    }
    void run(RankFn fn, bool meets);  // rethrows the first rank's error
    void worker(int rank);
    void shut_down();  // the rank devices destroyed, the workers joined
    // The table as each rank's pipelines and buffers, translated once per table id.
    const std::vector<DispatchTable>& rank_tables(const DispatchTable& table);
    void translate(const DispatchTable& table, std::vector<DispatchTable>& out) const;

    struct Worker {
        std::thread thread;
        uint64_t seen = 0;
    };
    std::vector<std::unique_ptr<Collective>> collectives_;
    std::vector<std::unique_ptr<Device>> ranks_;
    std::vector<Worker> workers_;
    std::string name_;

    std::mutex call_mutex_;  // one caller at a time drives the ranks
    std::mutex mutex_;
    std::condition_variable work_cv_, done_cv_;
    uint64_t generation_ = 0;
    RankFn job_{nullptr, nullptr};
    bool job_meets_ = false;
    int pending_ranks_ = 0;
    std::exception_ptr error_;
    bool stop_ = false;

    std::map<std::string, std::vector<Pipeline>> pipelines_;
    struct Translated {
        uint64_t id = 0;
        std::vector<DispatchTable> tables;
    };
    std::vector<Translated> translated_;  // most recent last
    std::vector<DispatchTable> transient_;  // a transient table's translation (storage reused, never cached)
    DispatchTable pending_;               // the per-command encoding calls' table
    DispatchCmd bound_;
};

}  // namespace akunu
