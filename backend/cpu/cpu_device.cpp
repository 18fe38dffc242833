#include "cpu_device.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/dispatch_table.h"
#include "cpu_topology.h"
#include "core/error.h"

namespace akunu {

extern const CpuKernelEntry kMatmulKernels[];
extern const CpuKernelEntry kEmbeddingKernels[];
extern const CpuKernelEntry kNormRopeKernels[];
extern const CpuKernelEntry kAttentionKernels[];
extern const CpuKernelEntry kElementwiseKernels[];
extern const CpuKernelEntry kSamplingKernels[];
extern const CpuKernelEntry kFusedKernels[];
extern const CpuKernelEntry kFusedBatchKernels[];
extern const CpuKernelEntry kMoeKernels[];
extern const CpuKernelEntry kCollectiveKernels[];

CpuDevice::CpuDevice(int n_threads) : pool_(new ThreadPool(n_threads > 0 ? n_threads : default_cpu_threads())) {
    const char* prof = std::getenv("AKUNU_PROFILE");
    profile_ = prof && *prof && std::strcmp(prof, "0") != 0;
    const char* fused = std::getenv("AKUNU_CPU_FUSED_DECODE");
    fused_decode_ = fused && *fused && std::strcmp(fused, "0") != 0;
    const char* fused_batch = std::getenv("AKUNU_CPU_FUSED_BATCH");
    fused_batch_ = fused_batch && *fused_batch && std::strcmp(fused_batch, "0") != 0;
}

size_t CpuDevice::total_memory() const {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    return pages > 0 && page > 0 ? (size_t)pages * (size_t)page : 0;
}

// MemAvailable from /proc/meminfo (what the kernel can give without swapping).
size_t CpuDevice::available_memory() const {
    FILE* f = std::fopen("/proc/meminfo", "r");
    if (!f) return total_memory();
    char line[256];
    size_t kb = 0;
    while (std::fgets(line, sizeof line, f))
        if (std::sscanf(line, "MemAvailable: %zu kB", &kb) == 1) break;
    std::fclose(f);
    return kb ? kb * 1024 : total_memory();
}

static const CpuKernelEntry* const kKernelTables[] = {kMatmulKernels,    kEmbeddingKernels,   kNormRopeKernels,
                                                      kAttentionKernels, kElementwiseKernels, kSamplingKernels,
                                                      kFusedKernels,     kFusedBatchKernels,  kMoeKernels,
                                                      kCollectiveKernels};

const CpuKernelEntry* find_cpu_kernel(const std::string& name) {
    for (const CpuKernelEntry* table : kKernelTables)
        for (const CpuKernelEntry* e = table; e->name; e++)
            if (name == e->name) return e;
    return nullptr;
}

Pipeline CpuDevice::get_pipeline(const std::string& name) {
    if (const CpuKernelEntry* e = find_cpu_kernel(name)) return Pipeline{(void*)e};
    throw Error("CPU backend has no kernel named '" + name + "'");
}

std::vector<std::string> cpu_kernel_names() {
    std::vector<std::string> out;
    for (const CpuKernelEntry* table : kKernelTables)
        for (const CpuKernelEntry* e = table; e->name; e++) out.push_back(e->name);
    return out;
}

Buffer CpuDevice::allocate(size_t bytes) {
    size_t n = (bytes + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, n ? n : 64);
    if (!p) throw Error("out of memory allocating " + std::to_string(bytes) + " bytes");
    std::memset(p, 0, n ? n : 64);
    return Buffer{p, bytes, p};
}

Buffer CpuDevice::allocate(const void* data, size_t bytes) {
    Buffer b = allocate(bytes);
    std::memcpy(b.contents, data, bytes);
    return b;
}

// Weights are read straight from the mapping: handle stays null so
// free_buffer knows not to free it.
Buffer CpuDevice::wrap_host(const void* data, size_t bytes) { return Buffer{nullptr, bytes, (void*)data}; }

void CpuDevice::free_buffer(Buffer buf) {
    if (buf.handle) std::free(buf.handle);
}

void CpuDevice::write_buffer(Buffer dst, const void* src, size_t bytes, size_t offset) {
    std::memcpy((uint8_t*)dst.contents + offset, src, bytes);
}

void CpuDevice::copy_buffer(Buffer dst, size_t dst_offset, Buffer src, size_t src_offset, size_t bytes) {
    std::memmove((uint8_t*)dst.contents + dst_offset, (const uint8_t*)src.contents + src_offset, bytes);
}

void CpuDevice::read_buffer(void* dst, Buffer src, size_t bytes, size_t offset) {
    std::memcpy(dst, (const uint8_t*)src.contents + offset, bytes);
}

void CpuDevice::set_buffer(Buffer buf, size_t offset, int index) {
    bound_.buf[index] = buf.contents ? (uint8_t*)buf.contents + offset : nullptr;
}

void CpuDevice::set_bytes(const void* data, int size, int) { std::memcpy(bound_.params, data, (size_t)size); }

void CpuDevice::dispatch(Dim3, Dim3) {
    CpuArgs a;
    std::memcpy(a.buf, bound_.buf, sizeof(a.buf));
    a.params = bound_.params;
    a.pool = pool_.get();
    a.collective = collective_;
    bound_.fn->fn(a);
}

// Resolves a command's buffers (token slot patched) and parameters into `a`.
static const CpuKernelEntry* bind_command(const DispatchCmd& cmd, const ReplayState& st, CpuArgs& a,
                                          uint8_t* params) {
    for (int i = 0; i < cmd.buffer_count; i++) a.buf[i] = replay_address(cmd, i, st, cmd.buffers[i].contents);
    patch_params(cmd, st, params);
    return (const CpuKernelEntry*)cmd.pso.handle;
}

// Tight replay: no virtual calls, parameters patched on the stack.
void CpuDevice::encode_dispatch_table(const DispatchTable& table, const ReplayState& st) {
    if (profile_) return encode_profiled(table, st);
    CpuArgs a;
    a.pool = pool_.get();
    a.collective = collective_;
    uint8_t params[DispatchCmd::MAX_PARAM_BYTES];
    a.params = params;
    for (const DispatchCmd& cmd : table.commands) bind_command(cmd, st, a, params)->fn(a);
}

// AKUNU_PROFILE=1: time every command, summed per kernel, printed when the
// device is destroyed (where the time of a forward pass goes).
void CpuDevice::encode_profiled(const DispatchTable& table, const ReplayState& st) {
    CpuArgs a;
    a.pool = pool_.get();
    a.collective = collective_;
    uint8_t params[DispatchCmd::MAX_PARAM_BYTES];
    a.params = params;
    for (const DispatchCmd& cmd : table.commands) {
        const CpuKernelEntry* k = bind_command(cmd, st, a, params);
        auto t0 = std::chrono::steady_clock::now();
        k->fn(a);
        profile_times_[k->name] += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
}

CpuDevice::~CpuDevice() {
    if (!profile_) return;
    double total = 0;
    for (auto& kv : profile_times_) total += kv.second;
    std::fprintf(stderr, "akunu CPU profile (%.3f s in kernels):\n", total);
    for (auto& kv : profile_times_)
        std::fprintf(stderr, "  %-16s %8.3f s  %5.1f%%\n", kv.first.c_str(), kv.second, 100.0 * kv.second / total);
}

}  // namespace akunu
