#include "thread_pool.h"

#include <chrono>

namespace akunu {

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads < 1 ? 1 : n_threads) {
    for (int i = 1; i < n_threads_; i++) threads_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
    stop_.store(true);
    publish();
    for (auto& t : threads_) t.join();
}

// seq_cst on generation_ and sleepers_: either the publisher sees a sleeper
// and notifies, or the sleeper sees the new generation before it waits.
void ThreadPool::publish() {
    generation_.fetch_add(1);
    if (sleepers_.load() > 0) {
        std::lock_guard<std::mutex> lk(sleep_mutex_);
        wake_.notify_all();
    }
}

void ThreadPool::wait_for_generation(uint64_t seen) {
    using clock = std::chrono::steady_clock;
    const auto spin_until = clock::now() + std::chrono::milliseconds(2);
    for (int spins = 0; generation_.load(std::memory_order_acquire) == seen; spins++) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
        if ((spins & 1023) != 1023 || clock::now() < spin_until) continue;
        std::unique_lock<std::mutex> lk(sleep_mutex_);
        sleepers_.fetch_add(1);
        wake_.wait(lk, [&] { return generation_.load() != seen; });
        sleepers_.fetch_sub(1);
    }
}

static void run_chunk(const RangeFn& fn, int n, int parts, int id) {
    int begin = (int)((long long)n * id / parts);
    int end = (int)((long long)n * (id + 1) / parts);
    if (begin < end) fn(begin, end);
}

// A claim made after the caller reset next_chunk_ for a new job belongs to
// that job: job_ and job_n_ were written before the reset (release) and are
// read after the claim (acquire). A late worker's claim on a finished job
// finds no chunk left (or is overwritten by the next reset) and runs nothing.
void ThreadPool::run_claimed_chunks() {
    for (;;) {
        const int c = next_chunk_.fetch_add(1, std::memory_order_acq_rel);
        if (c >= n_threads_) return;
        run_chunk(*job_, job_n_, n_threads_, c);
        remaining_.fetch_sub(1, std::memory_order_acq_rel);
    }
}

void ThreadPool::worker(int) {
    uint64_t seen = 0;
    for (;;) {
        wait_for_generation(seen);
        seen = generation_.load(std::memory_order_acquire);
        if (stop_.load()) return;
        run_claimed_chunks();
    }
}

void ThreadPool::run(int n, const RangeFn& fn) {
    if (n_threads_ == 1 || n < 2) {
        if (n > 0) fn(0, n);
        return;
    }
    job_ = &fn;
    job_n_ = n;
    remaining_.store(n_threads_, std::memory_order_relaxed);
    next_chunk_.store(0, std::memory_order_release);
    publish();
    run_claimed_chunks();
    while (remaining_.load(std::memory_order_acquire) != 0) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
    }
}

}  // namespace akunu
