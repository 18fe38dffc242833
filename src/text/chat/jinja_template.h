// A chat template rendered by the vendored llama.cpp Jinja engine
// (third_party/jinja) the way python/akunu/chat_template.py renders it with
// jinja2: the source read as jinja2 reads it (newlines normalized, one
// trailing newline dropped), trim_blocks / lstrip_blocks, and a
// raise_exception whose message is the error's message. Every exception of
// the engine comes out as a TemplateError.
#pragma once
#include <string>

#include "common/json.h"

namespace akunu::text {

// Templates longer than this are refused (real ones are tens of KiB).
constexpr size_t kMaxTemplateBytes = 256 << 10;

// The template `source` rendered with `variables` (a JSON object: its members
// become the template's global variables). Throws TemplateError: "the chat
// template does not parse: ...", "the chat template failed to render: ...",
// or the template's own raise_exception message.
std::string render_jinja(const std::string& source, const common_json& variables);

}  // namespace akunu::text
