/* Drives every C API entry point for tests/test_c_api.py and prints the
 * results as "key value..." lines that the test compares with the Python API.
 *   check <model> greedy <n_gen> <ids...>     prefill + decode_step loop, chain_decode
 *   check <model> stream <k> <max> <ids...>   callback stop after k tokens, continue
 *   check <model> tensors                     tensor table, memory, whisper flag
 *   check <model> profile <id>                per-command decode profile
 *   check <model> errors                      NULL / bad handle / bad index failures
 * Exit status 0 unless a call fails unexpectedly (message on stderr). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "akunu/akunu.h"

#define MAX_IDS 512

static int fail(const char* what) {
    fprintf(stderr, "FAIL %s: %s\n", what, akunu_last_error());
    return 1;
}

static void print_ids(const char* key, const int32_t* ids, int32_t n) {
    printf("%s", key);
    for (int32_t i = 0; i < n; i++) printf(" %d", (int)ids[i]);
    printf("\n");
}

static int greedy(akunu_model* m, int n_gen, const int32_t* prompt, int32_t n_prompt) {
    int32_t ids[MAX_IDS], tok = 0;
    if (n_gen < 1 || n_gen > MAX_IDS) return fail("n_gen");
    if (akunu_prefill(m, prompt, n_prompt, &tok) != AKUNU_OK) return fail("akunu_prefill");
    ids[0] = tok;
    for (int i = 1; i < n_gen; i++) {
        if (akunu_decode_step(m, ids[i - 1], akunu_get_position(m), &tok) != AKUNU_OK) return fail("decode_step");
        ids[i] = tok;
    }
    print_ids("steps", ids, n_gen);
    printf("position %d\n", (int)akunu_get_position(m));
    /* The same continuation as one chain, from the slot after the prompt. */
    int32_t chain[MAX_IDS], n_chain = 0;
    if (akunu_chain_decode(m, ids[0], n_prompt, n_gen - 1, chain, &n_chain) != AKUNU_OK) return fail("chain_decode");
    print_ids("chain", chain, n_chain);
    printf("position %d\n", (int)akunu_get_position(m));
    /* Rewinding with decode_step: step 1 again at the slot after the prompt. */
    if (akunu_decode_step(m, ids[0], n_prompt, &tok) != AKUNU_OK) return fail("decode_step rewind");
    printf("rewind %d %d\n", (int)tok, (int)akunu_get_position(m));
    return 0;
}

typedef struct {
    int32_t seen[MAX_IDS];
    int32_t n, stop_after;
} Collector;

static bool collect(int32_t token, const char* text, void* user_data) {
    Collector* c = (Collector*)user_data;
    if (text == NULL) return false; /* each token's text (whole UTF-8 characters, maybe "") */
    if (c->n < MAX_IDS) c->seen[c->n] = token;
    c->n++;
    return c->stop_after <= 0 || c->n < c->stop_after;
}

static int stream(akunu_model* m, int k, int max_tokens, const int32_t* prompt, int32_t n_prompt) {
    Collector all = {{0}, 0, 0}, cut = {{0}, 0, k};
    AkunuGenerationStats st;
    if (akunu_generate_stream(m, prompt, n_prompt, max_tokens, NULL, NULL, 0, collect, &all, &st) != AKUNU_OK)
        return fail("generate_stream");
    print_ids("all", all.seen, all.n);
    printf("stats %d %d %g %g %g %g\n", (int)st.prompt_tokens, (int)st.generated_tokens, st.prefill_time_ms,
           st.decode_time_ms, st.prefill_tokens_per_sec, st.decode_tokens_per_sec);
    if (akunu_generate_stream(m, prompt, n_prompt, max_tokens, NULL, NULL, 0, collect, &cut, &st) != AKUNU_OK)
        return fail("generate_stream cut");
    print_ids("cut", cut.seen, cut.n);
    printf("cutstats %d %d position %d\n", (int)st.prompt_tokens, (int)st.generated_tokens,
           (int)akunu_get_position(m));
    /* Continue from the cut: feed the last token the callback took. */
    Collector more = {{0}, 0, 0};
    int32_t last = cut.seen[cut.n - 1];
    if (akunu_generate_continue(m, &last, 1, max_tokens - k, NULL, NULL, 0, collect, &more, NULL) != AKUNU_OK)
        return fail("generate_continue");
    print_ids("continued", more.seen, more.n);
    /* A stop id ends the stream after emitting it. */
    Collector stopped = {{0}, 0, 0};
    int32_t stop_id = all.seen[2];
    if (akunu_generate_stream(m, prompt, n_prompt, max_tokens, NULL, &stop_id, 1, collect, &stopped, NULL) != AKUNU_OK)
        return fail("generate_stream stop");
    print_ids("stopped", stopped.seen, stopped.n);
    /* Sampling settings reach the stream: temperature with a seed repeats. */
    AkunuSamplingConfig s = akunu_default_sampling();
    s.temperature = 0.8f;
    s.seed = 7;
    Collector a = {{0}, 0, 0}, b = {{0}, 0, 0};
    if (akunu_generate_stream(m, prompt, n_prompt, max_tokens, &s, NULL, 0, collect, &a, NULL) != AKUNU_OK ||
        akunu_generate_stream(m, prompt, n_prompt, max_tokens, &s, NULL, 0, collect, &b, NULL) != AKUNU_OK)
        return fail("generate_stream sampled");
    print_ids("sampled", a.seen, a.n);
    print_ids("sampled", b.seen, b.n);
    return 0;
}

static int tensors(akunu_model* m) {
    int32_t n = akunu_tensor_count(m);
    if (n < 0) return fail("tensor_count");
    printf("count %d\n", (int)n);
    for (int32_t i = 0; i < n; i++) {
        const char* name = akunu_tensor_name(m, i);
        const char* raw = akunu_tensor_raw_dtype(m, i);
        int32_t dt = akunu_tensor_dtype(m, i);
        if (!name || !raw || dt < 0) return fail("tensor entry");
        printf("tensor %s %d %s\n", name, (int)dt, raw);
    }
    printf("memory %zu\n", akunu_model_memory(m));
    printf("whisper %d\n", (int)akunu_is_whisper(m));
    return 0;
}

static int profile(akunu_model* m, int32_t token) {
    float ms[4096];
    int32_t n = akunu_profile_decode_step(m, token, akunu_get_position(m), ms, 4096);
    if (n <= 0) return fail("profile_decode_step");
    printf("entries %d position %d\n", (int)n, (int)akunu_get_position(m));
    for (int32_t i = 0; i < n; i++) {
        const char* label = akunu_profile_label(m, i);
        if (!label) return fail("profile_label");
        printf("entry %s %g\n", label, ms[i]);
    }
    /* A buffer one entry short is an error, not a truncated write. */
    printf("short %d\n", (int)akunu_profile_decode_step(m, token, akunu_get_position(m), ms, n - 1));
    printf("short_error %s\n", akunu_last_error());
    return 0;
}

/* Prints "err <name> <status-or-value> <message>" per failing call. */
/* The call runs before akunu_last_error is read (argument order is unspecified). */
static void report(const char* name, long value) { printf("err %s %ld %s\n", name, value, akunu_last_error()); }
#define ERR(name, expr) report(name, (long)(expr))
#define ERRP(name, expr) report(name, (expr) == NULL ? 0L : 1L)

static int errors(akunu_model* m) {
    int32_t tok = 1, out[4], n = 0;
    float f[4];
    AkunuGenerationStats st;
    ERR("prefill_null_model", akunu_prefill(NULL, &tok, 1, out));
    ERR("prefill_null_tokens", akunu_prefill(m, NULL, 1, out));
    ERR("prefill_null_out", akunu_prefill(m, &tok, 1, NULL));
    ERR("prefill_bad_token", akunu_prefill(m, (int32_t[]){-5}, 1, out));
    ERR("decode_null_model", akunu_decode_step(NULL, tok, 0, out));
    ERR("decode_bad_position", akunu_decode_step(m, tok, 100000, out));
    ERR("decode_negative_position", akunu_decode_step(m, tok, -1, out));
    ERR("chain_null_out", akunu_chain_decode(m, tok, 0, 4, NULL, &n));
    ERR("chain_negative_count", akunu_chain_decode(m, tok, 0, -1, out, &n));
    ERR("position_null", akunu_get_position(NULL));
    ERR("stream_null_model", akunu_generate_stream(NULL, &tok, 1, 4, NULL, NULL, 0, NULL, NULL, &st));
    ERR("stream_null_prompt", akunu_generate_stream(m, NULL, 1, 4, NULL, NULL, 0, NULL, NULL, &st));
    ERR("stream_null_stops", akunu_generate_stream(m, &tok, 1, 4, NULL, NULL, 2, NULL, NULL, &st));
    ERR("continue_null_model", akunu_generate_continue(NULL, &tok, 1, 4, NULL, NULL, 0, NULL, NULL, &st));
    ERR("tensor_count_null", akunu_tensor_count(NULL));
    ERRP("tensor_name_negative", akunu_tensor_name(m, -1));
    ERRP("tensor_name_past_end", akunu_tensor_name(m, akunu_tensor_count(m)));
    ERR("tensor_dtype_past_end", akunu_tensor_dtype(m, akunu_tensor_count(m)));
    ERRP("tensor_raw_null", akunu_tensor_raw_dtype(NULL, 0));
    ERR("memory_null", akunu_model_memory(NULL));
    ERR("whisper_null", akunu_is_whisper(NULL));
    ERR("profile_null_out", akunu_profile_decode_step(m, tok, akunu_get_position(m), NULL, 4));
    ERR("profile_bad_position", akunu_profile_decode_step(m, tok, akunu_get_position(m) + 3, f, 4));
    ERRP("profile_label_none", akunu_profile_label(m, 100000));
    /* A freed handle is refused, not dereferenced; freeing it again is a no-op. */
    akunu_free_model(m);
    ERR("freed_position", akunu_get_position(m));
    ERR("freed_prefill", akunu_prefill(m, &tok, 1, out));
    ERR("freed_tensor_count", akunu_tensor_count(m));
    akunu_free_model(m);
    akunu_free_model(NULL);
    return 0;
}

int main(int argc, char** argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: check <model> greedy|stream|tensors|profile|errors [args]\n");
        return 2;
    }
    AkunuLoadParams p = {"cpu", 128, 0};
    akunu_model* m = NULL;
    if (akunu_load_model(argv[1], &p, &m) != AKUNU_OK) return fail("load");
    int32_t ids[MAX_IDS];
    int rc = 0;
    const char* mode = argv[2];
    if (!strcmp(mode, "greedy") && argc > 4) {
        int n = 0;
        for (int i = 4; i < argc && n < MAX_IDS; i++) ids[n++] = (int32_t)atoi(argv[i]);
        rc = greedy(m, atoi(argv[3]), ids, n);
    } else if (!strcmp(mode, "stream") && argc > 5) {
        int n = 0;
        for (int i = 5; i < argc && n < MAX_IDS; i++) ids[n++] = (int32_t)atoi(argv[i]);
        rc = stream(m, atoi(argv[3]), atoi(argv[4]), ids, n);
    } else if (!strcmp(mode, "tensors")) {
        rc = tensors(m);
    } else if (!strcmp(mode, "profile") && argc > 3) {
        rc = profile(m, (int32_t)atoi(argv[3]));
    } else if (!strcmp(mode, "errors")) {
        return errors(m); /* frees the model itself */
    } else {
        rc = 2;
    }
    akunu_free_model(m);
    return rc;
}
