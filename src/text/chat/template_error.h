// The error of chat formatting: the template does not parse, fails to render,
// or rejects the conversation (its raise_exception). Python raises
// akunu.chat_template.TemplateError with the same messages.
#pragma once
#include <string>

#include "core/error.h"

namespace akunu::text {

class TemplateError : public Error {
public:
    explicit TemplateError(const std::string& msg) : Error(msg) {}
};

}  // namespace akunu::text
