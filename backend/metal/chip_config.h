// Tuning derived from the Apple GPU (book, "Chip Configuration and Hardware
// Tuning"): all of the Metal backend's magic numbers in one place, computed
// once from the GPU core count and family. Plain C++ so it is tested anywhere.
#pragma once

namespace akunu {

struct ChipConfig {
    int gpu_cores = 8;
    int gpu_family = 7;  // Apple GPU family: 7 = M1, 8 = M2/M3, 9 = M4
    int max_threads_per_tg = 1024;
    long long slc_bytes = 8ll << 20;  // estimated system level cache
    bool should_fuse_weights = false;
    int q4_small_k_threshold = 2048;
    int wide_gemv_threshold = 32768;
    bool gemv_wide_standard = false;  // 256-thread GEMV threadgroups on Pro and larger
    int chain_decode_chunk = 64;      // tokens per command buffer in chain decode
    int max_prefill_chunk = 4096;
    int norm_tg_size = 1024;

    static ChipConfig from_gpu(int cores, int family);
};

}  // namespace akunu
