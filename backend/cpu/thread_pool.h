// A small fork-join pool for the CPU backend. Workers spin briefly between
// dispatches (decode issues hundreds of short kernels per token, so sleeping
// on a condition variable each time would cost more than the work), then
// sleep: an idle model (a server between requests, several models loaded)
// must not keep cores busy.
#pragma once
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace akunu {

// A non-owning reference to a callable (void(int, int)): unlike std::function
// it never allocates, which keeps the per-token path allocation-free.
class RangeFn {
public:
    template <typename F>
    RangeFn(F& f) : obj_(&f), call_([](void* o, int a, int b) { (*static_cast<F*>(o))(a, b); }) {}
    void operator()(int a, int b) const { call_(obj_, a, b); }

private:
    void* obj_;
    void (*call_)(void*, int, int);
};

class ThreadPool {
public:
    explicit ThreadPool(int n_threads);
    ~ThreadPool();
    int size() const { return n_threads_; }

    // Calls fn(begin, end) over [0, n) split into contiguous chunks of equal
    // size, one per thread; returns when all are done. Chunks are claimed,
    // not assigned: the caller takes the first, and any chunk no worker has
    // started when the caller is free runs on the caller, so a worker the OS
    // has not scheduled (a machine busier than its cores) delays nothing.
    template <typename F>
    void parallel_for(int n, F&& fn) {
        RangeFn ref(fn);
        run(n, ref);
    }

private:
    void run(int n, const RangeFn& fn);
    void worker(int id);
    void wait_for_generation(uint64_t seen);
    void publish();  // makes the next job visible and wakes sleeping workers
    void run_claimed_chunks();  // claims and runs chunks of the current job until none is left
    int n_threads_;
    std::vector<std::thread> threads_;
    std::atomic<uint64_t> generation_{0};
    std::atomic<int> next_chunk_{0};  // the next unclaimed chunk of the job
    std::atomic<int> remaining_{0};   // chunks of the job not yet finished
    std::atomic<bool> stop_{false};
    std::atomic<int> sleepers_{0};
    std::mutex sleep_mutex_;
    std::condition_variable wake_;
    const RangeFn* job_ = nullptr;
    int job_n_ = 0;
};

}  // namespace akunu
