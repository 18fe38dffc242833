// Declarations of the CoreFoundation API that backend/metal/metal_device.mm
// uses, written from Apple's documentation (developer.apple.com/documentation/
// corefoundation), spelled as Apple spells them, for a compile-only check of
// that file on machines without macOS (../../check_host_compile.sh). Nothing
// here is implemented: the check never links.
#pragma once
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef const void* CFTypeRef;
typedef unsigned long CFTypeID;
typedef long CFIndex;
typedef double CFTimeInterval;
typedef const struct __CFString* CFStringRef;
typedef const struct __CFNumber* CFNumberRef;
typedef const struct __CFAllocator* CFAllocatorRef;
typedef uint32_t CFOptionFlags;
typedef struct __CFDictionary* CFMutableDictionaryRef;

typedef enum : CFIndex {
    kCFNumberSInt32Type = 3,
    kCFNumberIntType = 9,
} CFNumberType;

extern const CFAllocatorRef kCFAllocatorDefault;

CFTypeID CFGetTypeID(CFTypeRef cf);
CFTypeID CFNumberGetTypeID(void);
unsigned char CFNumberGetValue(CFNumberRef number, CFNumberType theType, void* valuePtr);
void CFRelease(CFTypeRef cf);

// CFSTR("...") is a compile-time constant CFString (clang's builtin, as in Apple's header).
#define CFSTR(cStr) ((CFStringRef)__builtin___CFStringMakeConstantString("" cStr ""))

#ifdef __cplusplus
}
#endif
