// A small JSON reader for the files a model directory carries (config.json,
// safetensors headers, index files). Input is untrusted: nesting depth and
// sizes are bounded and every error names its byte offset.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace akunu {

struct JsonValue {
    enum class Kind { Null, Bool, Number, String, Array, Object };
    Kind kind = Kind::Null;
    bool b = false;
    double num = 0;
    std::string str;
    std::vector<JsonValue> arr;
    std::map<std::string, JsonValue> obj;

    bool is_object() const { return kind == Kind::Object; }
    bool is_number() const { return kind == Kind::Number; }
    bool is_string() const { return kind == Kind::String; }
    // Member of an object, or nullptr (also when this is not an object).
    const JsonValue* get(const std::string& key) const;
    // Typed members with defaults; a member of the wrong type is a FormatError
    // naming `what` (the file) and the key.
    double number(const std::string& key, double def, const std::string& what) const;
    int64_t integer(const std::string& key, int64_t def, const std::string& what) const;
    std::string string(const std::string& key, const std::string& def, const std::string& what) const;
    bool boolean(const std::string& key, bool def, const std::string& what) const;
};

// Parses `text`; throws FormatError("<what>: ...") on malformed input.
JsonValue parse_json(const char* text, size_t size, const std::string& what);
// Reads and parses a file (at most 64 MiB).
JsonValue read_json_file(const std::string& path);

}  // namespace akunu
