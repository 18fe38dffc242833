// Declarations of the Foundation API that backend/metal/metal_device.mm uses,
// written from Apple's documentation (developer.apple.com/documentation/
// foundation), selectors and types spelled as Apple spells them, for a
// compile-only check of that file (Objective-C++, ARC) on machines without
// macOS (../../check_host_compile.sh). Only what the file uses: a selector
// missing here or spelled differently is a compile error there, which is the
// point of the check.
#pragma once
#include <CoreFoundation/CoreFoundation.h>

typedef long NSInteger;
typedef unsigned long NSUInteger;
typedef signed char BOOL;
#define nil nullptr  // Apple's objc.h: __DARWIN_NULL, nullptr in C++
#define YES ((BOOL)1)
#define NO ((BOOL)0)

__attribute__((objc_root_class))
@interface NSObject
+ (instancetype)alloc;
+ (instancetype)new;
- (instancetype)init;
@end

@protocol NSObject
@end

@interface NSString : NSObject
// @(const char*) boxes through this selector
+ (instancetype)stringWithUTF8String:(const char*)nullTerminatedCString;
@property(readonly) const char* UTF8String;
@end

@interface NSURL : NSObject
+ (NSURL*)fileURLWithPath:(NSString*)path;
@end

@interface NSError : NSObject
@property(readonly, copy) NSString* localizedDescription;
@end
