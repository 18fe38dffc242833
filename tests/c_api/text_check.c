/* The C API's text functions from C, for tests/test_c_tokenizer.py: each
 * argument after the model is a text, given as hex of its UTF-8 bytes, and
 * gets the lines
 *   ids <id...>          akunu_encode with special tokens (buffer sized by akunu_token_count)
 *   plain <id...>        akunu_encode without them
 *   text <hex>           akunu_decode of `ids`, special tokens kept
 *   pieces <hex>         the bytes of akunu_decode_token over `plain`, joined
 * then "errors ok" once the failures below behave. Exit status 0 unless a
 * call fails unexpectedly (message on stderr). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "akunu/akunu.h"

static int fail(const char* what) {
    fprintf(stderr, "FAIL %s: %s\n", what, akunu_last_error());
    return 1;
}

static void print_hex(const char* key, const char* bytes, int32_t n) {
    printf("%s ", key);
    for (int32_t i = 0; i < n; i++) printf("%02x", (unsigned)(unsigned char)bytes[i]);
    printf("\n");
}

static char* from_hex(const char* hex) {
    size_t n = strlen(hex) / 2;
    char* out = (char*)malloc(n + 1);
    for (size_t i = 0; i < n; i++) {
        unsigned v = 0;
        sscanf(hex + 2 * i, "%2x", &v);
        out[i] = (char)v;
    }
    out[n] = '\0';
    return out;
}

static int one_text(akunu_model* m, const char* text) {
    int32_t n = 0, n_plain = 0, n_bytes = 0;
    if (akunu_token_count(m, text, true, &n) != AKUNU_OK) return fail("akunu_token_count");
    int32_t* ids = (int32_t*)malloc(sizeof(int32_t) * (size_t)(n + 1));
    int32_t got = -1;
    if (akunu_encode(m, text, true, ids, n, &got) != AKUNU_OK || got != n) return fail("akunu_encode");
    printf("ids");
    for (int32_t i = 0; i < n; i++) printf(" %d", (int)ids[i]);
    printf("\n");
    if (akunu_token_count(m, text, false, &n_plain) != AKUNU_OK) return fail("akunu_token_count plain");
    int32_t* plain = (int32_t*)malloc(sizeof(int32_t) * (size_t)(n_plain + 1));
    if (akunu_encode(m, text, false, plain, n_plain, &got) != AKUNU_OK) return fail("akunu_encode plain");
    printf("plain");
    for (int32_t i = 0; i < n_plain; i++) printf(" %d", (int)plain[i]);
    printf("\n");
    /* first call with no buffer learns the size, second writes */
    if (akunu_decode(m, ids, n, false, NULL, 0, &n_bytes) == AKUNU_OK) return fail("akunu_decode without buffer");
    char* out = (char*)malloc((size_t)n_bytes + 1);
    if (akunu_decode(m, ids, n, false, out, n_bytes + 1, &n_bytes) != AKUNU_OK) return fail("akunu_decode");
    print_hex("text", out, n_bytes);
    printf("pieces ");
    for (int32_t i = 0; i < n_plain; i++) {
        const char* bytes = NULL;
        int32_t len = 0;
        if (akunu_decode_token(m, plain[i], &bytes, &len) != AKUNU_OK) return fail("akunu_decode_token");
        for (int32_t k = 0; k < len; k++) printf("%02x", (unsigned)(unsigned char)bytes[k]);
    }
    printf("\n");
    free(ids);
    free(plain);
    free(out);
    return 0;
}

static int errors(akunu_model* m) {
    int32_t ids[4], n = -1;
    const char* bytes = NULL;
    if (akunu_encode(m, "\xff", true, ids, 4, &n) == AKUNU_OK || !strstr(akunu_last_error(), "UTF-8"))
        return fail("invalid UTF-8 accepted");
    if (akunu_encode(m, "one two three four five six", true, ids, 1, &n) == AKUNU_OK || n <= 1)
        return fail("small buffer accepted");
    if (akunu_encode(NULL, "x", true, ids, 4, &n) == AKUNU_OK) return fail("NULL handle accepted");
    if (akunu_decode_token(m, -1, &bytes, &n) == AKUNU_OK) return fail("bad id accepted");
    if (akunu_token_count(m, NULL, true, &n) == AKUNU_OK) return fail("NULL text accepted");
    printf("errors ok\n");
    return 0;
}

int main(int argc, char** argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s <model> <hex text>...\n", argv[0]);
        return 2;
    }
    AkunuLoadParams params = {"cpu", 128, 0};
    akunu_model* m = NULL;
    if (akunu_load_model(argv[1], &params, &m) != AKUNU_OK) return fail("akunu_load_model");
    int rc = 0;
    for (int i = 2; i < argc && rc == 0; i++) {
        char* text = from_hex(argv[i]);
        rc = one_text(m, text);
        free(text);
    }
    if (rc == 0) rc = errors(m);
    akunu_free_model(m);
    return rc;
}
