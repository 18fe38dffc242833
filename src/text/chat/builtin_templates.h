// The built-in chat templates used for models whose files carry none: the
// same ChatML, Llama 3 and Gemma sources as python/akunu/chat_template.py.
#pragma once
#include <string>

namespace akunu::text {

// The source of the built-in template `name` ("chatml", "llama3", "gemma"),
// or nullptr for any other name.
const char* builtin_chat_template(const std::string& name);

}  // namespace akunu::text
