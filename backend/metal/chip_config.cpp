#include "chip_config.h"

namespace akunu {

ChipConfig ChipConfig::from_gpu(int cores, int family) {
    ChipConfig c;
    c.gpu_cores = cores;
    c.gpu_family = family;
    if (cores >= 60) c.slc_bytes = 96ll << 20;                                   // Ultra
    else if (cores >= 30) c.slc_bytes = 48ll << 20;                              // Max
    else if (cores >= 16) c.slc_bytes = (family >= 9 ? 32ll : 24ll) << 20;       // Pro
    else c.slc_bytes = (family >= 9 ? 16ll : 8ll) << 20;                         // base
    // Fused QKV / gate+up weights only pay when the fused matrix stays in the SLC.
    c.should_fuse_weights = c.slc_bytes >= (16ll << 20);
    if (family >= 9 && cores >= 16) c.q4_small_k_threshold = 512;
    else if (cores >= 16) c.q4_small_k_threshold = 1024;
    else c.q4_small_k_threshold = 2048;
    c.gemv_wide_standard = cores >= 16;
    // Larger chunks amortize command-buffer overhead; smaller ones show the first token sooner.
    if (cores >= 30 || family >= 9) c.chain_decode_chunk = 128;
    else if (cores >= 16) c.chain_decode_chunk = 96;
    else c.chain_decode_chunk = 64;
    return c;
}

}  // namespace akunu
