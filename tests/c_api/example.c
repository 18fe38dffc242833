/* A complete C program on libakunu: load a model, stream a greedy
 * continuation of token ids through a callback, report the timings.
 *   example <model.gguf> <token id>...
 * Prints the generated ids on one line, then the statistics.
 * Build: cc -std=c99 -I<prefix>/include example.c -L<prefix>/lib -lakunu */
#include <stdio.h>
#include <stdlib.h>

#include "akunu/akunu.h"

static bool on_token(int32_t token_id, const char* text, void* user_data) {
    int* count = (int*)user_data;
    (void)text; /* NULL: the C API works on token ids */
    printf("%s%d", *count ? " " : "", (int)token_id);
    fflush(stdout);
    ++*count;
    return true; /* keep generating */
}

int main(int argc, char** argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s <model.gguf> <token id>...\n", argv[0]);
        return 2;
    }
    AkunuLoadParams params = {"cpu", 256, 0};
    akunu_model* model = NULL;
    if (akunu_load_model(argv[1], &params, &model) != AKUNU_OK) {
        fprintf(stderr, "load failed: %s\n", akunu_last_error());
        return 1;
    }
    int32_t prompt[64];
    int n_prompt = 0;
    for (int i = 2; i < argc && n_prompt < 64; i++) prompt[n_prompt++] = (int32_t)atoi(argv[i]);

    int count = 0;
    AkunuGenerationStats stats;
    akunu_status rc = akunu_generate_stream(model, prompt, n_prompt, 16, NULL, NULL, 0, on_token, &count, &stats);
    printf("\n");
    if (rc != AKUNU_OK) {
        fprintf(stderr, "generation failed: %s\n", akunu_last_error());
        akunu_free_model(model);
        return 1;
    }
    AkunuModelConfig cfg;
    if (akunu_get_config(model, &cfg) == AKUNU_OK)
        printf("%s: %d layers, %.1f MiB\n", cfg.architecture, (int)cfg.n_layers,
               (double)akunu_model_memory(model) / 1048576.0);
    printf("prefill: %d tokens in %.2f ms (%.0f tok/s)\n", (int)stats.prompt_tokens, stats.prefill_time_ms,
           stats.prefill_tokens_per_sec);
    printf("decode: %d tokens in %.2f ms (%.0f tok/s)\n", (int)stats.generated_tokens, stats.decode_time_ms,
           stats.decode_tokens_per_sec);
    akunu_free_model(model);
    return 0;
}
