#include "weight/json.h"

#include <cmath>
#include <cstdlib>
#include <fstream>

#include "core/error.h"

namespace akunu {
namespace {

constexpr int kMaxDepth = 64;

class Parser {
public:
    Parser(const char* s, size_t n, const std::string& what) : s_(s), n_(n), what_(what) {}

    JsonValue document() {
        JsonValue v = value(0);
        skip_ws();
        if (pos_ != n_) fail("unexpected text after the JSON value");
        return v;
    }

private:
    [[noreturn]] void fail(const std::string& msg) const {
        throw FormatError(what_ + ": invalid JSON at byte " + std::to_string(pos_) + ": " + msg);
    }
    void skip_ws() {
        while (pos_ < n_ && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) pos_++;
    }
    char peek() {
        skip_ws();
        if (pos_ >= n_) fail("unexpected end of input");
        return s_[pos_];
    }
    void expect(char c) {
        if (peek() != c) fail(std::string("expected '") + c + "'");
        pos_++;
    }
    bool literal(const char* word) {
        size_t len = std::char_traits<char>::length(word);
        if (n_ - pos_ >= len && std::char_traits<char>::compare(s_ + pos_, word, len) == 0) {
            pos_ += len;
            return true;
        }
        return false;
    }

    JsonValue value(int depth) {
        if (depth > kMaxDepth) fail("nested deeper than " + std::to_string(kMaxDepth) + " levels");
        JsonValue v;
        char c = peek();
        if (c == '{') {
            v.kind = JsonValue::Kind::Object;
            pos_++;
            if (peek() == '}') { pos_++; return v; }
            for (;;) {
                if (peek() != '"') fail("expected a member name");
                std::string key = string_body();
                expect(':');
                JsonValue member = value(depth + 1);
                if (!v.obj.emplace(std::move(key), std::move(member)).second) fail("duplicate member name");
                char d = peek();
                pos_++;
                if (d == '}') return v;
                if (d != ',') fail("expected ',' or '}'");
            }
        }
        if (c == '[') {
            v.kind = JsonValue::Kind::Array;
            pos_++;
            if (peek() == ']') { pos_++; return v; }
            for (;;) {
                v.arr.push_back(value(depth + 1));
                char d = peek();
                pos_++;
                if (d == ']') return v;
                if (d != ',') fail("expected ',' or ']'");
            }
        }
        if (c == '"') {
            v.kind = JsonValue::Kind::String;
            v.str = string_body();
            return v;
        }
        if (literal("true")) { v.kind = JsonValue::Kind::Bool; v.b = true; return v; }
        if (literal("false")) { v.kind = JsonValue::Kind::Bool; return v; }
        if (literal("null")) return v;
        if (literal("NaN")) { v.kind = JsonValue::Kind::Number; v.num = NAN; return v; }  // Python's json writes these
        if (literal("Infinity")) { v.kind = JsonValue::Kind::Number; v.num = INFINITY; return v; }
        if (literal("-Infinity")) { v.kind = JsonValue::Kind::Number; v.num = -INFINITY; return v; }
        return number();
    }

    JsonValue number() {
        size_t start = pos_;
        while (pos_ < n_ && std::string("+-0123456789.eE").find(s_[pos_]) != std::string::npos) pos_++;
        if (pos_ == start) fail("unexpected character");
        std::string text(s_ + start, pos_ - start);
        char* end = nullptr;
        double d = std::strtod(text.c_str(), &end);
        if (end != text.c_str() + text.size()) fail("malformed number '" + text + "'");
        JsonValue v;
        v.kind = JsonValue::Kind::Number;
        v.num = d;
        return v;
    }

    unsigned hex4() {
        if (n_ - pos_ < 4) fail("truncated \\u escape");
        unsigned u = 0;
        for (int i = 0; i < 4; i++) {
            char h = s_[pos_++];
            u <<= 4;
            if (h >= '0' && h <= '9') u |= (unsigned)(h - '0');
            else if (h >= 'a' && h <= 'f') u |= (unsigned)(h - 'a' + 10);
            else if (h >= 'A' && h <= 'F') u |= (unsigned)(h - 'A' + 10);
            else fail("bad \\u escape");
        }
        return u;
    }

    static void utf8(std::string& out, unsigned cp) {
        if (cp < 0x80) out += (char)cp;
        else if (cp < 0x800) { out += (char)(0xC0 | (cp >> 6)); out += (char)(0x80 | (cp & 0x3F)); }
        else if (cp < 0x10000) {
            out += (char)(0xE0 | (cp >> 12)); out += (char)(0x80 | ((cp >> 6) & 0x3F)); out += (char)(0x80 | (cp & 0x3F));
        } else {
            out += (char)(0xF0 | (cp >> 18)); out += (char)(0x80 | ((cp >> 12) & 0x3F));
            out += (char)(0x80 | ((cp >> 6) & 0x3F)); out += (char)(0x80 | (cp & 0x3F));
        }
    }

    std::string string_body() {
        expect('"');
        std::string out;
        for (;;) {
            if (pos_ >= n_) fail("unterminated string");
            char c = s_[pos_++];
            if (c == '"') return out;
            if ((unsigned char)c < 0x20) fail("control character in a string");
            if (c != '\\') { out += c; continue; }
            if (pos_ >= n_) fail("unterminated escape");
            char e = s_[pos_++];
            switch (e) {
                case '"': out += '"'; break;
                case '\\': out += '\\'; break;
                case '/': out += '/'; break;
                case 'b': out += '\b'; break;
                case 'f': out += '\f'; break;
                case 'n': out += '\n'; break;
                case 'r': out += '\r'; break;
                case 't': out += '\t'; break;
                case 'u': {
                    unsigned cp = hex4();
                    if (cp >= 0xD800 && cp < 0xDC00 && n_ - pos_ >= 6 && s_[pos_] == '\\' && s_[pos_ + 1] == 'u') {
                        size_t save = pos_;
                        pos_ += 2;
                        unsigned lo = hex4();
                        if (lo >= 0xDC00 && lo < 0xE000) cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                        else pos_ = save;
                    }
                    if (cp >= 0xD800 && cp < 0xE000) cp = 0xFFFD;  // lone surrogate
                    utf8(out, cp);
                    break;
                }
                default: fail(std::string("bad escape '\\") + e + "'");
            }
        }
    }

    const char* s_;
    size_t n_;
    const std::string& what_;
    size_t pos_ = 0;
};

}  // namespace

const JsonValue* JsonValue::get(const std::string& key) const {
    if (kind != Kind::Object) return nullptr;
    auto it = obj.find(key);
    return it == obj.end() ? nullptr : &it->second;
}

double JsonValue::number(const std::string& key, double def, const std::string& what) const {
    const JsonValue* v = get(key);
    if (!v || v->kind == Kind::Null) return def;
    if (v->kind != Kind::Number) throw FormatError(what + ": '" + key + "' is not a number");
    return v->num;
}

int64_t JsonValue::integer(const std::string& key, int64_t def, const std::string& what) const {
    double d = number(key, (double)def, what);
    if (!(d >= -9.0e15 && d <= 9.0e15) || d != std::floor(d))
        throw FormatError(what + ": '" + key + "' is not an integer");
    return (int64_t)d;
}

std::string JsonValue::string(const std::string& key, const std::string& def, const std::string& what) const {
    const JsonValue* v = get(key);
    if (!v || v->kind == Kind::Null) return def;
    if (v->kind != Kind::String) throw FormatError(what + ": '" + key + "' is not a string");
    return v->str;
}

bool JsonValue::boolean(const std::string& key, bool def, const std::string& what) const {
    const JsonValue* v = get(key);
    if (!v || v->kind == Kind::Null) return def;
    if (v->kind != Kind::Bool) throw FormatError(what + ": '" + key + "' is not true or false");
    return v->b;
}

JsonValue parse_json(const char* text, size_t size, const std::string& what) {
    return Parser(text, size, what).document();
}

JsonValue read_json_file(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw Error("cannot open '" + path + "'");
    f.seekg(0, std::ios::end);
    std::streamoff size = f.tellg();
    if (size < 0 || size > (64 << 20)) throw FormatError("'" + path + "' is not a JSON file of at most 64 MiB");
    f.seekg(0);
    std::string text((size_t)size, '\0');
    f.read(&text[0], size);
    return parse_json(text.data(), text.size(), "'" + path + "'");
}

}  // namespace akunu
