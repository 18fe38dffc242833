// Global -> shared copies that bypass registers (cp.async, sm_80 and later):
// a kernel issues the loads of a later tile, commits them as a group, and
// waits for all but the newest N groups before it reads a staged tile, so
// the loads overlap its arithmetic.
#pragma once
#include <cstdint>

namespace akunu {

// 16 bytes from `src` to `dst`; `valid` false writes zeros and reads nothing
// (src must still be a mapped address).
__device__ __forceinline__ void copy16_async(void* dst, const void* src, bool valid) {
    const uint32_t s = (uint32_t)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(src), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void copy_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void copy_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

}  // namespace akunu
