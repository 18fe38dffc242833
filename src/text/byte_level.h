// GPT-2's byte-level alphabet: every byte has a printable Unicode stand-in, so
// byte-level BPE vocabularies (GPT-2, Llama 3, Qwen, Whisper) spell raw bytes
// as UTF-8 text. Shared by the tokenizer and Whisper's token decoding.
#pragma once
#include <string>
#include <string_view>

namespace akunu::text {

// The UTF-8 spelling of raw bytes in the byte-level alphabet.
std::string bytes_to_byte_level(std::string_view bytes);
// The raw bytes a byte-level spelling stands for; false when `spelled` holds a
// character outside the alphabet (out is then unspecified).
bool byte_level_to_bytes(std::string_view spelled, std::string& out);

}  // namespace akunu::text
