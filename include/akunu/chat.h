/* akunu C API: chat formatting through the model's template. Included by akunu.h.
 *
 * The text equals the Python package's (Model.apply_chat_template /
 * ChatTemplate.render) for the same input: the model's own Jinja template
 * (GGUF tokenizer.chat_template, or tokenizer_config.json's chat_template of a
 * Hugging Face directory), else a built-in one chosen by its vocabulary
 * (Gemma, Llama 3, otherwise ChatML), rendered as transformers renders it.
 *
 * Strings handed back (out_text, the template getters) are owned by the
 * library, NUL-terminated, and valid until the next call of the same function
 * on the same thread. Input strings must be valid UTF-8. A template that
 * fails, or rejects the conversation (its raise_exception), gives AKUNU_ERROR
 * with the reason in akunu_last_error(). */
#ifndef AKUNU_CHAT_H
#define AKUNU_CHAT_H
#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One message of a conversation. */
typedef struct {
    const char* role;    /* "system", "user", "assistant", "tool", ... (required) */
    const char* content; /* NULL: empty */
} AkunuChatMessage;

/* Whether the template is told to think (its enable_thinking variable). */
typedef enum {
    AKUNU_THINKING_DEFAULT = 0, /* not passed: the template's own default */
    AKUNU_THINKING_ON = 1,      /* enable_thinking = true */
    AKUNU_THINKING_OFF = 2      /* enable_thinking = false */
} akunu_thinking;

/* Settings of akunu_format_chat_messages; akunu_default_chat_params() fills
 * the defaults (generation prompt on, nothing else). */
typedef struct {
    bool add_generation_prompt; /* end with the opening of the assistant's turn */
    /* NULL, or a JSON array of OpenAI function tools ({"type": "function",
     * "function": {...}}) handed to the template as `tools` (else None). */
    const char* tools_json;
    akunu_thinking enable_thinking;
    /* NULL, or a JSON object of more template variables (reasoning_effort,
     * a request's chat_template_kwargs). Variables the renderer sets itself
     * (messages, add_generation_prompt, bos_token, eos_token,
     * raise_exception, strftime_now) and tools are refused. */
    const char* template_kwargs_json;
    /* NULL: the model's template; else "chatml", "llama3", "gemma" or a Jinja
     * source, as akunu.load(..., chat_template=...) takes it. */
    const char* chat_template;
} AkunuChatParams;

AkunuChatParams akunu_default_chat_params(void);

/* The prompt for one user message after an optional system prompt (NULL or
 * "" for none), with the generation prompt: Python's
 * model.apply_chat_template([{"role": "system", ...}, {"role": "user", ...}]).
 * out_len (may be NULL) receives the length in bytes. */
akunu_status akunu_format_chat(akunu_model* model, const char* system_prompt, const char* user_message,
                               const char** out_text, size_t* out_len);

/* The prompt for a whole conversation (n_messages >= 1); params NULL: the
 * defaults. Python's model.chat_template.render(messages,
 * add_generation_prompt=..., tools=..., enable_thinking=..., **kwargs). */
akunu_status akunu_format_chat_messages(akunu_model* model, const AkunuChatMessage* messages, int32_t n_messages,
                                        const AkunuChatParams* params, const char** out_text, size_t* out_len);

/* The model's own template source; for a model whose files carry none, the
 * name of the built-in template used ("chatml", "llama3" or "gemma").
 * NULL on failure (an embedding model has no template). */
const char* akunu_chat_template(const akunu_model* model);

/* The template akunu_format_chat renders with: *out_name is "gguf" (the
 * model's own, also for a Hugging Face directory, as Python names it) or the
 * built-in's name; *out_source its Jinja source. Either pointer may be NULL. */
akunu_status akunu_chat_template_info(const akunu_model* model, const char** out_name, const char** out_source);

#ifdef __cplusplus
}
#endif
#endif
