// Tensor-core building blocks at the PTX level (sm_80+): the m16n8k16 F16
// product with F32 accumulation, whose fragment layouts are documented (so
// kernels can work on accumulator rows in registers, e.g. online softmax),
// and ldmatrix. Fragment layout, with g = lane / 4 and t = lane % 4:
//   A (16x16, row-major): a0 = (g, 2t..2t+1), a1 = (g+8, 2t..), a2 = (g, 2t+8..), a3 = (g+8, 2t+8..)
//   B (16x8, k x n):      b0 = (k 2t..2t+1, n g), b1 = (k 2t+8..2t+9, n g)
//   C (16x8, F32):        c0, c1 = (g, 2t..2t+1), c2, c3 = (g+8, 2t..2t+1)
#pragma once
#include <cuda_fp16.h>

#include <cstdint>

namespace akunu {

// F16 pair <-> its 32-bit pattern (the first value in the low half).
__device__ __forceinline__ uint32_t half2_bits(__half2 h) {
    union {
        __half2 h;
        uint32_t u;
    } v;
    v.h = h;
    return v.u;
}
__device__ __forceinline__ __half2 as_half2(uint32_t u) {
    union {
        uint32_t u;
        __half2 h;
    } v;
    v.u = u;
    return v.h;
}

// 2^x on the special-function unit, results below 2^-126 flushed to zero:
// exp2f's range handling (a compare and two multiplies around the unit) only
// keeps such weights, which an online softmax adds to a sum of at least 1
// and rounds to F16 (where they are 0) anyway.
__device__ __forceinline__ float exp2_ftz(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

// Two floats as an F16 pair (round to nearest), the first in the low half.
__device__ __forceinline__ uint32_t pack_half2(float a, float b) { return half2_bits(__floats2half2_rn(a, b)); }

// c += A B for one 16x8x16 tile.
__device__ __forceinline__ void mma_16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Four 8x8 F16 matrices from shared memory: lanes 8i..8i+7 give the
// addresses of matrix i's rows (16 bytes each); register i is this lane's
// pair (row g, columns 2t, 2t+1) of matrix i — an A fragment, or a B
// fragment when the rows run along n.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* row) {
    const uint32_t addr = (uint32_t)__cvta_generic_to_shared(row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

// Four 8x8 F16 matrices from shared memory, transposed: lanes 8i..8i+7 give
// the addresses of matrix i's rows (16 bytes each); register i is this
// lane's pair (rows 2t, 2t+1; column g) of matrix i — a B fragment when the
// rows run along k.
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* row) {
    const uint32_t addr = (uint32_t)__cvta_generic_to_shared(row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

}  // namespace akunu
