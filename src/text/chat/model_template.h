// The chat template a model is formatted with, chosen as
// python/akunu/chat_template.py's ChatTemplate.for_model chooses it: an
// override ("chatml", "llama3", "gemma" or a Jinja source), else the
// template the model's files carry, else a built-in one picked by the
// vocabulary's turn markers (Gemma, Llama 3, otherwise ChatML).
#pragma once
#include <string>

#include "text/chat/model_facts.h"

namespace akunu::text {

struct ChosenTemplate {
    std::string source;  // the Jinja source rendered
    // "gguf" (the model's own, as Python names it for GGUF and Hugging Face
    // models alike), "chatml" / "llama3" / "gemma" (built-in), or "custom"
    // (an override given as a source)
    std::string name;
    std::string bos_token, eos_token;
};

// `override_` empty: the model's choice. Throws TemplateError when the chosen
// source or the BOS / EOS spellings are not valid UTF-8.
ChosenTemplate choose_template(const ModelChatFacts& facts, const std::string& override_);

}  // namespace akunu::text
