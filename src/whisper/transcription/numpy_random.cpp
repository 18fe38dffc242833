#include "whisper/transcription/numpy_random.h"

#include <algorithm>

#include "core/error.h"

namespace akunu::whisper {

namespace {

// SeedSequence's hash constants (numpy/random/bit_generator.pyx).
constexpr uint32_t kInitA = 0x43b0d7e5, kMultA = 0x931e8875, kInitB = 0x8b51f9dd, kMultB = 0x58f38ded;
constexpr uint32_t kMixMultL = 0xca01f9dd, kMixMultR = 0x4973f715;
constexpr int kXShift = 16;
constexpr int kPoolSize = 4;

uint32_t hashmix(uint32_t value, uint32_t& hash_const) {
    value ^= hash_const;
    hash_const *= kMultA;
    value *= hash_const;
    value ^= value >> kXShift;
    return value;
}

uint32_t mix(uint32_t x, uint32_t y) {
    uint32_t r = kMixMultL * x - kMixMultR * y;
    r ^= r >> kXShift;
    return r;
}

// SeedSequence(seed).generate_state(4, uint64): the seed as 32-bit words
// (least significant first; 0 is one word), mixed into a pool of four.
std::vector<uint64_t> seed_state(uint64_t seed) {
    std::vector<uint32_t> entropy;
    do {
        entropy.push_back((uint32_t)seed);
        seed >>= 32;
    } while (seed);
    uint32_t pool[kPoolSize];
    uint32_t hc = kInitA;
    for (int i = 0; i < kPoolSize; i++) pool[i] = hashmix(i < (int)entropy.size() ? entropy[(size_t)i] : 0u, hc);
    for (int s = 0; s < kPoolSize; s++)
        for (int d = 0; d < kPoolSize; d++)
            if (s != d) pool[d] = mix(pool[d], hashmix(pool[s], hc));
    for (size_t s = kPoolSize; s < entropy.size(); s++)
        for (int d = 0; d < kPoolSize; d++) pool[d] = mix(pool[d], hashmix(entropy[s], hc));
    uint32_t words[8];
    uint32_t hb = kInitB;
    for (int i = 0; i < 8; i++) {
        uint32_t v = pool[i % kPoolSize];
        v ^= hb;
        hb *= kMultB;
        v *= hb;
        v ^= v >> kXShift;
        words[i] = v;
    }
    std::vector<uint64_t> out(4);
    for (int i = 0; i < 4; i++) out[(size_t)i] = (uint64_t)words[2 * i] | ((uint64_t)words[2 * i + 1] << 32);
    return out;
}

const unsigned __int128 kPcgMult = ((unsigned __int128)0x2360ED051FC65DA4ULL << 64) | 0x4385DF649FCCF645ULL;

}  // namespace

NumpyRng::NumpyRng(uint64_t seed) {
    const std::vector<uint64_t> s = seed_state(seed);
    const unsigned __int128 initstate = ((unsigned __int128)s[0] << 64) | s[1];
    const unsigned __int128 initseq = ((unsigned __int128)s[2] << 64) | s[3];
    // pcg_setseq_128_srandom_r
    state_ = 0;
    inc_ = (initseq << 1) | 1;
    step();
    state_ += initstate;
    step();
}

void NumpyRng::step() { state_ = state_ * kPcgMult + inc_; }

uint64_t NumpyRng::next_u64() {
    step();
    // XSL-RR output
    const uint64_t x = (uint64_t)(state_ >> 64) ^ (uint64_t)state_;
    const unsigned rot = (unsigned)(state_ >> 122);
    return (x >> rot) | (x << ((64 - rot) & 63));
}

double NumpyRng::random() { return (double)(next_u64() >> 11) * (1.0 / 9007199254740992.0); }

int NumpyRng::choice(const std::vector<double>& p) {
    if (p.empty()) throw Error("choice from an empty distribution");
    std::vector<double> cdf(p.size());
    double acc = 0.0;
    for (size_t i = 0; i < p.size(); i++) cdf[i] = acc += p[i];
    const double last = cdf.back();
    for (double& c : cdf) c /= last;
    const double u = random();
    // searchsorted(side="right"): the first index whose cdf exceeds u
    return (int)(std::upper_bound(cdf.begin(), cdf.end(), u) - cdf.begin());
}

}  // namespace akunu::whisper
