// Declarations of the Metal API that backend/metal/metal_device.mm uses,
// written from Apple's documentation (developer.apple.com/documentation/
// metal), selectors, types and enumerator values spelled as Apple spells
// them, for a compile-only check of that file (Objective-C++, ARC) on
// machines without macOS (../../check_host_compile.sh). Only what the file
// uses: a selector missing here or spelled differently is a compile error.
#pragma once
#import <Foundation/Foundation.h>

#pragma clang assume_nonnull begin  // as Apple's headers (NS_ASSUME_NONNULL_BEGIN)

typedef struct {
    NSUInteger width, height, depth;
} MTLSize;

static inline MTLSize MTLSizeMake(NSUInteger width, NSUInteger height, NSUInteger depth) {
    MTLSize s = {width, height, depth};
    return s;
}

// MTLResourceOptions: the storage mode sits at MTLResourceStorageModeShift (4);
// MTLStorageModeShared is 0.
typedef NSUInteger MTLResourceOptions;
enum : NSUInteger {
    MTLResourceCPUCacheModeDefaultCache = 0,
    MTLResourceStorageModeShared = 0UL << 4,
    MTLResourceStorageModeManaged = 1UL << 4,
    MTLResourceStorageModePrivate = 2UL << 4,
};

typedef enum : NSInteger {
    MTLGPUFamilyApple7 = 1007,
    MTLGPUFamilyApple8 = 1008,
    MTLGPUFamilyApple9 = 1009,
} MTLGPUFamily;

typedef enum : NSUInteger {
    MTLDispatchTypeSerial = 0,
    MTLDispatchTypeConcurrent = 1,
} MTLDispatchType;

@protocol MTLResource <NSObject>
@end

@protocol MTLBuffer <MTLResource>
- (void*)contents;
@property(readonly) NSUInteger length;
@end

@protocol MTLFunction <NSObject>
@end

@interface MTLFunctionConstantValues : NSObject
@end

@protocol MTLLibrary <NSObject>
- (nullable id<MTLFunction>)newFunctionWithName:(NSString*)name
                                 constantValues:(MTLFunctionConstantValues*)constantValues
                                          error:(NSError* _Nullable __autoreleasing* _Nullable)error;
@end

@protocol MTLComputePipelineState <NSObject>
@end

@protocol MTLEvent <NSObject>
@end

@protocol MTLSharedEvent <MTLEvent>
@property uint64_t signaledValue;
@end

@protocol MTLCommandEncoder <NSObject>
- (void)endEncoding;
@end

@protocol MTLComputeCommandEncoder <MTLCommandEncoder>
- (void)setComputePipelineState:(id<MTLComputePipelineState>)state;
- (void)setBuffer:(nullable id<MTLBuffer>)buffer offset:(NSUInteger)offset atIndex:(NSUInteger)index;
- (void)setBytes:(const void*)bytes length:(NSUInteger)length atIndex:(NSUInteger)index;
- (void)setThreadgroupMemoryLength:(NSUInteger)length atIndex:(NSUInteger)index;
- (void)dispatchThreadgroups:(MTLSize)threadgroupsPerGrid threadsPerThreadgroup:(MTLSize)threadsPerThreadgroup;
@end

@protocol MTLCommandBuffer <NSObject>
- (nullable id<MTLComputeCommandEncoder>)computeCommandEncoderWithDispatchType:(MTLDispatchType)dispatchType;
- (void)encodeSignalEvent:(id<MTLEvent>)event value:(uint64_t)value;
- (void)commit;
- (void)waitUntilCompleted;
@property(nullable, readonly) NSError* error;
@property(readonly) CFTimeInterval GPUStartTime;
@property(readonly) CFTimeInterval GPUEndTime;
@end

@protocol MTLCommandQueue <NSObject>
- (nullable id<MTLCommandBuffer>)commandBufferWithUnretainedReferences;
@end

@protocol MTLDevice <NSObject>
@property(nonnull, readonly) NSString* name;
@property(readonly) MTLSize maxThreadsPerThreadgroup;
@property(readonly) uint64_t recommendedMaxWorkingSetSize;
@property(readonly) NSUInteger currentAllocatedSize;
- (nullable id<MTLCommandQueue>)newCommandQueue;
- (nullable id<MTLLibrary>)newLibraryWithURL:(NSURL*)url
                                       error:(NSError* _Nullable __autoreleasing* _Nullable)error;
- (nullable id<MTLBuffer>)newBufferWithLength:(NSUInteger)length options:(MTLResourceOptions)options;
- (nullable id<MTLBuffer>)newBufferWithBytesNoCopy:(void*)pointer
                                            length:(NSUInteger)length
                                           options:(MTLResourceOptions)options
                                       deallocator:(void (^_Nullable)(void* pointer, NSUInteger length))deallocator;
- (nullable id<MTLSharedEvent>)newSharedEvent;
- (BOOL)supportsFamily:(MTLGPUFamily)gpuFamily;
- (nullable id<MTLComputePipelineState>)newComputePipelineStateWithFunction:(id<MTLFunction>)computeFunction
                                                                       error:(NSError* _Nullable __autoreleasing* _Nullable)error;
@end

#ifdef __cplusplus
extern "C"
#endif
    id<MTLDevice> _Nullable MTLCreateSystemDefaultDevice(void);

#pragma clang assume_nonnull end
