/* Chat formatting from C (include/akunu/chat.h) for tests/test_c_chat.py,
 * which compares the output with the Python package's.
 *   chat_check <model> <system prompt or -> <user message> [<role> <content>]...
 * Prints, each as a length line then the bytes:
 *   format    akunu_format_chat(system, user)
 *   messages  akunu_format_chat_messages(the role/content pairs), generation prompt on
 *   template  akunu_chat_template
 * Exit status 0 unless a call fails (message on stderr). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "akunu/akunu.h"

#define MAX_MESSAGES 32

static int fail(const char* what) {
    fprintf(stderr, "FAIL %s: %s\n", what, akunu_last_error());
    return 1;
}

static void print_text(const char* key, const char* text, size_t len) {
    printf("%s %lu\n", key, (unsigned long)len);
    fwrite(text, 1, len, stdout);
    printf("\n");
}

int main(int argc, char** argv) {
    akunu_model* m = NULL;
    AkunuLoadParams lp = {"cpu", 64, 1};
    AkunuChatMessage msgs[MAX_MESSAGES];
    AkunuChatParams params = akunu_default_chat_params();
    const char* text = NULL;
    const char* tmpl = NULL;
    size_t len = 0;
    int n = 0, i, rc = 0;
    if (argc < 4 || (argc - 4) % 2 != 0 || (argc - 4) / 2 > MAX_MESSAGES) {
        fprintf(stderr, "usage: %s model system|- user [role content]...\n", argv[0]);
        return 2;
    }
    if (akunu_load_model(argv[1], &lp, &m) != AKUNU_OK) return fail("akunu_load_model");
    if (akunu_format_chat(m, strcmp(argv[2], "-") ? argv[2] : NULL, argv[3], &text, &len) != AKUNU_OK) {
        rc = fail("akunu_format_chat");
        goto done;
    }
    print_text("format", text, len);
    for (i = 4; i + 1 < argc; i += 2, n++) {
        msgs[n].role = argv[i];
        msgs[n].content = argv[i + 1];
    }
    if (n > 0) {
        if (akunu_format_chat_messages(m, msgs, n, &params, &text, &len) != AKUNU_OK) {
            rc = fail("akunu_format_chat_messages");
            goto done;
        }
        print_text("messages", text, len);
    }
    tmpl = akunu_chat_template(m);
    if (!tmpl) {
        rc = fail("akunu_chat_template");
        goto done;
    }
    print_text("template", tmpl, strlen(tmpl));
done:
    akunu_free_model(m);
    return rc;
}
