// Whisper's vocabulary and special tokens for decoding in C++, read from the
// model's tokenizer.json (directories) or the copy a GGUF stores under
// tokenizer.huggingface.json, as akunu/whisper/tokens.py reads them with
// Hugging Face `tokenizers`: the same special ids, languages, token text
// (byte-level BPE) and suppression list.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "weight/model_file.h"

namespace akunu::whisper {

constexpr double kTimePrecision = 0.02;  // seconds per timestamp token

class WhisperTokens {
public:
    // `path` is the model (a directory holds tokenizer.json; a GGUF carries it
    // in its metadata); `vocab_size` is the decoder's.
    WhisperTokens(const std::string& path, const ModelFile& file, int vocab_size);

    int32_t eot = -1, sot = -1, transcribe = -1, translate = -1, no_timestamps = -1;
    int32_t sot_prev = -1, sot_lm = -1, no_speech = -1;  // -1: the vocabulary has none
    int32_t timestamp_begin = -1;
    bool multilingual = false;
    std::vector<std::pair<std::string, int32_t>> languages;  // code and token, in id order
    std::vector<int32_t> space;  // encode(" ")
    // Suppressed at every step: the file's whisper.suppress_tokens (or
    // openai-whisper's non-speech symbols) plus the task and special tokens.
    std::vector<int32_t> suppress;

    // Text of the ids below <|endoftext|> (timestamps and specials dropped).
    std::string decode(const std::vector<int32_t>& ids) const;
    // Ids of a short text (BPE over the byte-level alphabet); enough for the
    // symbol strings the suppression list is built from.
    std::vector<int32_t> encode(std::string_view text) const;
    int32_t language_token(const std::string& code) const;  // -1 when unknown
    // <|sot|> [<|lang|> <|task|>] [<|notimestamps|>]
    std::vector<int32_t> sot_sequence(const std::string& language, bool translate_task, bool timestamps) const;

private:
    int32_t id_of(const std::string& token) const;  // -1 when absent
    std::vector<int32_t> non_speech_tokens() const;
    std::vector<int32_t> bpe(const std::string& spelled) const;

    int vocab_size_ = 0;
    std::vector<std::string> spelling_;  // by id
    std::vector<bool> special_;          // added tokens marked special
    std::unordered_map<std::string, int32_t> ids_;
    std::unordered_map<std::string, int32_t> merge_rank_;  // "left right"
};


}  // namespace akunu::whisper
