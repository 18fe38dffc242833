// The variables a chat template sees, as python/akunu/chat_template.py's
// ChatTemplate.render passes them to jinja2: messages, add_generation_prompt,
// bos_token, eos_token, documents (None), tools (None unless given) and the
// caller's extra variables (enable_thinking, reasoning_effort, ...).
#pragma once
#include <string>

#include "common/json.h"

namespace akunu::text {

struct ChatRenderInput {
    common_json messages;  // the conversation (normalized: messages.h)
    bool add_generation_prompt = true;
    std::string bos_token, eos_token;
    common_json tools;  // null when the request has none
    common_json extra;  // an object (or null) of more variables
};

// The JSON object of template variables. Extra variables that the renderer
// sets itself (messages, add_generation_prompt, bos_token, eos_token,
// raise_exception, strftime_now) or tools are refused with a TemplateError.
common_json template_variables(const ChatRenderInput& in);

// Parses caller-given JSON (tools, extra variables); `what` names it in errors.
common_json parse_json_argument(const std::string& text, const char* what);

}  // namespace akunu::text
