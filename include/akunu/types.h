/* Plain C types of the akunu C API. */
#ifndef AKUNU_TYPES_H
#define AKUNU_TYPES_H
#include <stdbool.h>
#include <stddef.h>
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

/* Sampler settings; akunu_default_sampling() fills the neutral values.
 * Filters apply in this order: temperature, top_k, top_p, min_p. */
typedef struct {
    float temperature;       /* 0 = greedy */
    int32_t top_k;           /* 0 = off */
    float top_p;             /* 1 = off */
    float min_p;             /* 0 = off */
    float repeat_penalty;    /* 1 = off */
    float presence_penalty;  /* 0 = off */
    float frequency_penalty; /* 0 = off */
    int32_t penalty_window;  /* latest context tokens the penalties see */
    uint64_t seed;
    const int32_t* logit_bias_ids; /* n_logit_bias ids, with values below */
    const float* logit_bias_values;
    int32_t n_logit_bias;
} AkunuSamplingConfig;

/* Timings of one streaming generation (akunu_generate_stream / _continue).
 * The first generated token comes from the prefill; decode counts the rest. */
typedef struct {
    int32_t prompt_tokens;    /* tokens prefilled by this call */
    int32_t generated_tokens; /* tokens handed to the callback (or produced) */
    float prefill_time_ms;
    float decode_time_ms;
    float prefill_tokens_per_sec;
    float decode_tokens_per_sec; /* (generated_tokens - 1) / decode time */
} AkunuGenerationStats;

/* Called with each generated token; returning false stops generation after
 * it. `text` is the token's text from the model's tokenizer, valid during the
 * call: whole UTF-8 characters only (a character split across tokens comes
 * with its last token, so a piece may be ""); NULL when the model's tokenizer
 * cannot be built. */
typedef bool (*akunu_token_callback)(int32_t token_id, const char* text, void* user_data);

#ifdef __cplusplus
}
#endif
#endif
