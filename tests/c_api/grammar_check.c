/* A C program using grammar-constrained generation (akunu/grammar.h), for
 * tests/test_c_grammar.py:
 *   grammar_check <model> <schema json> <max_tokens> <stop ids, comma separated> <prompt ids...>
 * prints "tokens <ids...>" (greedy, under the schema) and "bad_schema <status>
 * <message>" (a malformed schema). Exit status 0 unless a call fails
 * unexpectedly (message on stderr). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "akunu/akunu.h"

#define MAX_IDS 512

typedef struct {
    int32_t ids[MAX_IDS];
    int32_t n;
} Tokens;

static bool collect(int32_t token, const char* text, void* user_data) {
    Tokens* t = (Tokens*)user_data;
    (void)text;
    if (t->n < MAX_IDS) t->ids[t->n++] = token;
    return true;
}

static int fail(const char* what) {
    fprintf(stderr, "FAIL %s: %s\n", what, akunu_last_error());
    return 1;
}

int main(int argc, char** argv) {
    if (argc < 6) {
        fprintf(stderr, "usage: %s model schema max_tokens stop_ids prompt_ids...\n", argv[0]);
        return 2;
    }
    int32_t prompt[MAX_IDS], stop[MAX_IDS], n_prompt = 0, n_stop = 0;
    for (int i = 5; i < argc && n_prompt < MAX_IDS; i++) prompt[n_prompt++] = (int32_t)atoi(argv[i]);
    for (char* s = strtok(argv[4], ","); s && n_stop < MAX_IDS; s = strtok(NULL, ",")) stop[n_stop++] = atoi(s);

    AkunuLoadParams params = {"cpu", 256, 0};
    akunu_model* model = NULL;
    if (akunu_load_model(argv[1], &params, &model) != AKUNU_OK) return fail("akunu_load_model");

    akunu_grammar* grammar = NULL;
    if (akunu_grammar_create_from_schema(model, argv[2], &grammar) != AKUNU_OK)
        return fail("akunu_grammar_create_from_schema");
    Tokens out = {{0}, 0};
    AkunuGenerationStats stats;
    if (akunu_generate_grammar(model, prompt, n_prompt, atoi(argv[3]), NULL, grammar, stop, n_stop, collect, &out,
                               &stats) != AKUNU_OK)
        return fail("akunu_generate_grammar");
    printf("tokens");
    for (int32_t i = 0; i < out.n; i++) printf(" %d", (int)out.ids[i]);
    printf("\n");
    if (stats.generated_tokens != out.n) return fail("stats");

    akunu_grammar* bad = NULL;
    akunu_status st = akunu_grammar_create_from_schema(model, "{\"type\": \"no-such-type\"}", &bad);
    printf("bad_schema %d %s\n", (int)st, akunu_last_error());
    if (bad != NULL) return fail("a failed create left a handle");

    akunu_grammar_free(grammar);
    akunu_free_model(model);
    return 0;
}
