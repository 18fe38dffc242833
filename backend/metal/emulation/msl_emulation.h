// The subset of the Metal Shading Language that akunu's kernels use, for
// clang++ on the CPU, so that every .metal file compiles unchanged as C++ and
// runs on the fiber runner (fiber_runner.h). Included by kernels/akunu_msl.h
// when the compiler is not Metal's.
//
// Mapping:
// - address spaces `device`, `constant`, `thread`, `threadgroup` are erased
//   (`constant` becomes const); everything is host memory.
// - threadgroup memory comes only through the kernel argument
//   `threadgroup T* [[threadgroup(0)]]`, never as an array declared in the
//   kernel body (that would be one array per fiber here, silently wrong).
// - attributes in [[...]] are ignored by clang (-Wno-unknown-attributes); a
//   kernel's arguments are bound by position instead (AK_KERNEL_ARGS below).
// - `half` is __fp16 (see msl_types.h for where its rounding differs).
// - SIMD-group functions exchange values through per-lane slots between two
//   SIMD-group barriers; lanes that have returned do not take part, as
//   inactive lanes on the GPU.
// - simdgroup_matrix: every lane holds the whole 8x8 matrix and computes the
//   whole product; the GPU spreads it over the 32 lanes. Results are the same
//   up to the order of the float additions inside one 8x8x8 product.
// Not modelled: see fiber_runner.h (scheduling, lock-step execution, limits).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>

#include "fiber_runner.h"
#include "msl_types.h"

namespace metal {

template <typename T, typename S>
inline T as_type(S v) {
    static_assert(sizeof(T) == sizeof(S), "as_type: sizes differ");
    return __builtin_bit_cast(T, v);
}

using std::abs;
using std::ceil;
using std::cos;
using std::exp;
using std::exp2;
using std::fabs;
using std::floor;
using std::fma;
using std::isinf;
using std::isnan;
using std::log;
using std::log2;
using std::pow;
using std::round;
using std::sin;
using std::sqrt;
using std::tanh;
using std::trunc;
template <typename T>
inline T min(T a, T b) { return b < a ? b : a; }
template <typename T>
inline T max(T a, T b) { return a < b ? b : a; }
inline float fmin(float a, float b) { return std::fmin(a, b); }
inline float fmax(float a, float b) { return std::fmax(a, b); }
template <typename T>
inline T clamp(T x, T lo, T hi) { return min(max(x, lo), hi); }
inline float rsqrt(float x) { return 1.0f / std::sqrt(x); }
template <typename V>
inline auto dot(V a, V b) -> decltype(a.x * b.x) {
    V p = a * b;
    decltype(a.x * b.x) s = 0;
    for (unsigned i = 0; i < sizeof(V) / sizeof(p[0]); i++) s += p[i];
    return s;
}

namespace precise {
using std::cos;
using std::exp;
using std::log;
using std::sin;
using std::sqrt;
using std::tanh;
}  // namespace precise
namespace fast {
using std::cos;
using std::exp;
using std::log;
using std::sin;
using std::sqrt;
using std::tanh;
}  // namespace fast

// ---- synchronisation --------------------------------------------------------
enum class mem_flags { mem_none = 0, mem_device = 1, mem_threadgroup = 2, mem_texture = 4 };
inline mem_flags operator|(mem_flags a, mem_flags b) { return (mem_flags)((int)a | (int)b); }
// __builtin_FILE/LINE as default arguments name the caller's line: the
// runner checks that all threads of a barrier episode came from one place.
inline void threadgroup_barrier(mem_flags, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
    akunu_msl_emu::threadgroup_barrier_wait(file, line);
}
inline void simdgroup_barrier(mem_flags, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
    akunu_msl_emu::simd_barrier_wait(file, line);
}
#define AK_EMU_SIMD_SYNC() akunu_msl_emu::simd_barrier_wait(__FILE__, __LINE__)

// ---- SIMD-group functions -----------------------------------------------------
namespace detail {
template <typename T>
inline void publish(T v) {
    static_assert(sizeof(T) <= 64, "SIMD exchange of more than 64 bytes");
    std::memcpy(akunu_msl_emu::simd_slot(akunu_msl_emu::current_position().tiisg), &v, sizeof(T));
    AK_EMU_SIMD_SYNC();
}
template <typename T>
inline T read(unsigned lane) {
    T v;
    std::memcpy(&v, akunu_msl_emu::simd_slot(lane), sizeof(T));
    return v;
}
// Combines the active lanes' values in lane order.
template <typename T, typename Op>
inline T reduce(T x, Op op) {
    publish(x);
    bool first = true;
    T r = x;
    for (unsigned l = 0; l < akunu_msl_emu::simd_width(); l++) {
        if (!akunu_msl_emu::simd_lane_active(l)) continue;
        r = first ? read<T>(l) : op(r, read<T>(l));
        first = false;
    }
    AK_EMU_SIMD_SYNC();
    return r;
}
template <typename T>
inline T fetch(T x, unsigned src) {
    publish(x);
    T r = (src < akunu_msl_emu::simd_width() && akunu_msl_emu::simd_lane_active(src)) ? read<T>(src) : x;
    AK_EMU_SIMD_SYNC();
    return r;
}
}  // namespace detail

template <typename T>
inline T simd_sum(T x) { return detail::reduce(x, [](T a, T b) { return a + b; }); }
template <typename T>
inline T simd_max(T x) { return detail::reduce(x, [](T a, T b) { return max(a, b); }); }
template <typename T>
inline T simd_min(T x) { return detail::reduce(x, [](T a, T b) { return min(a, b); }); }
template <typename T>
inline T simd_shuffle(T x, ushort lane) { return detail::fetch(x, lane); }
template <typename T>
inline T simd_broadcast(T x, ushort lane) { return detail::fetch(x, lane); }
template <typename T>
inline T simd_shuffle_down(T x, ushort delta) {
    return detail::fetch(x, akunu_msl_emu::current_position().tiisg + delta);
}
template <typename T>
inline T simd_shuffle_up(T x, ushort delta) {
    const unsigned lane = akunu_msl_emu::current_position().tiisg;
    return detail::fetch(x, lane >= delta ? lane - delta : lane);
}
template <typename T>
inline T simd_shuffle_xor(T x, ushort mask) {
    return detail::fetch(x, akunu_msl_emu::current_position().tiisg ^ mask);
}
template <typename T>
inline T simd_prefix_exclusive_sum(T x) {
    detail::publish(x);
    T s = 0;
    for (unsigned l = 0; l < akunu_msl_emu::current_position().tiisg; l++)
        if (akunu_msl_emu::simd_lane_active(l)) s += detail::read<T>(l);
    AK_EMU_SIMD_SYNC();
    return s;
}

// ---- simdgroup_matrix (8x8) -------------------------------------------------
template <typename T, int R, int C>
struct simdgroup_matrix {
    static_assert(R == 8 && C == 8, "only 8x8 SIMD-group matrices");
    T e[64];
    simdgroup_matrix() = default;
    explicit simdgroup_matrix(T v) { std::fill(e, e + 64, v); }
};
typedef simdgroup_matrix<float, 8, 8> simdgroup_float8x8;
typedef simdgroup_matrix<half, 8, 8> simdgroup_half8x8;

template <typename T, int R, int C>
inline simdgroup_matrix<T, R, C> make_filled_simdgroup_matrix(T v) { return simdgroup_matrix<T, R, C>(v); }

// Loads rows of `elements_per_row` elements; origin is (column, row) as in MSL.
template <typename T, typename S>
inline void simdgroup_load(simdgroup_matrix<T, 8, 8>& m, const S* src, unsigned long elements_per_row = 8,
                           ulong2 origin = ulong2(0), bool transpose = false) {
    AK_EMU_SIMD_SYNC();  // collective: every lane takes part
    const S* base = src + origin.y * elements_per_row + origin.x;
    for (int r = 0; r < 8; r++)
        for (int c = 0; c < 8; c++)
            m.e[r * 8 + c] = (T)(transpose ? base[(unsigned long)c * elements_per_row + r]
                                           : base[(unsigned long)r * elements_per_row + c]);
}
template <typename T, typename S>
inline void simdgroup_store(const simdgroup_matrix<T, 8, 8>& m, S* dst, unsigned long elements_per_row = 8,
                            ulong2 origin = ulong2(0), bool transpose = false) {
    AK_EMU_SIMD_SYNC();
    S* base = dst + origin.y * elements_per_row + origin.x;
    if (akunu_msl_emu::current_position().tiisg == 0)  // one lane writes the shared result
        for (int r = 0; r < 8; r++)
            for (int c = 0; c < 8; c++)
                (transpose ? base[(unsigned long)c * elements_per_row + r]
                           : base[(unsigned long)r * elements_per_row + c]) = (S)m.e[r * 8 + c];
    AK_EMU_SIMD_SYNC();
}
// d = a * b + c
template <typename T>
inline void simdgroup_multiply_accumulate(simdgroup_matrix<T, 8, 8>& d, const simdgroup_matrix<T, 8, 8>& a,
                                          const simdgroup_matrix<T, 8, 8>& b, const simdgroup_matrix<T, 8, 8>& c) {
    simdgroup_matrix<T, 8, 8> out;
    for (int r = 0; r < 8; r++)
        for (int col = 0; col < 8; col++) {
            float s = (float)c.e[r * 8 + col];
            for (int k = 0; k < 8; k++) s += (float)a.e[r * 8 + k] * (float)b.e[k * 8 + col];
            out.e[r * 8 + col] = (T)s;
        }
    d = out;
}

}  // namespace metal


// ---- address spaces and function qualifiers ---------------------------------
#define kernel
#define device
#define constant const
#define thread
#define threadgroup

// ---- kernel argument binding --------------------------------------------------
// AK_THREAD_ARGS (kernels/akunu_msl.h) becomes one ThreadPosition argument; the
// names the kernels use read its fields.
#define AK_EMU_THREAD_ARGS const ::akunu_msl_emu::ThreadPosition& ak_thread_
#define tgpig (ak_thread_.tgpig)
#define tgpg (ak_thread_.tgpg)
#define tiitg (ak_thread_.tiitg)
#define ntg (ak_thread_.ntg)
#define tiisg (ak_thread_.tiisg)
#define sgitg (ak_thread_.sgitg)
#define nsg (ak_thread_.nsg)

namespace akunu_msl_emu {

// Binds a kernel's arguments by position: device pointers before the
// parameter reference are buffers 0, 1, ...; the reference is the parameter
// block; a pointer after it is the threadgroup memory; the last argument is
// the ThreadPosition (AK_THREAD_ARGS).
template <typename T, int I, int Ref, int Last>
inline T bind_argument(const Invocation& inv, const ThreadPosition& pos) {
    if constexpr (I == Last) {
        static_assert(std::is_same_v<T, const ThreadPosition&>, "a kernel's last argument is AK_THREAD_ARGS");
        return pos;
    } else if constexpr (std::is_reference_v<T>) {
        return *reinterpret_cast<std::remove_reference_t<T>*>(const_cast<uint8_t*>(inv.params));
    } else {
        static_assert(std::is_pointer_v<T>, "kernel arguments are pointers, one parameter reference, thread position");
        return reinterpret_cast<T>(I < Ref ? inv.buffers[I] : inv.tg_mem);
    }
}

template <typename... A>
constexpr int first_reference() {
    constexpr bool r[] = {std::is_reference_v<A>...};
    for (int i = 0; i < (int)sizeof...(A); i++)
        if (r[i]) return i;
    return (int)sizeof...(A);
}

template <auto Fn>
struct Binder;
template <typename... A, void (*Fn)(A...)>
struct Binder<Fn> {
    template <size_t... I>
    static void call_with(const Invocation& inv, const ThreadPosition& pos, std::index_sequence<I...>) {
        constexpr int ref = first_reference<A...>();
        constexpr int last = (int)sizeof...(A) - 1;
        Fn(bind_argument<A, (int)I, ref, last>(inv, pos)...);
    }
    static void call(const Invocation& inv, const ThreadPosition& pos) {
        call_with(inv, pos, std::index_sequence_for<A...>{});
    }
};

bool register_kernel(const char* name, KernelThunk thunk);

}  // namespace akunu_msl_emu

#define AK_EMU_CAT2(a, b) a##b
#define AK_EMU_CAT(a, b) AK_EMU_CAT2(a, b)
#define AK_EMU_EXPORT(name, ...)                                           \
    static const bool AK_EMU_CAT(ak_registered_, __COUNTER__) =             \
        ::akunu_msl_emu::register_kernel(name, &::akunu_msl_emu::Binder<&__VA_ARGS__>::call);

using namespace metal;

// `half` is a keyword in MSL but a plain name in C++: as a macro, a kernel
// that names a variable `half` fails here as it fails with Apple's compiler.
#define half ::metal::half
