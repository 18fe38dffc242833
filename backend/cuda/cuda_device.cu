#include "cuda_device.h"

#include "core/dispatch_table.h"
#include "core/error.h"

namespace akunu {

extern const CudaKernelEntry kCudaMatmulKernels[];
extern const CudaKernelEntry kCudaElementwiseKernels[];
extern const CudaKernelEntry kCudaAttentionKernels[];
extern const CudaKernelEntry kCudaSamplingKernels[];

namespace {
void check(cudaError_t e, const char* what) {
    if (e != cudaSuccess) throw Error(std::string("CUDA error in ") + what + ": " + cudaGetErrorString(e));
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
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
}

CudaDevice::~CudaDevice() {
    if (stream_) {
        cudaStreamSynchronize(stream_);
        cudaStreamDestroy(stream_);
    }
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
         {kCudaMatmulKernels, kCudaElementwiseKernels, kCudaAttentionKernels, kCudaSamplingKernels})
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

void CudaDevice::set_buffer(Buffer buf, size_t offset, int index) {
    bound_.buf[index] = buf.handle ? (uint8_t*)buf.handle + offset : nullptr;
}

void CudaDevice::set_bytes(const void* data, int size, int) { std::memcpy(bound_.params, data, (size_t)size); }

void CudaDevice::dispatch(Dim3, Dim3) {
    CudaArgs a;
    std::memcpy(a.buf, bound_.buf, sizeof(a.buf));
    std::memcpy(a.params, bound_.params, sizeof(a.params));
    a.stream = stream_;
    bound_.fn->launch(a);
}

// Launches every command of the table on the stream; nothing waits here.
void CudaDevice::encode_dispatch_table(const DispatchTable& table, const ReplayState& st) {
    CudaArgs a;
    a.stream = stream_;
    for (const DispatchCmd& cmd : table.commands) {
        for (int i = 0; i < cmd.buffer_count; i++) {
            size_t off = cmd.offsets[i] + (i == cmd.patch_token_buffer ? 4u * st.token_index : 0u);
            a.buf[i] = cmd.buffers[i].handle ? (uint8_t*)cmd.buffers[i].handle + off : nullptr;
        }
        patch_params(cmd, st, a.params);
        ((const CudaKernelEntry*)cmd.pso.handle)->launch(a);
    }
}

// Each command between two synchronizations, timed by CUDA events.
std::vector<double> CudaDevice::time_commands(const DispatchTable& table, const ReplayState& st) {
    cudaEvent_t t0, t1;
    check(cudaEventCreate(&t0), "cudaEventCreate");
    check(cudaEventCreate(&t1), "cudaEventCreate");
    std::vector<double> out;
    DispatchTable one;
    one.commands.resize(1);
    for (const DispatchCmd& cmd : table.commands) {
        one.commands[0] = cmd;
        cudaEventRecord(t0, stream_);
        encode_dispatch_table(one, st);
        cudaEventRecord(t1, stream_);
        sync();
        float ms = 0;
        cudaEventElapsedTime(&ms, t0, t1);
        out.push_back(ms / 1e3);
    }
    cudaEventDestroy(t0);
    cudaEventDestroy(t1);
    return out;
}

}  // namespace akunu
