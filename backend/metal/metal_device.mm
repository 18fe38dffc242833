// MetalDevice: the Objective-C++ half of metal_device.h. Compiled with ARC
// (-fobjc-arc) on macOS only.
#import <Foundation/Foundation.h>
#import <IOKit/IOKitLib.h>
#import <Metal/Metal.h>
#include <dlfcn.h>
#include <mach/mach.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "core/dispatch_table.h"
#include "core/error.h"
#include "metal_device.h"
#include "metal_launch.h"

namespace akunu {

struct MetalDevice::Impl {
    id<MTLDevice> device = nil;
    id<MTLCommandQueue> queue = nil;
    id<MTLLibrary> library = nil;
    id<MTLCommandBuffer> cmd = nil;            // open command buffer (nil: none)
    id<MTLComputeCommandEncoder> enc = nil;    // its encoder
    id<MTLCommandBuffer> in_flight = nil;      // committed, not yet waited for
    id<MTLBuffer> dummy = nil;                 // bound to argument slots a command leaves empty
    id<MTLSharedEvent> event = nil;            // end_encoding_event / wait_event
    uint64_t event_value = 0;
    std::map<std::string, id<MTLComputePipelineState>> pipelines;  // MSL function (+ constants) -> state
    // What a Pipeline handle points to: the spec and the states of its MSL
    // functions, built when the dispatch table is (nothing is looked up per token).
    struct Entry {
        const MetalKernelSpec* spec = nullptr;
        id<MTLComputePipelineState> pso[kMetalMaxVariants] = {};
    };
    std::map<const MetalKernelSpec*, std::unique_ptr<Entry>> entries;
    // set_* state of the generic encoding path
    const Entry* entry = nullptr;
    uint8_t params[DispatchCmd::MAX_PARAM_BYTES] = {};
    id<MTLBuffer> bound[DispatchCmd::MAX_BUFFERS] = {};
    NSUInteger bound_offsets[DispatchCmd::MAX_BUFFERS] = {};
    std::string name;
};

namespace {

// The metallib built with the package: next to the Python module / shared
// library this code lives in, unless AKUNU_METALLIB names another.
std::string metallib_path() {
    if (const char* env = std::getenv("AKUNU_METALLIB")) return env;
    Dl_info info;
    if (dladdr((const void*)&metallib_path, &info) && info.dli_fname) {
        std::string p = info.dli_fname;
        const size_t slash = p.rfind('/');
        return (slash == std::string::npos ? std::string(".") : p.substr(0, slash)) + "/akunu.metallib";
    }
    return "akunu.metallib";
}

// GPU cores from IOKit's AGXAccelerator entry (the most reliable chip-tier signal).
int gpu_core_count() {
    int cores = 0;
    io_iterator_t it;
    if (IOServiceGetMatchingServices(kIOMainPortDefault, IOServiceMatching("AGXAccelerator"), &it) != KERN_SUCCESS)
        return 0;
    for (io_object_t e = IOIteratorNext(it); e; e = IOIteratorNext(it)) {
        CFTypeRef v = IORegistryEntryCreateCFProperty(e, CFSTR("gpu-core-count"), kCFAllocatorDefault, 0);
        if (v) {
            if (CFGetTypeID(v) == CFNumberGetTypeID()) CFNumberGetValue((CFNumberRef)v, kCFNumberIntType, &cores);
            CFRelease(v);
        }
        IOObjectRelease(e);
        if (cores) break;
    }
    IOObjectRelease(it);
    return cores;
}

int gpu_family(id<MTLDevice> d) {
    if (@available(macOS 14.0, *)) {
        if ([d supportsFamily:MTLGPUFamilyApple9]) return 9;
    }
    if ([d supportsFamily:MTLGPUFamilyApple8]) return 8;
    if ([d supportsFamily:MTLGPUFamilyApple7]) return 7;
    return 6;
}

id<MTLBuffer> mtl(Buffer b) { return (__bridge id<MTLBuffer>)b.handle; }

}  // namespace

bool MetalDevice::available() {
    @autoreleasepool {
        return MTLCreateSystemDefaultDevice() != nil;
    }
}

MetalDevice::MetalDevice() : impl_(new Impl) {
    @autoreleasepool {
        impl_->device = MTLCreateSystemDefaultDevice();
        if (!impl_->device) throw Error("device 'metal': no Metal GPU on this machine");
        impl_->queue = [impl_->device newCommandQueue];
        const std::string path = metallib_path();
        NSError* err = nil;
        impl_->library = [impl_->device newLibraryWithURL:[NSURL fileURLWithPath:@(path.c_str())] error:&err];
        if (!impl_->library)
            throw Error("device 'metal': cannot load " + path + ": " +
                        (err ? std::string(err.localizedDescription.UTF8String) : std::string("unknown error")));
        impl_->dummy = [impl_->device newBufferWithLength:256 options:MTLResourceStorageModeShared];
        impl_->event = [impl_->device newSharedEvent];
        impl_->name = impl_->device.name.UTF8String;
        chip_ = ChipConfig::from_gpu(gpu_core_count(), gpu_family(impl_->device));
        chip_.max_threads_per_tg = (int)impl_->device.maxThreadsPerThreadgroup.width;
    }
}

MetalDevice::~MetalDevice() {
    try {
        sync();
    } catch (...) {
    }
}

const char* MetalDevice::name() const { return impl_->name.c_str(); }
size_t MetalDevice::total_memory() const { return (size_t)impl_->device.recommendedMaxWorkingSetSize; }
size_t MetalDevice::available_memory() const {
    const size_t used = (size_t)impl_->device.currentAllocatedSize, total = total_memory();
    return used < total ? total - used : 0;
}

// One pipeline state per MSL function (and function-constant values, none in
// akunu's kernels today: they specialize with templates), built at load.
static id<MTLComputePipelineState> pipeline_for(MetalDevice::Impl& m, const std::string& function) {
    auto it = m.pipelines.find(function);
    if (it != m.pipelines.end()) return it->second;
    NSError* err = nil;
    MTLFunctionConstantValues* constants = [MTLFunctionConstantValues new];
    id<MTLFunction> fn = [m.library newFunctionWithName:@(function.c_str()) constantValues:constants error:&err];
    if (!fn) throw Error("akunu.metallib has no function '" + function + "'");
    id<MTLComputePipelineState> pso = [m.device newComputePipelineStateWithFunction:fn error:&err];
    if (!pso)
        throw Error("cannot build the Metal pipeline '" + function + "': " +
                    (err ? std::string(err.localizedDescription.UTF8String) : std::string("unknown error")));
    m.pipelines[function] = pso;
    return pso;
}

Pipeline MetalDevice::get_pipeline(const std::string& name) {
    const MetalKernelSpec* spec = metal_kernel_spec(name);
    if (!spec) throw Error("Metal backend has no kernel named '" + name + "'");
    std::unique_ptr<Impl::Entry>& e = impl_->entries[spec];
    if (!e) {
        auto fresh = std::make_unique<Impl::Entry>();
        fresh->spec = spec;
        for (int i = 0; i < kMetalMaxVariants; i++)
            if (spec->functions[i]) fresh->pso[i] = pipeline_for(*impl_, spec->functions[i]);
        e = std::move(fresh);
    }
    return Pipeline{e.get()};
}

Buffer MetalDevice::allocate(size_t bytes) {
    id<MTLBuffer> b = [impl_->device newBufferWithLength:(bytes ? bytes : 16) options:MTLResourceStorageModeShared];
    if (!b) throw Error("out of GPU memory allocating " + std::to_string(bytes) + " bytes");
    std::memset(b.contents, 0, bytes);
    return Buffer{(__bridge_retained void*)b, bytes, b.contents};
}

Buffer MetalDevice::allocate(const void* data, size_t bytes) {
    Buffer b = allocate(bytes);
    std::memcpy(b.contents, data, bytes);
    return b;
}

// Unified memory: page-aligned host memory (the mmapped weights) becomes a
// buffer without a copy; anything else is copied.
Buffer MetalDevice::wrap_host(const void* data, size_t bytes) {
    const size_t page = (size_t)getpagesize();
    if (((uintptr_t)data % page) == 0 && bytes > 0) {
        const size_t len = (bytes + page - 1) / page * page;
        id<MTLBuffer> b = [impl_->device newBufferWithBytesNoCopy:(void*)data length:len
                                                         options:MTLResourceStorageModeShared deallocator:nil];
        if (b) return Buffer{(__bridge_retained void*)b, bytes, b.contents};
    }
    return allocate(data, bytes);
}

void MetalDevice::free_buffer(Buffer buf) {
    if (!buf.handle) return;
    sync();  // the GPU may still read it
    id<MTLBuffer> b = (__bridge_transfer id<MTLBuffer>)buf.handle;  // ARC owns it again: released at scope end
    (void)b;
}

// Host access to shared memory: pending GPU work first.
void MetalDevice::write_buffer(Buffer dst, const void* src, size_t bytes, size_t offset) {
    sync();
    std::memcpy((uint8_t*)dst.contents + offset, src, bytes);
}

void MetalDevice::read_buffer(void* dst, Buffer src, size_t bytes, size_t offset) {
    sync();
    std::memcpy(dst, (const uint8_t*)src.contents + offset, bytes);
}

void MetalDevice::copy_buffer(Buffer dst, size_t dst_offset, Buffer src, size_t src_offset, size_t bytes) {
    sync();
    std::memmove((uint8_t*)dst.contents + dst_offset, (const uint8_t*)src.contents + src_offset, bytes);
}

void MetalDevice::begin_encoding() {
    if (impl_->cmd) return;  // keep appending to the open command buffer
    impl_->cmd = [impl_->queue commandBufferWithUnretainedReferences];
    impl_->enc = [impl_->cmd computeCommandEncoderWithDispatchType:MTLDispatchTypeSerial];
}

void MetalDevice::set_pipeline(Pipeline pso) { impl_->entry = static_cast<const Impl::Entry*>(pso.handle); }

void MetalDevice::set_buffer(Buffer buf, size_t offset, int index) {
    impl_->bound[index] = buf.handle ? mtl(buf) : nil;
    impl_->bound_offsets[index] = offset;
}

void MetalDevice::set_bytes(const void* data, int size, int) { std::memcpy(impl_->params, data, (size_t)size); }

// One command onto the open encoder: its pipeline, buffers (empty slots get the
// dummy), the parameter block at AK_PARAMS, threadgroup memory, dispatch.
static void encode_command(MetalDevice::Impl& m, const ChipConfig& chip, const MetalDevice::Impl::Entry& e,
                           id<MTLBuffer> const* buffers, const NSUInteger* offsets, const uint8_t* params) {
    const MetalLaunch l = e.spec->launch(params, chip);
    if (l.grid.x == 0 || l.grid.y == 0 || l.grid.z == 0) return;
    [m.enc setComputePipelineState:e.pso[l.variant]];
    for (int i = 0; i < e.spec->n_buffers; i++)
        [m.enc setBuffer:(buffers[i] ? buffers[i] : m.dummy)
                  offset:(buffers[i] ? offsets[i] : 0)
                 atIndex:metal_buffer_index(i)];
    [m.enc setBytes:params length:DispatchCmd::MAX_PARAM_BYTES atIndex:kMetalParamsIndex];
    if (l.tg_memory) [m.enc setThreadgroupMemoryLength:(l.tg_memory + 15) / 16 * 16 atIndex:0];
    [m.enc dispatchThreadgroups:MTLSizeMake(l.grid.x, l.grid.y, l.grid.z)
          threadsPerThreadgroup:MTLSizeMake(l.threads, 1, 1)];
}

void MetalDevice::dispatch(Dim3, Dim3) {
    begin_encoding();
    encode_command(*impl_, chip_, *impl_->entry, impl_->bound, impl_->bound_offsets, impl_->params);
}

void MetalDevice::end_encoding_async() {
    if (!impl_->cmd) return;
    [impl_->enc endEncoding];
    [impl_->cmd commit];
    impl_->in_flight = impl_->cmd;
    impl_->cmd = nil;
    impl_->enc = nil;
}

void MetalDevice::sync() {
    end_encoding_async();
    if (!impl_->in_flight) return;
    [impl_->in_flight waitUntilCompleted];
    NSError* err = impl_->in_flight.error;
    impl_->in_flight = nil;
    if (err) throw Error(std::string("Metal command buffer failed: ") + err.localizedDescription.UTF8String);
}

void MetalDevice::end_encoding_sync() { sync(); }

uint64_t MetalDevice::end_encoding_event() {
    begin_encoding();
    [impl_->enc endEncoding];
    const uint64_t value = ++impl_->event_value;
    [impl_->cmd encodeSignalEvent:impl_->event value:value];
    [impl_->cmd commit];
    impl_->in_flight = impl_->cmd;
    impl_->cmd = nil;
    impl_->enc = nil;
    return value;
}

void MetalDevice::wait_event(uint64_t value) {
    while (impl_->event.signaledValue < value) std::this_thread::yield();
}

// Appends the table to the open command buffer; nothing waits here (chain
// decode: the next read_buffer commits N tokens' worth of commands at once).
// No allocation: buffers and parameters are resolved on the stack.
void MetalDevice::encode_dispatch_table(const DispatchTable& table, const ReplayState& st) {
    begin_encoding();
    uint8_t params[DispatchCmd::MAX_PARAM_BYTES];
    id<MTLBuffer> bufs[DispatchCmd::MAX_BUFFERS];
    NSUInteger offs[DispatchCmd::MAX_BUFFERS];
    for (const DispatchCmd& cmd : table.commands) {
        const Impl::Entry& entry = *static_cast<const Impl::Entry*>(cmd.pso.handle);
        for (int i = 0; i < DispatchCmd::MAX_BUFFERS; i++) {
            const bool set = i < cmd.buffer_count && cmd.buffers[i].handle;
            bufs[i] = set ? mtl(cmd.buffers[i]) : nil;
            offs[i] = set ? replay_offset(cmd, i, st) : 0;
        }
        patch_params(cmd, st, params);
        encode_command(*impl_, chip_, entry, bufs, offs, params);
    }
}

// One replay in its own command buffer, timed by the GPU's own clock.
double MetalDevice::time_table(const DispatchTable& table, const ReplayState& st) {
    sync();
    encode_dispatch_table(table, st);
    id<MTLCommandBuffer> cb = impl_->cmd;
    sync();
    return cb.GPUEndTime - cb.GPUStartTime;
}

}  // namespace akunu
