// Embedding lookup: out[t, :] = decode(table row ids[t]) * scale (CPU twin:
// backend/cpu/kernels/embedding.cpp). One threadgroup per token; threads take
// the row's blocks in turn.
#include "formats.h"

template <typename F>
kernel void embedding(device const uint8_t* table [[buffer(0)]], device const int* ids [[buffer(1)]],
                      device float* out [[buffer(2)]], constant EmbeddingParams& p [[buffer(AK_PARAMS)]],
                      AK_THREAD_ARGS) {
    const uint t = tgpig.x;
    const uint be = F::be(p.dtype), bb = F::bb(p.dtype), nb = p.dim / be;
    device const uint8_t* row = table + (ulong)ids[t] * nb * bb;
    device float* o = out + (ulong)t * p.dim;
    float y[F::MAX_BE];
    for (uint b = tiitg; b < nb; b += ntg) {
        F::decode(row + (ulong)b * bb, y, p.dtype);
        for (uint j = 0; j < be; j++) o[b * be + j] = p.scale != 1.0f ? y[j] * p.scale : y[j];
    }
}
AK_EXPORT_ALL_FORMATS(embedding, embedding)
