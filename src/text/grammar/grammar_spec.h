// What a constrained generation's output must match: GBNF text, a JSON
// Schema, or any JSON object (Python's akunu.grammar.Grammar). Checked when
// made, before any compiling.
#pragma once
#include <string>

namespace akunu::text {

struct GrammarSpec {
    enum class Kind { Gbnf, JsonSchema, AnyJson };
    Kind kind = Kind::AnyJson;
    std::string source;  // the GBNF text or the schema; empty for AnyJson

    // Throws akunu::Error for empty (all-blank) text.
    static GrammarSpec gbnf(const std::string& text);
    // Throws akunu::Error when `schema` is not valid JSON.
    static GrammarSpec json_schema(const std::string& schema);
    static GrammarSpec any_json();

    // "gbnf", "json_schema" or "json", as Python names the kinds in messages.
    const char* name() const;
    // JSON kinds compile against the vocabulary without control-character tokens.
    bool json_mode() const { return kind != Kind::Gbnf; }
};

}  // namespace akunu::text
