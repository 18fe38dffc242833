/* Plain C types of the akunu C API. */
#ifndef AKUNU_TYPES_H
#define AKUNU_TYPES_H
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct akunu_model akunu_model; /* opaque */

typedef enum {
    AKUNU_OK = 0,
    AKUNU_ERROR = 1,            /* see akunu_last_error() */
    AKUNU_ERROR_FORMAT = 2,     /* malformed or truncated model file */
    AKUNU_ERROR_UNSUPPORTED = 3 /* valid file, unsupported feature */
} akunu_status;

typedef struct {
    const char* device; /* "cpu", "cuda", "metal", "auto"; NULL = "auto" */
    int32_t n_ctx;      /* 0 = min(trained context, 4096) */
    int32_t n_threads;  /* 0 = all cores */
} AkunuLoadParams;

typedef struct {
    int32_t dim, n_layers, n_heads, n_kv_heads, head_dim, ffn_dim, vocab_size, context_length, n_ctx;
    float norm_eps, rope_base;
    char architecture[32];
} AkunuModelConfig;

#ifdef __cplusplus
}
#endif
#endif
