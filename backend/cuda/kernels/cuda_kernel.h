// The CUDA backend's kernel ABI: a pipeline is a host launcher; the device
// hands it the bound device pointers (already offset), the patched parameter
// bytes and its stream, and the launcher enqueues the kernel asynchronously.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <mutex>
#include <utility>
#include <vector>

#include "../cuda_tuning.h"

namespace akunu {

class BlasGemm;    // gemm_blas.h
class Collective;  // core/collective.h

// Decode activations rounded to 8 bits (act_q8.h): token t's values at
// q + t * K (int8, 16-byte aligned) and ds + t * K / 32, one {d, d * sum(q)}
// per 32 values. q == nullptr: none.
struct ActQ8 {
    int8_t* q = nullptr;
    float2* ds = nullptr;
    // Set where the rounding was done ahead of its RMSNorm's scale (a block
    // writer sees only its block's values): q, ds are x * (weight + offset)
    // rounded, with d kept in float, and sumsq holds the sums of x^2 of each
    // sumsq_rows values (32; a float writer whose blocks hold fewer rows: 8
    // or 16); the reader multiplies its dot products by
    // 1 / sqrt(sum / K + eps) (act_scale). One token only.
    float* sumsq = nullptr;
    float eps = 0.0f;
    uint32_t sumsq_rows = 32;
};

// The RMSNorm applied before rounding to 8 bits (x * scale * (weight +
// offset), as the rmsnorm kernel computes it); weight == nullptr: none.
struct ActQ8Norm {
    const float* weight = nullptr;
    float eps = 0.0f;
    float offset = 0.0f;
};

// A vector one command writes and the next one rounds to 8 bits (or
// normalizes) first (a decode GEMV's input, maybe behind an RMSNorm): when
// both launchers describe the same vector, the writer prepares it as it
// writes and the reader's rounding or norm kernel goes
// (CudaDevice::launch_commands links them; CudaArgs::q8_out / q8_in). The
// writers (Q8LinkKind, cuda_tuning.h): the decode attention rounds per head;
// gate + up and projection + residual round inside blocks of 32 warps, one
// 32-value rounding block a thread block, so no block waits on another. The
// residual writer cannot see the norm's sum over all values: it rounds
// x * (weight + offset) and leaves each block's sum of squares
// (ActQ8::sumsq), and the reader scales its dot products (act_scale).
struct Q8Link {
    const float* x = nullptr;
    uint32_t K = 0, m = 0;  // values per token, tokens (rows K floats apart)
    ActQ8Norm norm;         // reader: the norm it would apply first
    bool norms = false;     // writer: whether it can apply one (it sees every value)
    bool f32 = false;       // reader: wants the normalized values as floats, not rounded
    uint32_t kind = 0;      // writer: its Q8LinkKind
    bool defers_norm = false;  // writer: rounds x * (weight + offset), the reader scales (ActQ8::sumsq)
    uint32_t sumsq_rows = 32;  // writer that defers: values a sum of squares (ActQ8::sumsq_rows)
    bool scales = false;       // reader: can apply that scale
};

// A command's bound buffers (already offset) and patched parameter bytes.
struct CommandBytes {
    uint8_t* buf[10];  // DispatchCmd::MAX_BUFFERS
    uint8_t params[80];  // DispatchCmd::MAX_PARAM_BYTES

    template <typename T>
    T p() const {
        T v;
        std::memcpy(&v, params, sizeof(T));
        return v;
    }
    template <typename T>
    T* b(int i) const { return reinterpret_cast<T*>(buf[i]); }
};

// Bytes at the start of CudaArgs::workspace kept for counters (4 bytes a
// head or row: up to 1024).
constexpr size_t kWorkspaceCounterBytes = 4096;

struct CudaArgs : CommandBytes {
    cudaStream_t stream;
    // Bytes from each bound buffer's address (buf, its offset applied) to the
    // buffer's end; 0: unbound or not known. A launcher that writes a buffer
    // whose binding is optional checks it holds what it would write.
    size_t buf_bytes[10] = {};  // DispatchCmd::MAX_BUFFERS
    // The device's tuning (cuda_tuning.h), decided when it was made.
    const CudaTuning* tuning = nullptr;
    // Set only while a decode step is captured into a CUDA graph (one graph
    // serves every position): the replay state lives in device memory and a
    // kernel reads its position from *replay_pos instead of the patched
    // parameter, and its token slot (an int32 index into buffer 1) from
    // *replay_token. Only launchers whose entry says `reads_replay` see them.
    const uint32_t* replay_pos = nullptr;
    const uint32_t* replay_token = nullptr;
    // Device scratch owned by the CudaDevice (split-attention partials), zeroed
    // at creation. Its first kWorkspaceCounterBytes hold counters, zero at
    // rest (a kernel that counts in them leaves them at zero); partials go
    // after them (workspace_partials), so one kernel's partials never land
    // on another's counters.
    uint8_t* workspace = nullptr;
    size_t workspace_bytes = 0;
    // Device scratch for a decode GEMV's 8-bit activations (act_q8.h): written
    // and read by the kernels of one command, so every command may reuse it.
    uint8_t* act_scratch = nullptr;
    size_t act_scratch_bytes = 0;
    // Device scratch of the split-K GEMMs over batch tables' decode rows
    // (gemm_rows.cuh, gemm_tc.cuh): per-tile counters, zeroed at creation and left at zero,
    // then F32 partials.
    uint8_t* split_scratch = nullptr;
    size_t split_scratch_bytes = 0;
    // The device's cuBLAS prefill GEMM (gemm_blas.h), or nullptr without cuBLAS.
    BlasGemm* blas = nullptr;
    // Tensor parallelism: this rank's collective (Device::set_collective; NCCL,
    // nccl_collective.h), or nullptr on a device that is not a rank. The
    // collective commands (collective.cu) enqueue through it on `stream`.
    Collective* collective = nullptr;
    // Set by a Q8Link (see there): the writer also stores its output's 8-bit
    // rounding at q8_out; the reader finds its input already rounded at q8_in.
    ActQ8 q8_out, q8_in;
    ActQ8Norm q8_out_norm;  // the norm the writer applies first (weight == nullptr: none)
    float* f32_out = nullptr;       // a float reader's link: the normalized values, not rounded
    const float* f32_in = nullptr;
    // (a writer that defers the norm's scale, Q8Link::defers_norm, to a float
    // reader: the sums of squares as ActQ8::sumsq holds them, and the eps)
    float* f32_out_sumsq = nullptr;
    const float* f32_in_sumsq = nullptr;
    float f32_in_eps = 0.0f;
    uint32_t f32_in_sumsq_rows = 32;
    // The command before this one, when this launch does its work too
    // (CudaKernelEntry::absorbs; that command is then not launched).
    struct Absorbed : CommandBytes {
        bool set = false;
    } absorbed;
    // The command before that one, when the absorbed command had absorbed it
    // in turn (two levels at most: a decode token's expert gate, up and
    // gated activation run as one kernel).
    Absorbed absorbed_before;
};

using CudaLauncher = void (*)(const CudaArgs&);

struct CudaKernelEntry {
    const char* name;
    CudaLauncher launch;
    // The launcher honours CudaArgs::replay_pos / replay_token and its launch
    // shape does not depend on the position: a command that patches the
    // position or token slot can be captured in a decode graph only then.
    bool reads_replay = false;
    // Q8Link sides (optional): the vector this command can round as it writes
    // it (honouring CudaArgs::q8_out), and the vector it would round before
    // reading it (honouring CudaArgs::q8_in); false when it has none.
    bool (*q8_output)(const CudaArgs&, Q8Link*) = nullptr;
    bool (*q8_input)(const CudaArgs&, Q8Link*) = nullptr;
    // Whether this launch can also do the work of the command before it (the
    // entry named prev, launched with prev_args) in the same kernel: one
    // dependent step fewer (the decode attention absorbs qk_norm_rope_kv).
    // prev_args.absorbed is what that command absorbed itself: an entry that
    // cannot do that work too refuses when it is set.
    bool (*absorbs)(const CudaArgs& self, const char* prev, const CudaArgs& prev_args) = nullptr;
};

#ifdef __CUDACC__
// The position a kernel runs at: the replay state's inside a captured decode
// graph, else the parameter patched on the host.
__device__ inline uint32_t replay_position(const uint32_t* replay_pos, uint32_t patched) {
    return replay_pos ? *replay_pos : patched;
}
// The token slot's element of a chain-id buffer (see replay_position).
template <typename T>
__device__ inline T* replay_slot(T* base, const uint32_t* replay_token) {
    return replay_token ? base + *replay_token : base;
}
#endif

inline unsigned blocks_for(size_t n, unsigned threads) { return (unsigned)((n + threads - 1) / threads); }

// Lets `kernel` launch with up to `bytes` of dynamic shared memory on the
// current device (above 48 KB a kernel must ask). Asked once per kernel and
// device; a failed ask (cudaFuncSetAttribute can return an earlier launch's
// error, left for its caller to see) is not remembered, so the next launch
// asks again instead of failing for the rest of the process.
inline void allow_dynamic_shared(const void* kernel, int bytes) {
    struct Grant {
        int device;
        const void* kernel;
        int bytes;
    };
    static std::mutex lock;
    static std::vector<Grant> granted;
    int device = 0;
    cudaGetDevice(&device);
    std::lock_guard<std::mutex> hold(lock);
    for (const Grant& g : granted)
        if (g.device == device && g.kernel == kernel && g.bytes >= bytes) return;
    if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) == cudaSuccess)
        granted.push_back({device, kernel, bytes});
}

// Programmatic dependent launch (Hopper): a kernel launched by launch_pdl may
// start while the kernel before it on the stream still runs, so its launch,
// block scheduling and reads of immutable data (weights) overlap that
// kernel's tail. Decode steps are chains of ~10 small kernels a layer, where
// those gaps are most of the time. The contract, for every kernel launched
// this way: call pdl_wait() before touching anything an earlier kernel
// writes or reads (activations, caches, scratch; the wait returns once the
// previous kernel has finished and its writes are visible), on every path
// (an exit before it would let the next kernel run ahead of this one's
// predecessor); then pdl_launch_dependents() lets the next kernel start.
// Only weights and parameters may be touched before the wait (and L2
// prefetch hints of anything: nothing reads their result, L2 is coherent). (A block that
// touches no memory at all may leave without waiting, so long as other blocks
// of the grid always wait: the grid still ends after its predecessor.)
//
// kernel<<<grid, block, shared, stream>>>(args...), as a programmatic
// dependent of the stream's previous kernel when `programmatic`.
template <typename... Params, typename... Args>
cudaError_t launch_maybe_pdl(bool programmatic, void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared,
                             cudaStream_t stream, Args&&... args) {
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = shared;
    cfg.stream = stream;
    cfg.attrs = attr;
    cfg.numAttrs = programmatic ? 1 : 0;
    return cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}

// kernel<<<grid, block, shared, a.stream>>>(args...), a programmatic
// dependent where the device's tuning says so (CudaTuning::pdl). A failed
// launch is reported as with <<<>>>: by the next synchronization.
template <typename... Params, typename... Args>
void launch_pdl(void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared, const CudaArgs& a,
                Args&&... args) {
    launch_maybe_pdl(a.tuning->pdl, kernel, grid, block, shared, a.stream, std::forward<Args>(args)...);
}

#ifdef __CUDACC__
// See launch_pdl: waits for the previous kernel (a no-op for a plain launch).
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
// See launch_pdl: the next kernel may be scheduled once every block got here.
__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
// Asks L2 for up to `bytes` of weights at p, a 128-byte line per lane of the
// warp at a time (before pdl_wait: weights never change during a step).
__device__ __forceinline__ void prefetch_l2(const void* p, size_t bytes) {
    const uint8_t* b = static_cast<const uint8_t*>(p);
    for (size_t off = (size_t)(threadIdx.x % 32) * 128; off < bytes; off += 32 * 128)
        asm volatile("prefetch.global.L2 [%0];" ::"l"(b + off));
}
// Asks this SM's L1 for the line holding p (before pdl_wait: a norm's
// weights, read after the block's reduction, then hit L1 instead of L2).
__device__ __forceinline__ void prefetch_l1(const void* p) { asm volatile("prefetch.global.L1 [%0];" ::"l"(p)); }
#endif

}  // namespace akunu
