// Kernels that test the emulation itself (compiled into the emulation
// library only, never into akunu.metallib): SIMD-group functions, lanes that
// return early, and a barrier reached by only part of a threadgroup.
#include "../kernels/akunu_msl.h"

struct SelftestParams {
    uint n;  // threads that stay to the end (the others return at once)
};

// out[9 * tid + ...]: simd_sum, simd_max, shuffle_xor 1, shuffle_down 1,
// broadcast lane 3, prefix exclusive sum, threadgroup-sum via memory, sgitg, tiisg
kernel void selftest_simd(device float* out [[buffer(0)]], constant SelftestParams& p [[buffer(AK_PARAMS)]],
                          threadgroup float* shared AK_THREADGROUP_MEMORY, AK_THREAD_ARGS) {
    if (tiitg >= p.n) return;
    const float v = (float)(tiitg * 3 % 17);
    device float* o = out + 9 * tiitg;
    o[0] = simd_sum(v);
    o[1] = simd_max(v);
    o[2] = simd_shuffle_xor(v, 1);
    o[3] = simd_shuffle_down(v, 1);
    o[4] = simd_broadcast(v, 3);
    o[5] = simd_prefix_exclusive_sum(v);
    shared[tiitg] = v;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    float s = 0.0f;
    for (uint i = 0; i < p.n; i++) s += shared[i];
    o[6] = s;
    o[7] = (float)sgitg;
    o[8] = (float)tiisg;
}
AK_EXPORT_KERNEL(selftest_simd)

// Threads below p.n wait at one barrier, the others at another: undefined on
// the GPU, an error in the emulation.
kernel void selftest_divergent_barrier(device float* out [[buffer(0)]], constant SelftestParams& p [[buffer(AK_PARAMS)]],
                                       AK_THREAD_ARGS) {
    if (tiitg < p.n) {
        threadgroup_barrier(mem_flags::mem_threadgroup);
        out[tiitg] = 1.0f;
    } else {
        out[tiitg] = 2.0f;
        threadgroup_barrier(mem_flags::mem_threadgroup);
        out[tiitg] += 1.0f;
    }
}
AK_EXPORT_KERNEL(selftest_divergent_barrier)

// 8x8 product through simdgroup_matrix: c = a * b (+ c)
kernel void selftest_matrix(device const float* a [[buffer(0)]], device const float* b [[buffer(1)]],
                            device float* c [[buffer(2)]], constant SelftestParams& p [[buffer(AK_PARAMS)]],
                            AK_THREAD_ARGS) {
    simdgroup_float8x8 ma, mb, mc;
    simdgroup_load(ma, a, 8);
    simdgroup_load(mb, b, 8);
    simdgroup_load(mc, c, 8);
    simdgroup_multiply_accumulate(mc, ma, mb, mc);
    simdgroup_store(mc, c, 8);
}
AK_EXPORT_KERNEL(selftest_matrix)
