// One chat rendered with a template source: python/akunu/chat_template.py's
// ChatTemplate.render (checks of the extra variables, then of the
// messages, then the template).
#pragma once
#include <string>

#include "common/json.h"

namespace akunu::text {

struct ChatOptions {
    bool add_generation_prompt = true;
    common_json tools;  // null: the request has none (the template sees None)
    common_json extra;  // null or an object of more variables (enable_thinking, ...)
};

// Throws akunu::Error for malformed messages and TemplateError for refused
// variables and template failures.
std::string render_chat(const std::string& source, const std::string& bos_token, const std::string& eos_token,
                        const common_json& messages, const ChatOptions& opt);

}  // namespace akunu::text
