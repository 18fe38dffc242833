// Fibers, barriers and the threadgroup scheduler behind fiber_runner.h.
// x86-64 switches stacks with a few instructions of its own; other CPUs use
// ucontext (slower: it saves the signal mask).
#if !defined(__x86_64__) && defined(__APPLE__)
#define _XOPEN_SOURCE 700  // macOS exposes the (deprecated) ucontext API only with it
#endif
#include "fiber_runner.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

namespace akunu_msl_emu {
namespace {

constexpr size_t kStackBytes = 128 * 1024;  // kernels keep whole decoded blocks (<= 1 KiB) on the stack

#if defined(__x86_64__)
// Saves the callee-saved registers, MXCSR and the x87 control word on the
// current stack, stores the stack pointer in *from and resumes the stack `to`.
extern "C" void akunu_fiber_switch(void** from, void* to);
asm(R"(
    .text
    .globl akunu_fiber_switch
    .type akunu_fiber_switch,@function
akunu_fiber_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    subq $8, %rsp
    stmxcsr (%rsp)
    fnstcw 4(%rsp)
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    ldmxcsr (%rsp)
    fldcw 4(%rsp)
    addq $8, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size akunu_fiber_switch, .-akunu_fiber_switch
)");
#endif

struct Barrier {
    uint arrived = 0;
    uint live = 0;
    uint64_t generation = 0;
    const char* site_file = nullptr;  // where the first arrival called from
    int site_line = 0;
};

struct SimdGroup {
    Barrier barrier;
    alignas(16) uint8_t slots[kSimdWidth][64];
    uint first = 0, width = 0;
};

struct Threadgroup;

struct Fiber {
#if defined(__x86_64__)
    void* sp = nullptr;
#else
    ucontext_t ctx;
#endif
    uint8_t* stack = nullptr;
    ThreadPosition pos;
    bool done = false;
    Threadgroup* tg = nullptr;
};

struct Threadgroup {
    const char* error = nullptr;  // set by a fiber that cannot go on; the scheduler throws it
    KernelThunk kernel = nullptr;
    Invocation inv;
    Barrier barrier;
    std::vector<SimdGroup> simd;
    Fiber* fibers = nullptr;
    uint n = 0;
};

// Per OS thread: the scheduler's context, the running fiber, the fiber pool.
struct Worker {
#if defined(__x86_64__)
    void* scheduler_sp = nullptr;
#else
    ucontext_t scheduler_ctx;
#endif
    Fiber* current = nullptr;
    std::vector<Fiber> fibers;
    std::vector<uint8_t*> stacks;
    std::vector<uint8_t> tg_mem;

    ~Worker() {
        for (uint8_t* s : stacks) munmap(s, kStackBytes);
    }
    void ensure(uint n) {
        while (stacks.size() < n) {
            void* m = mmap(nullptr, kStackBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                           -1, 0);
            if (m == MAP_FAILED) throw std::runtime_error("metal emulation: cannot map a fiber stack");
            stacks.push_back(static_cast<uint8_t*>(m));
        }
        if (fibers.size() < n) fibers.resize(n);
    }
};

thread_local Worker* tls_worker = nullptr;

Worker& worker() {
    thread_local Worker w;
    tls_worker = &w;
    return w;
}

Fiber& current_fiber() { return *tls_worker->current; }

void yield_to_scheduler() {
    Worker& w = *tls_worker;
#if defined(__x86_64__)
    akunu_fiber_switch(&w.current->sp, w.scheduler_sp);
#else
    swapcontext(&w.current->ctx, &w.scheduler_ctx);
#endif
}

void release(Barrier& b) {
    b.arrived = 0;
    b.generation++;
}

// Threads of one barrier episode must all call it from the same place: one
// that arrives from elsewhere (divergent control flow) stops the threadgroup.
void wait(Barrier& b, const char* file, int line) {
    const uint64_t gen = b.generation;
    if (b.arrived == 0) {
        b.site_file = file;
        b.site_line = line;
    } else if (b.site_line != line || std::strcmp(b.site_file, file) != 0) {
        current_fiber().tg->error = "metal emulation: divergent barrier (threads of a threadgroup or SIMD group "
                                    "wait at different barriers)";
        for (;;) yield_to_scheduler();
    }
    if (++b.arrived == b.live) {
        release(b);
        return;
    }
    while (b.generation == gen) yield_to_scheduler();
}

// A returning thread leaves both barriers it belongs to; it may be the one
// the others were waiting for.
void leave(Barrier& b) {
    b.live--;
    if (b.arrived > 0 && b.arrived == b.live) release(b);
}

[[noreturn]] void fiber_main() {
    Fiber& f = current_fiber();
    f.tg->kernel(f.tg->inv, f.pos);
    f.done = true;
    leave(f.tg->barrier);
    leave(f.tg->simd[f.pos.sgitg].barrier);
    yield_to_scheduler();
    __builtin_trap();  // never resumed
}

void start_fiber(Fiber& f) {
#if defined(__x86_64__)
    // The initial frame matches what akunu_fiber_switch pops: MXCSR and x87
    // control word, six callee-saved registers, then the "return address"
    // fiber_main, entered with the stack aligned as after a call.
    uintptr_t top = (reinterpret_cast<uintptr_t>(f.stack) + kStackBytes) & ~uintptr_t(15);
    uint64_t* sp = reinterpret_cast<uint64_t*>(top) - 2;  // ret slot at a 16-byte boundary
    sp[0] = reinterpret_cast<uint64_t>(&fiber_main);
    sp -= 6;
    std::memset(sp, 0, 6 * sizeof(uint64_t));
    sp -= 1;
    uint32_t csr[2];
    asm volatile("stmxcsr %0" : "=m"(csr[0]));
    asm volatile("fnstcw %0" : "=m"(csr[1]));
    std::memcpy(sp, csr, 8);
    f.sp = sp;
#else
    getcontext(&f.ctx);
    f.ctx.uc_stack.ss_sp = f.stack;
    f.ctx.uc_stack.ss_size = kStackBytes;
    f.ctx.uc_link = nullptr;
    makecontext(&f.ctx, (void (*)()) & fiber_main, 0);
#endif
}

void resume(Worker& w, Fiber& f) {
    w.current = &f;
#if defined(__x86_64__)
    akunu_fiber_switch(&w.scheduler_sp, f.sp);
#else
    swapcontext(&w.scheduler_ctx, &f.ctx);
#endif
    w.current = nullptr;
}

void run_threadgroup(Worker& w, KernelThunk kernel, const Invocation& inv, uint3 tgpig, uint3 grid, uint n,
                     size_t tg_mem_bytes) {
    w.ensure(n);
    // Threadgroup memory starts as NaN bytes so a read before any write shows.
    if (w.tg_mem.size() < tg_mem_bytes) w.tg_mem.resize(tg_mem_bytes);
    std::memset(w.tg_mem.data(), 0xFF, tg_mem_bytes);
    Threadgroup tg;
    tg.kernel = kernel;
    tg.inv = inv;
    tg.inv.tg_mem = tg_mem_bytes ? w.tg_mem.data() : nullptr;
    tg.n = n;
    tg.fibers = w.fibers.data();
    tg.barrier.live = n;
    const uint nsg = (n + kSimdWidth - 1) / kSimdWidth;
    tg.simd.resize(nsg);
    for (uint s = 0; s < nsg; s++) {
        tg.simd[s].first = s * kSimdWidth;
        tg.simd[s].width = std::min<uint>(kSimdWidth, n - s * kSimdWidth);
        tg.simd[s].barrier.live = tg.simd[s].width;
    }
    for (uint i = 0; i < n; i++) {
        Fiber& f = w.fibers[i];
        f.stack = w.stacks[i];
        f.done = false;
        f.tg = &tg;
        f.pos = ThreadPosition{tgpig, grid, i, n, i % kSimdWidth, i / kSimdWidth, nsg};
        start_fiber(f);
    }
    uint remaining = n;
    uint64_t idle_rounds = 0;
    while (remaining > 0) {
        uint64_t before = tg.barrier.generation;
        for (uint s = 0; s < nsg; s++) before += tg.simd[s].barrier.generation;
        uint finished = 0;
        for (uint i = 0; i < n; i++) {
            Fiber& f = w.fibers[i];
            if (f.done) continue;
            resume(w, f);
            if (tg.error) throw std::runtime_error(tg.error);
            if (f.done) finished++;
        }
        remaining -= finished;
        uint64_t after = tg.barrier.generation;
        for (uint s = 0; s < nsg; s++) after += tg.simd[s].barrier.generation;
        // Every live thread waits and no barrier opened in a full round (a
        // backstop: divergence is normally caught where it happens).
        idle_rounds = (finished == 0 && after == before) ? idle_rounds + 1 : 0;
        if (idle_rounds > 2)
            throw std::runtime_error("metal emulation: barrier deadlock (threads of a threadgroup wait at "
                                     "different barriers)");
    }
}

// A fixed pool of OS threads sharing the threadgroups of one dispatch.
class Pool {
public:
    Pool() {
        unsigned n = std::thread::hardware_concurrency();
        n = std::max(1u, std::min(n, 8u));
        for (unsigned i = 1; i < n; i++) threads_.emplace_back([this] { loop(); });
    }
    ~Pool() {
        {
            std::lock_guard<std::mutex> l(m_);
            stop_ = true;
        }
        cv_.notify_all();
        for (auto& t : threads_) t.join();
    }
    // Runs job(i) for i in [0, n) on every thread; the first error is rethrown.
    void run(size_t n, const std::function<void(size_t)>& job) {
        std::unique_lock<std::mutex> l(m_);
        job_ = &job;
        n_ = n;
        next_ = 0;
        busy_ = threads_.size();
        error_.clear();
        epoch_++;
        l.unlock();
        cv_.notify_all();
        work();
        l.lock();
        done_cv_.wait(l, [this] { return busy_ == 0; });
        job_ = nullptr;
        if (!error_.empty()) throw std::runtime_error(error_);
    }

private:
    void work() {
        for (;;) {
            size_t i = next_.fetch_add(1);
            if (i >= n_) return;
            try {
                (*job_)(i);
            } catch (const std::exception& e) {
                std::lock_guard<std::mutex> l(err_m_);
                if (error_.empty()) error_ = e.what();
                next_ = n_;
            }
        }
    }
    void loop() {
        uint64_t seen = 0;
        for (;;) {
            std::unique_lock<std::mutex> l(m_);
            cv_.wait(l, [&] { return stop_ || epoch_ != seen; });
            if (stop_) return;
            seen = epoch_;
            l.unlock();
            work();
            l.lock();
            if (--busy_ == 0) done_cv_.notify_all();
        }
    }
    std::vector<std::thread> threads_;
    std::mutex m_, err_m_;
    std::condition_variable cv_, done_cv_;
    const std::function<void(size_t)>* job_ = nullptr;
    std::atomic<size_t> next_{0};
    size_t n_ = 0, busy_ = 0;
    uint64_t epoch_ = 0;
    bool stop_ = false;
    std::string error_;
};

Pool& pool() {
    static Pool p;
    return p;
}

SimdGroup& current_simd() {
    Fiber& f = current_fiber();
    return f.tg->simd[f.pos.sgitg];
}

}  // namespace

void run_grid(KernelThunk kernel, const Invocation& inv, uint3 grid, uint threads_per_tg, size_t tg_mem_bytes) {
    if (threads_per_tg == 0 || threads_per_tg > kMaxThreadsPerThreadgroup)
        throw std::runtime_error("metal emulation: threads per threadgroup must be 1.." +
                                 std::to_string(kMaxThreadsPerThreadgroup));
    if (tg_mem_bytes > kMaxThreadgroupMemory)
        throw std::runtime_error("metal emulation: " + std::to_string(tg_mem_bytes) +
                                 " bytes of threadgroup memory (the GPU has 32 KiB)");
    const size_t total = (size_t)grid.x * grid.y * grid.z;
    if (total == 0) return;
    pool().run(total, [&](size_t i) {
        const uint3 pos = {(uint)(i % grid.x), (uint)(i / grid.x % grid.y), (uint)(i / ((size_t)grid.x * grid.y))};
        run_threadgroup(worker(), kernel, inv, pos, grid, threads_per_tg, tg_mem_bytes);
    });
}

void threadgroup_barrier_wait(const char* file, int line) { wait(current_fiber().tg->barrier, file, line); }
void simd_barrier_wait(const char* file, int line) { wait(current_simd().barrier, file, line); }
const ThreadPosition& current_position() { return current_fiber().pos; }
uint8_t* simd_slot(uint lane) { return current_simd().slots[lane]; }
bool simd_lane_active(uint lane) {
    SimdGroup& s = current_simd();
    return lane < s.width && !current_fiber().tg->fibers[s.first + lane].done;
}
uint simd_width() { return current_simd().width; }

}  // namespace akunu_msl_emu
