#include "whisper/transcription/wav_reader.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sys/stat.h>

#include "whisper/transcription/audio_error.h"

namespace akunu::whisper {

namespace {

uint16_t u16(const uint8_t* p) { return (uint16_t)(p[0] | (p[1] << 8)); }
uint32_t u32(const uint8_t* p) { return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24); }

constexpr uint16_t kPcm = 1, kFloat = 3, kExtensible = 0xFFFE;

// One sample as libsndfile's float conversion gives it (normalized: the full
// integer range maps to [-1, 1)).
float sample_at(const uint8_t* p, uint16_t fmt, int bits) {
    if (fmt == kFloat) {
        if (bits == 32) {
            float f;
            std::memcpy(&f, p, 4);
            return f;
        }
        double d;
        std::memcpy(&d, p, 8);
        return (float)d;
    }
    switch (bits) {
        case 8: return (float)((int)p[0] - 128) * (1.0f / 0x80);
        case 16: return (float)(int16_t)u16(p) * (1.0f / 0x8000);
        case 24: return (float)(int32_t)(((uint32_t)p[0] << 8) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 24)) *
                        (1.0f / 2147483648.0f);
        default: return (float)(int32_t)u32(p) * (1.0f / 2147483648.0f);
    }
}

}  // namespace

WavAudio parse_wav(const uint8_t* data, size_t size, const std::string& what) {
    auto bad = [&](const std::string& why) { return AudioError("cannot read " + what + " as audio: " + why); };
    if (size == 0) throw AudioError("the audio file " + what + " is empty (0 bytes)");
    if (size < 12 || std::memcmp(data, "RIFF", 4) != 0 || std::memcmp(data + 8, "WAVE", 4) != 0)
        throw bad("not a RIFF/WAVE file (the C API reads WAV only; FLAC, OGG and others load in Python)");
    uint16_t fmt = 0, channels = 0, bits = 0, block = 0;
    uint32_t rate = 0;
    bool have_fmt = false;
    const uint8_t* samples = nullptr;
    size_t n_bytes = 0;
    size_t at = 12;
    while (at + 8 <= size) {
        const uint8_t* c = data + at;
        const uint32_t len = u32(c + 4);
        const size_t body = at + 8;
        if (std::memcmp(c, "fmt ", 4) == 0) {
            if (len < 16 || body + 16 > size) throw bad("truncated format chunk");
            fmt = u16(data + body);
            channels = u16(data + body + 2);
            rate = u32(data + body + 4);
            block = u16(data + body + 12);
            bits = u16(data + body + 14);
            if (fmt == kExtensible) {
                if (len < 40 || body + 40 > size) throw bad("truncated extensible format chunk");
                fmt = u16(data + body + 24);  // the sub-format GUID starts with the format tag
            }
            have_fmt = true;
        } else if (std::memcmp(c, "data", 4) == 0) {
            if (!have_fmt) throw bad("the data chunk comes before the format chunk");
            samples = data + body;
            n_bytes = std::min<size_t>(len, size - body);  // cut short: keep what is there
            break;
        }
        at = body + (size_t)len + (len & 1);  // chunks are padded to even sizes
    }
    if (!have_fmt) throw bad("no format chunk");
    if (!samples) throw bad("no data chunk");
    if (fmt != kPcm && fmt != kFloat)
        throw bad("WAV sample format " + std::to_string(fmt) + " is not supported (PCM or IEEE float)");
    const bool ok_bits = fmt == kPcm ? (bits == 8 || bits == 16 || bits == 24 || bits == 32) : (bits == 32 || bits == 64);
    if (!ok_bits) throw bad(std::to_string(bits) + "-bit " + (fmt == kPcm ? "PCM" : "float") + " samples are not supported");
    if (channels == 0 || channels > 1024) throw bad("bad channel count " + std::to_string(channels));
    if (rate == 0 || rate > 10000000) throw bad("bad sample rate " + std::to_string(rate));
    const size_t width = bits / 8;
    if (block != width * channels) throw bad("block size " + std::to_string(block) + " does not match the format");

    WavAudio out;
    out.sample_rate = (int)rate;
    out.channels = channels;
    const size_t n_frames = n_bytes / block;
    out.mono.resize(n_frames);
    for (size_t i = 0; i < n_frames; i++) {
        const uint8_t* f = samples + i * block;
        if (channels == 1) {
            out.mono[i] = sample_at(f, fmt, bits);
            continue;
        }
        // numpy's float32 mean over the channels: a float32 sum, then a division
        float s = 0.0f;
        for (int ch = 0; ch < channels; ch++) s += sample_at(f + ch * width, fmt, bits);
        out.mono[i] = s / (float)channels;
    }
    return out;
}

WavAudio read_wav_file(const std::string& path) {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
        throw AudioError("audio file '" + path + "' does not exist");
    std::ifstream f(path, std::ios::binary);
    if (!f) throw AudioError("cannot read '" + path + "' as audio: the file cannot be opened");
    std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (f.bad()) throw AudioError("cannot read '" + path + "' as audio: read error");
    return parse_wav(bytes.data(), bytes.size(), "'" + path + "'");
}

}  // namespace akunu::whisper
