#include "whisper/transcription/whisper_tokens.h"

#include <algorithm>
#include <climits>
#include <set>
#include <sys/stat.h>

#include "core/error.h"
#include "text/byte_level.h"
#include "text/tokenizer/unicode.h"
#include "weight/json.h"

namespace akunu::whisper {

namespace {

bool is_dir(const std::string& p) {
    struct stat st;
    return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool is_file(const std::string& p) {
    struct stat st;
    return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// The language code of a token spelled <|xx|> (2 or 3 lowercase letters), or "".
std::string language_code(const std::string& t) {
    if (t.size() < 6 || t.size() > 7 || t.compare(0, 2, "<|") != 0 || t.compare(t.size() - 2, 2, "|>") != 0) return "";
    std::string code = t.substr(2, t.size() - 4);
    for (char c : code)
        if (c < 'a' || c > 'z') return "";
    return code;
}

size_t utf8_len(unsigned char c) { return c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4; }

// GPT-2's pre-tokenizer pattern ('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+|
// ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+) with ASCII letters and digits; other
// characters count as symbols, which is what the suppression symbols hold.
enum class Cls { Letter, Digit, Space, Other };
Cls cls_of(unsigned char c) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return Cls::Letter;
    if (c >= '0' && c <= '9') return Cls::Digit;
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v') return Cls::Space;
    return Cls::Other;
}

std::vector<std::string> pre_tokenize(std::string_view s) {
    std::vector<std::string> out;
    size_t i = 0;
    const size_t n = s.size();
    auto run = [&](size_t j, Cls c) {
        while (j < n && cls_of((unsigned char)s[j]) == c) j += cls_of((unsigned char)s[j]) == Cls::Other ? utf8_len((unsigned char)s[j]) : 1;
        return std::min(j, n);
    };
    while (i < n) {
        if (s[i] == '\'') {
            bool took = false;
            for (const char* c : {"s", "t", "re", "ve", "m", "ll", "d"}) {
                const size_t l = std::char_traits<char>::length(c);
                if (s.compare(i + 1, l, c) == 0) {
                    out.emplace_back(s.substr(i, l + 1));
                    i += l + 1;
                    took = true;
                    break;
                }
            }
            if (took) continue;
        }
        size_t j = i + (s[i] == ' ' && i + 1 < n && cls_of((unsigned char)s[i + 1]) != Cls::Space ? 1 : 0);
        const Cls c = cls_of((unsigned char)s[j]);
        if (c != Cls::Space) {
            const size_t end = run(j, c);
            out.emplace_back(s.substr(i, end - i));
            i = end;
            continue;
        }
        size_t end = run(i, Cls::Space);
        if (end < n && end - i > 1) end--;  // \s+(?!\S): leave one space for the next word
        out.emplace_back(s.substr(i, end - i));
        i = end;
    }
    return out;
}

}  // namespace

WhisperTokens::WhisperTokens(const std::string& path, const ModelFile& file, int vocab_size) : vocab_size_(vocab_size) {
    JsonValue j;
    if (is_dir(path)) {
        const std::string tj = path + "/tokenizer.json";
        if (!is_file(tj)) throw UnsupportedError("the Whisper model directory '" + path + "' has no tokenizer.json");
        j = read_json_file(tj);
    } else {
        const GGUFValue* v = file.find("tokenizer.huggingface.json");
        if (!v || v->type != GGUFType::STRING)
            throw UnsupportedError("this Whisper GGUF carries no tokenizer (tokenizer.huggingface.json)");
        j = parse_json(v->s.data(), v->s.size(), "the tokenizer stored in the model");
    }
    const std::string what = "the Whisper tokenizer";
    const JsonValue* model = j.get("model");
    if (!model || !model->is_object() || model->string("type", "BPE", what) != "BPE")
        throw UnsupportedError(what + " is not a BPE tokenizer");
    const JsonValue* vocab = model->get("vocab");
    if (!vocab || !vocab->is_object()) throw FormatError(what + " has no vocabulary");
    auto put = [&](const std::string& tok, double id_num, bool special) {
        if (!(id_num >= 0 && id_num < 10000000)) throw FormatError(what + ": bad token id");
        const size_t id = (size_t)id_num;
        if (id >= spelling_.size()) {
            spelling_.resize(id + 1);
            special_.resize(id + 1, false);
        }
        spelling_[id] = tok;
        special_[id] = special;
        ids_[tok] = (int32_t)id;
    };
    for (const auto& kv : vocab->obj) {
        if (!kv.second.is_number()) throw FormatError(what + ": a vocabulary id is not a number");
        put(kv.first, kv.second.num, false);
    }
    if (const JsonValue* added = j.get("added_tokens"); added && added->kind == JsonValue::Kind::Array)
        for (const JsonValue& a : added->arr) {
            if (!a.is_object()) continue;
            put(a.string("content", "", what), a.number("id", -1, what), a.boolean("special", false, what));
        }
    if (const JsonValue* merges = model->get("merges"); merges && merges->kind == JsonValue::Kind::Array) {
        int32_t rank = 0;
        for (const JsonValue& m : merges->arr) {
            if (m.is_string()) merge_rank_.emplace(m.str, rank);
            else if (m.kind == JsonValue::Kind::Array && m.arr.size() == 2 && m.arr[0].is_string() && m.arr[1].is_string())
                merge_rank_.emplace(m.arr[0].str + " " + m.arr[1].str, rank);
            rank++;
        }
    }

    auto need = [&](const char* t) {
        const int32_t id = id_of(t);
        if (id < 0) throw UnsupportedError(std::string("the Whisper tokenizer has no ") + t + " token");
        return id;
    };
    eot = need("<|endoftext|>");
    sot = need("<|startoftranscript|>");
    transcribe = need("<|transcribe|>");
    translate = need("<|translate|>");
    no_timestamps = need("<|notimestamps|>");
    sot_prev = id_of("<|startofprev|>");
    sot_lm = id_of("<|startoflm|>");
    no_speech = id_of("<|nospeech|>");
    if (no_speech < 0) no_speech = id_of("<|nocaptions|>");
    timestamp_begin = no_timestamps + 1;
    for (int32_t id : {eot, sot, transcribe, translate, no_timestamps})
        if (id >= vocab_size)  // the logits index these
            throw UnsupportedError("the Whisper tokenizer's special token " + std::to_string(id) +
                                   " lies outside the model's vocabulary (" + std::to_string(vocab_size) + ")");
    if (timestamp_begin >= vocab_size) throw UnsupportedError("the Whisper vocabulary has no timestamp tokens");
    multilingual = vocab_size >= 51865;  // openai's rule: English-only checkpoints have 51864 tokens
    for (int32_t i = sot + 1; i < translate; i++) {
        if ((size_t)i >= spelling_.size()) break;
        const std::string code = language_code(spelling_[(size_t)i]);
        if (!code.empty()) languages.emplace_back(code, i);
    }
    space = encode(" ");

    std::vector<int32_t> base;
    const GGUFValue* sup = file.find("whisper.suppress_tokens");
    if (sup && sup->type == GGUFType::ARRAY) {
        for (int64_t t : sup->ints)
            if (t >= 0) base.push_back((int32_t)std::min<int64_t>(t, INT_MAX));
        for (double t : sup->floats)
            if (t >= 0) base.push_back((int32_t)std::min<double>(t, INT_MAX));
    } else {
        base = non_speech_tokens();
    }
    std::set<int32_t> all(base.begin(), base.end());
    for (int32_t t : {transcribe, translate, sot, sot_prev, sot_lm, no_speech})
        if (t >= 0) all.insert(t);
    for (int32_t t : all)
        if (t >= 0 && t < vocab_size) suppress.push_back(t);
}

int32_t WhisperTokens::id_of(const std::string& token) const {
    auto it = ids_.find(token);
    return it == ids_.end() ? -1 : it->second;
}

int32_t WhisperTokens::language_token(const std::string& code) const {
    for (const auto& l : languages)
        if (l.first == code) return l.second;
    return -1;
}

std::vector<int32_t> WhisperTokens::sot_sequence(const std::string& language, bool translate_task,
                                                 bool timestamps) const {
    std::vector<int32_t> seq{sot};
    if (multilingual) {
        const int32_t lang = language_token(language.empty() ? "en" : language);
        if (lang < 0) throw Error("unknown language '" + language + "'");
        seq.push_back(lang);
        seq.push_back(translate_task ? translate : transcribe);
    }
    if (!timestamps) seq.push_back(no_timestamps);
    return seq;
}

std::string WhisperTokens::decode(const std::vector<int32_t>& ids) const {
    std::string bytes, raw;
    for (int32_t id : ids) {
        if (id < 0 || id >= eot || (size_t)id >= spelling_.size() || special_[(size_t)id]) continue;
        const std::string& s = spelling_[(size_t)id];
        // the ByteLevel decoder: the alphabet's bytes, or the token's own UTF-8
        // when it holds a character outside the alphabet
        if (text::byte_level_to_bytes(s, raw)) bytes += raw;
        else bytes += s;
    }
    return text::unicode::utf8_lossy(bytes);
}

std::vector<int32_t> WhisperTokens::bpe(const std::string& spelled) const {
    std::vector<std::string> parts;
    for (size_t i = 0; i < spelled.size();) {
        const size_t l = std::min(utf8_len((unsigned char)spelled[i]), spelled.size() - i);
        parts.push_back(spelled.substr(i, l));
        i += l;
    }
    while (parts.size() > 1) {
        int32_t best = INT32_MAX;
        size_t at = 0;
        for (size_t i = 0; i + 1 < parts.size(); i++) {
            auto it = merge_rank_.find(parts[i] + " " + parts[i + 1]);
            if (it != merge_rank_.end() && it->second < best) {
                best = it->second;
                at = i;
            }
        }
        if (best == INT32_MAX) break;
        parts[at] += parts[at + 1];
        parts.erase(parts.begin() + (long)at + 1);
    }
    std::vector<int32_t> ids;
    for (const std::string& p : parts) {
        const int32_t id = id_of(p);
        if (id < 0) throw FormatError("the Whisper vocabulary has no token for '" + p + "'");
        ids.push_back(id);
    }
    return ids;
}

std::vector<int32_t> WhisperTokens::encode(std::string_view text) const {
    std::vector<int32_t> out;
    for (const std::string& piece : pre_tokenize(text)) {
        std::vector<int32_t> ids = bpe(text::bytes_to_byte_level(piece));
        out.insert(out.end(), ids.begin(), ids.end());
    }
    return out;
}

std::vector<int32_t> WhisperTokens::non_speech_tokens() const {
    // openai-whisper's non_speech_tokens: symbols and speaker tags that are
    // one token (with or without a leading space), and every musical sign.
    std::vector<std::string> symbols;
    for (const char* s : {"\"", "#", "(", ")", "*", "+", "/", ":", ";", "<", "=", ">", "@", "[", "\\", "]", "^", "_",
                          "`", "{", "|", "}", "~", "\xE3\x80\x8C", "\xE3\x80\x8D", "\xE3\x80\x8E", "\xE3\x80\x8F"})
        symbols.emplace_back(s);
    for (const char* s : {"<<", ">>", "<<<", ">>>", "--", "---", "-(", "-[", "('", "(\"", "((", "))", "(((", ")))",
                          "[[", "]]", "{{", "}}", "\xE2\x99\xAA\xE2\x99\xAA", "\xE2\x99\xAA\xE2\x99\xAA\xE2\x99\xAA"})
        symbols.emplace_back(s);
    const std::vector<std::string> misc = {"\xE2\x99\xA9", "\xE2\x99\xAA", "\xE2\x99\xAB", "\xE2\x99\xAC",
                                           "\xE2\x99\xAD", "\xE2\x99\xAE", "\xE2\x99\xAF"};  // ♩♪♫♬♭♮♯
    std::set<int32_t> result;
    for (const char* s : {" -", " '"}) {
        std::vector<int32_t> t = encode(s);
        if (!t.empty()) result.insert(t[0]);
    }
    for (const std::string& s : symbols)
        for (const std::string& v : {s, " " + s}) {
            std::vector<int32_t> t = encode(v);
            if (t.size() == 1) result.insert(t[0]);
        }
    for (const std::string& s : misc)
        for (const std::string& v : {s, " " + s}) {
            std::vector<int32_t> t = encode(v);
            if (!t.empty()) result.insert(t[0]);
        }
    return std::vector<int32_t>(result.begin(), result.end());
}

}  // namespace akunu::whisper
