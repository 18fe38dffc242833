#include "parallel/tensor_parallel_device.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace akunu {
namespace {

constexpr size_t kMaxTranslatedTables = 64;

// A buffer of the tensor-parallel device: one buffer a rank.
struct RankBuffers {
    std::vector<Buffer> parts;
};

}  // namespace

TensorParallelDevice::TensorParallelDevice(std::vector<std::unique_ptr<Collective>> collectives,
                                           const RankFactory& make_rank)
    : collectives_(std::move(collectives)) {
    const size_t n = collectives_.size();
    if (n < 2) throw Error("internal error: a tensor-parallel device needs at least 2 ranks");
    ranks_.resize(n);
    workers_.resize(n);
    try {
        for (size_t r = 0; r < n; r++) workers_[r].thread = std::thread(&TensorParallelDevice::worker, this, (int)r);
        on_all([&](int r) {
            ranks_[(size_t)r] = make_rank(r);
            ranks_[(size_t)r]->set_collective(collectives_[(size_t)r].get());
        });
    } catch (...) {
        shut_down();
        throw;
    }
    name_ = std::to_string(n) + " x " + ranks_[0]->name();
}

TensorParallelDevice::~TensorParallelDevice() {
    shut_down();
    collectives_.clear();
}

// Each rank's device goes on its own thread (where it was made), then the
// workers stop. Where not every worker started (the constructor failed
// making threads), no job ran and no device exists: they only stop.
void TensorParallelDevice::shut_down() {
    const bool all_started =
        std::all_of(workers_.begin(), workers_.end(), [](const Worker& w) { return w.thread.joinable(); });
    if (all_started) {
        try {
            on_all([&](int r) { ranks_[(size_t)r].reset(); });
        } catch (...) {
        }
    }
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stop_ = true;
    }
    work_cv_.notify_all();
    for (Worker& w : workers_)
        if (w.thread.joinable()) w.thread.join();
}

void TensorParallelDevice::worker(int rank) {
    Worker& me = workers_[(size_t)rank];
    for (;;) {
        RankFn fn{nullptr, nullptr};
        bool meets = false;
        {
            std::unique_lock<std::mutex> lock(mutex_);
            work_cv_.wait(lock, [&] { return stop_ || generation_ != me.seen; });
            if (stop_) return;
            me.seen = generation_;
            fn = job_;
            meets = job_meets_;
        }
        std::exception_ptr err;
        try {
            fn.call(fn.obj, rank);
        } catch (...) {
            err = std::current_exception();
            // the other ranks may be waiting in a collective for this one
            if (meets && collectives_[(size_t)rank]) collectives_[(size_t)rank]->abort();
        }
        std::lock_guard<std::mutex> lock(mutex_);
        if (err && !error_) error_ = err;
        if (--pending_ranks_ == 0) done_cv_.notify_all();
    }
}

void TensorParallelDevice::run(RankFn fn, bool meets) {
    std::lock_guard<std::mutex> call(call_mutex_);
    std::unique_lock<std::mutex> lock(mutex_);
    job_ = fn;
    job_meets_ = meets;
    pending_ranks_ = (int)workers_.size();
    error_ = nullptr;
    generation_++;
    work_cv_.notify_all();
    done_cv_.wait(lock, [&] { return pending_ranks_ == 0; });
    if (error_) {
        std::exception_ptr e = error_;
        error_ = nullptr;
        std::rethrow_exception(e);
    }
}

Buffer TensorParallelDevice::compose(const std::vector<Buffer>& per_rank) {
    if (per_rank.size() != ranks_.size()) throw Error("internal error: a composed buffer needs one part a rank");
    auto* rb = new RankBuffers{per_rank};
    size_t size = 0;
    for (const Buffer& b : per_rank) size = std::max(size, b.size);
    return Buffer{rb, size, nullptr};
}

Buffer TensorParallelDevice::part(Buffer b, int r) {
    return b.handle ? static_cast<RankBuffers*>(b.handle)->parts[(size_t)r] : Buffer{};
}

size_t TensorParallelDevice::total_memory() const {
    size_t least = SIZE_MAX;
    for (const auto& d : ranks_) least = std::min(least, d->total_memory());
    return least == 0 ? 0 : least * ranks_.size();
}

size_t TensorParallelDevice::available_memory() const {
    size_t least = SIZE_MAX;
    for (const auto& d : ranks_) least = std::min(least, d->available_memory());
    return least;
}

Pipeline TensorParallelDevice::get_pipeline(const std::string& name) {
    auto it = pipelines_.find(name);
    if (it == pipelines_.end()) {
        std::vector<Pipeline> per_rank(ranks_.size());
        on_all([&](int r) { per_rank[(size_t)r] = ranks_[(size_t)r]->get_pipeline(name); });
        it = pipelines_.emplace(name, std::move(per_rank)).first;
    }
    return Pipeline{&it->second};  // map nodes never move
}

Buffer TensorParallelDevice::allocate(size_t bytes) {
    std::vector<Buffer> parts(ranks_.size());
    try {
        on_all([&](int r) { parts[(size_t)r] = ranks_[(size_t)r]->allocate(bytes); });
    } catch (...) {
        on_all([&](int r) {
            if (parts[(size_t)r].handle) ranks_[(size_t)r]->free_buffer(parts[(size_t)r]);
        });
        throw;
    }
    return compose(parts);
}

Buffer TensorParallelDevice::allocate(const void* data, size_t bytes) {
    Buffer b = allocate(bytes);
    write_buffer(b, data, bytes);
    return b;
}

Buffer TensorParallelDevice::wrap_host(const void* data, size_t bytes) {
    std::vector<Buffer> parts(ranks_.size());
    on_all([&](int r) { parts[(size_t)r] = ranks_[(size_t)r]->wrap_host(data, bytes); });
    return compose(parts);
}

void TensorParallelDevice::free_buffer(Buffer buf) {
    if (!buf.handle) return;
    std::unique_ptr<RankBuffers> rb(static_cast<RankBuffers*>(buf.handle));
    on_all([&](int r) { ranks_[(size_t)r]->free_buffer(rb->parts[(size_t)r]); });
}

void TensorParallelDevice::write_buffer(Buffer dst, const void* src, size_t bytes, size_t offset) {
    on_all([&](int r) { ranks_[(size_t)r]->write_buffer(part(dst, r), src, bytes, offset); });
}

// Rank 0 reads; the others wait for their own work meanwhile, so a rank
// whose GPU faulted throws here and aborts the collectives rank 0 may be
// waiting in, instead of leaving it there.
void TensorParallelDevice::read_buffer(void* dst, Buffer src, size_t bytes, size_t offset) {
    on_all([&](int r) {
        if (r == 0) ranks_[0]->read_buffer(dst, part(src, 0), bytes, offset);
        else ranks_[(size_t)r]->end_encoding_sync();
    }, true);
}

void TensorParallelDevice::copy_buffer(Buffer dst, size_t dst_offset, Buffer src, size_t src_offset, size_t bytes) {
    on_all([&](int r) { ranks_[(size_t)r]->copy_buffer(part(dst, r), dst_offset, part(src, r), src_offset, bytes); });
}

void TensorParallelDevice::translate(const DispatchTable& table, std::vector<DispatchTable>& out) const {
    out.resize(ranks_.size());
    for (size_t r = 0; r < ranks_.size(); r++) {
        DispatchTable& t = out[r];
        t.commands = table.commands;  // (reuses the storage of an evicted translation)
        t.labels = table.labels;
        t.renew_id();
        for (DispatchCmd& cmd : t.commands) {
            cmd.pso = (*static_cast<const std::vector<Pipeline>*>(cmd.pso.handle))[r];
            for (int i = 0; i < cmd.buffer_count; i++) cmd.buffers[i] = part(cmd.buffers[i], (int)r);
            if (cmd.patch_rank >= 0) {  // (a rank's own value: its first expert)
                uint32_t v;
                std::memcpy(&v, cmd.param_bytes + cmd.patch_rank, 4);
                v *= (uint32_t)r;
                std::memcpy(cmd.param_bytes + cmd.patch_rank, &v, 4);
            }
        }
    }
}

// Tables whose content changes renew their id (DispatchTable::renew_id), so
// an id names one content: its translation is made once and kept while used.
const std::vector<DispatchTable>& TensorParallelDevice::rank_tables(const DispatchTable& table) {
    if (table.transient) {  // new content each use: translated into the same storage, kept out of the cache
        translate(table, transient_);
        return transient_;
    }
    for (size_t i = 0; i < translated_.size(); i++)
        if (translated_[i].id == table.id) {
            std::rotate(translated_.begin() + (long)i, translated_.begin() + (long)i + 1, translated_.end());
            return translated_.back().tables;
        }
    if (translated_.size() == kMaxTranslatedTables) {  // the least recently used one's storage is reused
        std::rotate(translated_.begin(), translated_.begin() + 1, translated_.end());
    } else {
        translated_.emplace_back();
    }
    Translated& t = translated_.back();
    t.id = table.id;
    translate(table, t.tables);
    return t.tables;
}

void TensorParallelDevice::encode_dispatch_table(const DispatchTable& table, const ReplayState& st) {
    const std::vector<DispatchTable>& t = rank_tables(table);
    on_all([&](int r) { ranks_[(size_t)r]->encode_dispatch_table(t[(size_t)r], st);}, true);
}

void TensorParallelDevice::encode_chain(const DispatchTable& table, uint32_t pos0, int steps) {
    const std::vector<DispatchTable>& t = rank_tables(table);
    on_all([&](int r) { ranks_[(size_t)r]->encode_chain(t[(size_t)r], pos0, steps);}, true);
}

void TensorParallelDevice::encode_decode_pass(const DispatchTable& table, const ReplayState& st) {
    const std::vector<DispatchTable>& t = rank_tables(table);
    on_all([&](int r) { ranks_[(size_t)r]->encode_decode_pass(t[(size_t)r], st);}, true);
}

double TensorParallelDevice::time_table(const DispatchTable& table, const ReplayState& st) {
    const std::vector<DispatchTable>& t = rank_tables(table);
    std::vector<double> seconds(ranks_.size());
    on_all([&](int r) { seconds[(size_t)r] = ranks_[(size_t)r]->time_table(t[(size_t)r], st);}, true);
    return *std::max_element(seconds.begin(), seconds.end());
}

void TensorParallelDevice::set_pipeline(Pipeline pso) {
    bound_ = DispatchCmd();
    bound_.pso = pso;
}

void TensorParallelDevice::set_buffer(Buffer buf, size_t offset, int index) {
    if (index < 0 || index >= DispatchCmd::MAX_BUFFERS) throw Error("buffer index out of range");
    bound_.buffers[index] = buf;
    bound_.offsets[index] = (uint32_t)offset;
    bound_.buffer_count = std::max(bound_.buffer_count, index + 1);
}

void TensorParallelDevice::set_bytes(const void* data, int size, int index) {
    if (size < 0 || size > DispatchCmd::MAX_PARAM_BYTES) throw Error("parameter block too large");
    std::memcpy(bound_.param_bytes, data, (size_t)size);
    bound_.param_size = size;
    bound_.param_index = index;
}

void TensorParallelDevice::dispatch(Dim3 grid, Dim3 threadgroup) {
    bound_.grid = grid;
    bound_.threadgroup = threadgroup;
    pending_.commands.push_back(bound_);
    pending_.labels.push_back("command");
}

void TensorParallelDevice::end_encoding_sync() {
    std::vector<DispatchTable> t;
    translate(pending_, t);
    pending_ = DispatchTable();
    on_all([&](int r) {
        if (!t[(size_t)r].commands.empty()) ranks_[(size_t)r]->encode_dispatch_table(t[(size_t)r], ReplayState{});
        ranks_[(size_t)r]->end_encoding_sync();
    }, true);
}

}  // namespace akunu
