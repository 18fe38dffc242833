// The tokenizer of a Hugging Face model directory: its tokenizer.json read
// component by component into the same pipeline HF `tokenizers` would build,
// with special-token ids from tokenizer_config.json / config.json as the
// Python package's HFTokenizer reads them (akunu/hf_tokenizer.py). A
// component this reader does not know is an UnsupportedError naming it.
#include <sys/stat.h>

#include <algorithm>
#include <fstream>

#include "core/error.h"
#include "text/tokenizer/regex_split.h"
#include "text/tokenizer/text_tokenizer.h"
#include "text/tokenizer/unicode.h"
#include "weight/json.h"

namespace akunu::text::tok {
namespace {

const std::string kWhat = "tokenizer.json";

std::string type_of(const JsonValue& v, const std::string& part) {
    if (!v.is_object()) throw FormatError(kWhat + ": " + part + " is not an object");
    return v.string("type", "", kWhat);
}

[[noreturn]] void unsupported(const std::string& part, const std::string& what) {
    throw UnsupportedError(kWhat + ": " + part + " '" + what + "' is not supported");
}

const JsonValue& member(const JsonValue& v, const std::string& key, const std::string& part) {
    const JsonValue* m = v.get(key);
    if (!m) throw FormatError(kWhat + ": " + part + " has no '" + key + "'");
    return *m;
}

const std::vector<JsonValue>& array_of(const JsonValue& v, const std::string& key, const std::string& part) {
    const JsonValue& m = member(v, key, part);
    if (m.kind != JsonValue::Kind::Array) throw FormatError(kWhat + ": " + part + "." + key + " is not an array");
    return m.arr;
}

std::optional<std::string> opt_string(const JsonValue& v, const std::string& key) {
    const JsonValue* m = v.get(key);
    if (!m || m->kind == JsonValue::Kind::Null) return std::nullopt;
    if (!m->is_string()) throw FormatError(kWhat + ": '" + key + "' is not a string");
    return m->str;
}

char32_t one_char(const std::string& s, const std::string& part) {
    std::u32string c = unicode::decode_utf8(s);
    if (c.size() != 1) throw FormatError(kWhat + ": " + part + " is not one character");
    return c[0];
}

// A Replace / Split pattern: {"String": s} (a literal) or {"Regex": r}.
struct Pattern {
    bool regex = false;
    std::string text;
};
Pattern pattern_of(const JsonValue& v, const std::string& part) {
    const JsonValue& p = member(v, "pattern", part);
    if (const JsonValue* s = p.get("String"); s && s->is_string()) return {false, s->str};
    if (const JsonValue* r = p.get("Regex"); r && r->is_string()) return {true, r->str};
    throw FormatError(kWhat + ": " + part + " pattern is neither String nor Regex");
}

// Token ids are integers from 0 to 2^24: larger ones would only make a huge empty table.
int32_t id_of(const JsonValue& v, const std::string& what) {
    if (!v.is_number() || v.num != double(int64_t(v.num)) || v.num < 0 || v.num >= double(1 << 24))
        throw FormatError(kWhat + ": " + what + " is not a token id");
    return int32_t(v.num);
}

std::unordered_map<std::string, int32_t> vocab_of(const JsonValue& model) {
    const JsonValue& v = member(model, "vocab", "model");
    if (!v.is_object()) unsupported("model vocab", "list (Unigram)");
    std::unordered_map<std::string, int32_t> out;
    out.reserve(v.obj.size() * 2);
    for (auto& kv : v.obj) {
        if (!unicode::valid_utf8(kv.first)) throw FormatError(kWhat + ": a vocabulary token is not UTF-8");
        out[kv.first] = id_of(kv.second, "the id of '" + kv.first + "'");
    }
    return out;
}

ModelPtr build_model(const JsonValue& m) {
    std::string type = type_of(m, "model");
    if (type.empty()) {  // untagged: told apart by their fields, as serde does
        if (m.get("merges")) type = "BPE";
        else if (m.get("max_input_chars_per_word")) type = "WordPiece";
        else if (m.get("vocab") && m.get("vocab")->is_object()) type = "WordLevel";
        else type = "Unigram";
    }
    if (type == "BPE") {
        if (const JsonValue* d = m.get("dropout"); d && d->is_number() && d->num > 0) unsupported("BPE dropout", "> 0");
        BpeOptions opt;
        opt.unk_token = opt_string(m, "unk_token");
        opt.continuing_subword_prefix = opt_string(m, "continuing_subword_prefix");
        opt.end_of_word_suffix = opt_string(m, "end_of_word_suffix");
        opt.fuse_unk = m.boolean("fuse_unk", false, kWhat);
        opt.byte_fallback = m.boolean("byte_fallback", false, kWhat);
        opt.ignore_merges = m.boolean("ignore_merges", false, kWhat);
        std::vector<std::pair<std::string, std::string>> merges;
        for (const JsonValue& e : array_of(m, "merges", "model")) {
            if (e.is_string()) {
                if (e.str.compare(0, 8, "#version") == 0) continue;
                size_t sp = e.str.find(' ');
                if (sp == std::string::npos || e.str.find(' ', sp + 1) != std::string::npos)
                    throw FormatError(kWhat + ": malformed merge '" + e.str + "'");
                merges.emplace_back(e.str.substr(0, sp), e.str.substr(sp + 1));
            } else if (e.kind == JsonValue::Kind::Array && e.arr.size() == 2 && e.arr[0].is_string() &&
                       e.arr[1].is_string()) {
                merges.emplace_back(e.arr[0].str, e.arr[1].str);
            } else {
                throw FormatError(kWhat + ": malformed merge");
            }
        }
        return make_bpe(vocab_of(m), merges, opt);
    }
    if (type == "WordPiece")
        return make_wordpiece(vocab_of(m), m.string("unk_token", "[UNK]", kWhat),
                              m.string("continuing_subword_prefix", "##", kWhat),
                              size_t(m.integer("max_input_chars_per_word", 100, kWhat)));
    if (type == "WordLevel") return make_wordlevel(vocab_of(m), m.string("unk_token", "<unk>", kWhat));
    unsupported("model", type);
}

NormalizerPtr build_normalizer(const JsonValue& n) {
    std::string type = type_of(n, "normalizer");
    if (type == "Sequence") {
        std::vector<NormalizerPtr> steps;
        for (auto& s : array_of(n, "normalizers", "normalizer")) steps.push_back(build_normalizer(s));
        return make_sequence_normalizer(steps);
    }
    if (type == "Prepend") return make_prepend(n.string("prepend", "", kWhat));
    if (type == "Replace") {
        Pattern p = pattern_of(n, "Replace normalizer");
        if (p.regex) unsupported("Replace normalizer regex", p.text);
        return make_replace(p.text, n.string("content", "", kWhat));
    }
    if (type == "NFD") return make_nfd();
    if (type == "NFC") return make_nfc();
    if (type == "Lowercase") return make_lowercase();
    if (type == "StripAccents") return make_strip_accents();
    if (type == "Strip") return make_strip(n.boolean("strip_left", true, kWhat), n.boolean("strip_right", true, kWhat));
    if (type == "BertNormalizer") {
        bool lower = n.boolean("lowercase", true, kWhat);
        const JsonValue* sa = n.get("strip_accents");
        bool strip = sa && sa->kind == JsonValue::Kind::Bool ? sa->b : lower;
        return make_bert_normalizer(n.boolean("clean_text", true, kWhat), n.boolean("handle_chinese_chars", true, kWhat),
                                    strip, lower);
    }
    unsupported("normalizer", type);
}

SplitBehavior behavior_of(const std::string& b) {
    if (b == "Removed") return SplitBehavior::Removed;
    if (b == "Isolated") return SplitBehavior::Isolated;
    if (b == "MergedWithPrevious") return SplitBehavior::MergedWithPrevious;
    if (b == "MergedWithNext") return SplitBehavior::MergedWithNext;
    if (b == "Contiguous") return SplitBehavior::Contiguous;
    unsupported("split behavior", b);
}

PrependScheme scheme_of(const JsonValue& v) {
    std::string s = v.string("prepend_scheme", "always", kWhat);
    if (const JsonValue* a = v.get("add_prefix_space"); a && a->kind == JsonValue::Kind::Bool && !a->b) s = "never";
    if (s == "always") return PrependScheme::Always;
    if (s == "first") return PrependScheme::First;
    if (s == "never") return PrependScheme::Never;
    unsupported("Metaspace prepend_scheme", s);
}

PreTokenizerPtr build_pre_tokenizer(const JsonValue& p) {
    std::string type = type_of(p, "pre_tokenizer");
    if (type == "Sequence") {
        std::vector<PreTokenizerPtr> steps;
        for (auto& s : array_of(p, "pretokenizers", "pre_tokenizer")) steps.push_back(build_pre_tokenizer(s));
        return make_sequence_pre_tokenizer(steps);
    }
    if (type == "ByteLevel")
        return make_byte_level_pre_tokenizer(p.boolean("add_prefix_space", true, kWhat), p.boolean("use_regex", true, kWhat));
    if (type == "Split") {
        Pattern pat = pattern_of(p, "Split pre-tokenizer");
        SplitBehavior b = behavior_of(p.string("behavior", "", kWhat));
        bool invert = p.boolean("invert", false, kWhat);
        if (!pat.regex) return make_literal_split(pat.text, b, invert);
        auto re = known_regex(pat.text);
        if (!re) unsupported("Split regex", pat.text);
        return make_regex_split(re, b, invert);
    }
    if (type == "Metaspace")
        return make_metaspace(one_char(p.string("replacement", "\xE2\x96\x81", kWhat), "Metaspace replacement"),
                              scheme_of(p), p.boolean("split", true, kWhat));
    if (type == "BertPreTokenizer") return make_bert_pre_tokenizer();
    if (type == "WhitespaceSplit") return make_whitespace_split();
    if (type == "Digits") return make_digits(p.boolean("individual_digits", false, kWhat));
    if (type == "Punctuation") return make_punctuation(behavior_of(p.string("behavior", "Isolated", kWhat)));
    unsupported("pre_tokenizer", type);
}

DecoderPtr build_decoder(const JsonValue& d) {
    std::string type = type_of(d, "decoder");
    if (type == "Sequence") {
        std::vector<DecoderPtr> steps;
        for (auto& s : array_of(d, "decoders", "decoder")) steps.push_back(build_decoder(s));
        return make_sequence_decoder(steps);
    }
    if (type == "ByteLevel") return make_byte_level_decoder();
    if (type == "Metaspace")
        return make_metaspace_decoder(one_char(d.string("replacement", "\xE2\x96\x81", kWhat), "Metaspace replacement"),
                                      scheme_of(d));
    if (type == "WordPiece") return make_wordpiece_decoder(d.string("prefix", "##", kWhat), d.boolean("cleanup", true, kWhat));
    if (type == "Replace") {
        Pattern p = pattern_of(d, "Replace decoder");
        if (p.regex) unsupported("Replace decoder regex", p.text);
        return make_replace_decoder(p.text, d.string("content", "", kWhat));
    }
    if (type == "ByteFallback") return make_byte_fallback_decoder();
    if (type == "Fuse") return make_fuse_decoder();
    if (type == "Strip")
        return make_strip_decoder(one_char(d.string("content", " ", kWhat), "Strip content"),
                                  size_t(d.integer("start", 0, kWhat)), size_t(d.integer("stop", 0, kWhat)));
    if (type == "BPEDecoder") return make_bpe_decoder(d.string("suffix", "</w>", kWhat));
    unsupported("decoder", type);
}

int32_t special_id(const JsonValue& entry, const std::string& part) {
    if (entry.kind == JsonValue::Kind::Array && entry.arr.size() == 2) return id_of(entry.arr[1], part);
    throw FormatError(kWhat + ": " + part + " is not [token, id]");
}

// Wraps the ids `post` adds around those of `inner` (a Sequence applies its processors in turn).
void build_post(const JsonValue& pp, PostProcessor& post) {
    std::string type = type_of(pp, "post_processor");
    if (type == "Sequence") {
        for (auto& s : array_of(pp, "processors", "post_processor")) build_post(s, post);
        return;
    }
    if (type == "ByteLevel") return;  // offsets only
    std::vector<int32_t> before, after;
    if (type == "TemplateProcessing") {
        const JsonValue& specials = member(pp, "special_tokens", "TemplateProcessing");
        bool seen_a = false;
        for (const JsonValue& piece : array_of(pp, "single", "TemplateProcessing")) {
            if (const JsonValue* st = piece.get("SpecialToken")) {
                std::string id = st->string("id", "", kWhat);
                const JsonValue* tok = specials.get(id);
                if (!tok) throw FormatError(kWhat + ": TemplateProcessing special token '" + id + "' is not listed");
                for (const JsonValue& i : array_of(*tok, "ids", "TemplateProcessing special token"))
                    (seen_a ? after : before).push_back(id_of(i, "TemplateProcessing id"));
            } else if (const JsonValue* seq = piece.get("Sequence")) {
                if (seq->string("id", "A", kWhat) != "A" || seen_a) unsupported("TemplateProcessing single template", "B");
                seen_a = true;
            } else {
                throw FormatError(kWhat + ": TemplateProcessing piece is neither SpecialToken nor Sequence");
            }
        }
    } else if (type == "BertProcessing" || type == "RobertaProcessing") {
        before.push_back(special_id(member(pp, "cls", type), type + ".cls"));
        after.push_back(special_id(member(pp, "sep", type), type + ".sep"));
    } else {
        unsupported("post_processor", type);
    }
    post.present = true;
    post.before.insert(post.before.begin(), before.begin(), before.end());
    post.after.insert(post.after.end(), after.begin(), after.end());
}

bool mentions_byte_level(const JsonValue& v) {
    if (v.is_string()) return v.str == "ByteLevel";
    for (auto& e : v.arr)
        if (mentions_byte_level(e)) return true;
    for (auto& kv : v.obj)
        if (kv.first == "ByteLevel" || mentions_byte_level(kv.second)) return true;
    return false;
}

JsonValue read_optional_json(const std::string& path) {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return JsonValue();
    JsonValue v;
    try {
        v = read_json_file(path);
    } catch (const std::exception& e) {
        throw UnsupportedError("cannot read " + path + ": " + e.what());
    }
    return v.is_object() ? v : JsonValue();
}

std::optional<std::string> token_text(const JsonValue* v) {
    if (!v) return std::nullopt;
    if (v->is_string()) return v->str;
    if (const JsonValue* c = v->get("content"); c && c->is_string()) return c->str;
    return std::nullopt;
}

int32_t special_token_id(const Pipeline& p, const JsonValue& cfg, const JsonValue& model_cfg, const std::string& key,
                         size_t n) {
    if (auto text = token_text(cfg.get(key)))
        if (auto id = p.token_to_id(*text)) return *id;
    const JsonValue* fb = model_cfg.get(key + "_id");
    if (fb && fb->kind == JsonValue::Kind::Array && !fb->arr.empty()) fb = &fb->arr[0];
    if (fb && fb->is_number() && fb->num == double(int64_t(fb->num)) && fb->num >= 0 && fb->num < double(n))
        return int32_t(fb->num);
    return -1;
}

// serde_json reads UTF-8 only: so does this, so that every string in the pipeline is UTF-8
JsonValue read_tokenizer_json(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw Error("cannot open '" + path + "'");
    f.seekg(0, std::ios::end);
    std::streamoff size = f.tellg();
    if (size < 0 || size > (256 << 20)) throw FormatError("'" + path + "' is not a JSON file of at most 256 MiB");
    f.seekg(0);
    std::string text(size_t(size), '\0');
    f.read(&text[0], size);
    if (!unicode::valid_utf8(text)) throw FormatError("'" + path + "' is not UTF-8");
    return parse_json(text.data(), text.size(), "'" + path + "'");
}

}  // namespace

std::shared_ptr<const Tokenizer> tokenizer_from_hf_directory(const std::string& dir) {
    std::string path = dir + "/tokenizer.json";
    struct stat st;
    if (::stat(path.c_str(), &st) != 0)
        throw UnsupportedError("the model directory '" + dir + "' has no tokenizer.json");
    JsonValue spec = read_tokenizer_json(path);
    if (!spec.is_object()) throw FormatError(kWhat + " is not an object");
    Pipeline p;
    const JsonValue* model = spec.get("model");
    if (!model) throw FormatError(kWhat + " has no model");
    p.model = build_model(*model);
    if (const JsonValue* n = spec.get("normalizer"); n && n->kind != JsonValue::Kind::Null) p.normalizer = build_normalizer(*n);
    if (const JsonValue* pt = spec.get("pre_tokenizer"); pt && pt->kind != JsonValue::Kind::Null)
        p.pre_tokenizer = build_pre_tokenizer(*pt);
    if (const JsonValue* pp = spec.get("post_processor"); pp && pp->kind != JsonValue::Kind::Null) build_post(*pp, p.post);
    const JsonValue* dec = spec.get("decoder");
    if (dec && dec->kind != JsonValue::Kind::Null) p.decoder = build_decoder(*dec);
    std::vector<AddedToken> added;
    if (const JsonValue* at = spec.get("added_tokens"); at && at->kind == JsonValue::Kind::Array) {
        for (const JsonValue& t : at->arr) {
            AddedToken a;
            a.content = t.string("content", "", kWhat);
            if (!unicode::valid_utf8(a.content)) throw FormatError(kWhat + ": an added token is not UTF-8");
            a.single_word = t.boolean("single_word", false, kWhat);
            a.lstrip = t.boolean("lstrip", false, kWhat);
            a.rstrip = t.boolean("rstrip", false, kWhat);
            a.normalized = t.boolean("normalized", true, kWhat);
            a.special = t.boolean("special", false, kWhat);
            added.push_back(a);
        }
    }
    if (!added.empty()) p.added.add_tokens(added, *p.model, p.normalizer.get());

    // the vocabulary as get_vocab(with_added_tokens=True) lists it
    Vocabulary v;
    v.hf_directory = true;
    int64_t max_id = -1;
    for (auto& kv : p.model->vocab()) max_id = std::max<int64_t>(max_id, kv.second);
    for (auto& kv : p.added.by_id()) max_id = std::max<int64_t>(max_id, kv.first);
    size_t n = size_t(max_id + 1);
    v.tokens.assign(n, "");
    v.types.assign(n, NORMAL);
    for (auto& kv : p.model->vocab())
        if (kv.second >= 0) v.tokens[size_t(kv.second)] = kv.first;
    for (auto& kv : p.added.by_id()) {
        if (kv.first < 0) continue;
        v.tokens[size_t(kv.first)] = kv.second.content;
        if (kv.second.special) v.types[size_t(kv.first)] = CONTROL;
    }
    std::string model_type = model->string("type", "", kWhat);
    v.kind = model_type == "WordPiece" ? "bert" : (dec && mentions_byte_level(*dec)) ? "gpt2" : "llama";
    if (v.kind == "llama")
        for (size_t i = 0; i < n; ++i) {
            const std::string& t = v.tokens[i];
            if (t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t.back() == '>') v.types[i] = BYTE;
        }
    JsonValue cfg = read_optional_json(dir + "/tokenizer_config.json");
    JsonValue model_cfg = read_optional_json(dir + "/config.json");
    v.bos = special_token_id(p, cfg, model_cfg, "bos_token", n);
    v.eos = special_token_id(p, cfg, model_cfg, "eos_token", n);
    return std::make_shared<TextTokenizer>(std::move(p), std::move(v));
}

}  // namespace akunu::text::tok
