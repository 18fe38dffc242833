// Declarations of the IOKit API that backend/metal/metal_device.mm uses
// (reading the GPU core count from the AGXAccelerator registry entry),
// written from Apple's documentation (developer.apple.com/documentation/
// iokit), for the compile-only check on machines without macOS
// (../../check_host_compile.sh).
#pragma once
#include <CoreFoundation/CoreFoundation.h>
#include <mach/mach.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef mach_port_t io_object_t;
typedef io_object_t io_iterator_t;
typedef io_object_t io_registry_entry_t;
typedef uint32_t IOOptionBits;

extern const mach_port_t kIOMainPortDefault;  // macOS 12 and later

CFMutableDictionaryRef IOServiceMatching(const char* name);
kern_return_t IOServiceGetMatchingServices(mach_port_t mainPort, CFMutableDictionaryRef matching,
                                           io_iterator_t* existing);
io_object_t IOIteratorNext(io_iterator_t iterator);
CFTypeRef IORegistryEntryCreateCFProperty(io_registry_entry_t entry, CFStringRef key, CFAllocatorRef allocator,
                                          IOOptionBits options);
kern_return_t IOObjectRelease(io_object_t object);

#ifdef __cplusplus
}
#endif
