#include "text/grammar/grammar_spec.h"

#include "core/error.h"
#include "weight/json.h"

namespace akunu::text {

GrammarSpec GrammarSpec::gbnf(const std::string& text) {
    if (text.find_first_not_of(" \t\n\r\f\v") == std::string::npos)
        throw Error("a GBNF grammar must be a non-empty string");
    return GrammarSpec{Kind::Gbnf, text};
}

GrammarSpec GrammarSpec::json_schema(const std::string& schema) {
    try {
        parse_json(schema.data(), schema.size(), "the JSON schema");
    } catch (const Error& e) {
        // parse_json reports a FormatError (a model file's kind); a schema is the caller's input.
        throw Error(std::string("the JSON schema is not valid JSON: ") + e.what());
    }
    return GrammarSpec{Kind::JsonSchema, schema};
}

GrammarSpec GrammarSpec::any_json() { return GrammarSpec{Kind::AnyJson, ""}; }

const char* GrammarSpec::name() const {
    switch (kind) {
        case Kind::Gbnf: return "gbnf";
        case Kind::JsonSchema: return "json_schema";
        case Kind::AnyJson: break;
    }
    return "json";
}

}  // namespace akunu::text
