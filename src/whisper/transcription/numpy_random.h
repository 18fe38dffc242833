// numpy's default_rng(seed) in C++ (SeedSequence -> PCG64 -> Generator), for
// the sampled decodes of Whisper's temperature fallback: the Python path
// draws them with rng.choice(n, p=p), so the same seed draws the same tokens.
#pragma once
#include <cstdint>
#include <vector>

namespace akunu::whisper {

class NumpyRng {
public:
    explicit NumpyRng(uint64_t seed);
    uint64_t next_u64();
    double random();  // Generator.random(): [0, 1) with 53 random bits
    // Generator.choice(p.size(), p=p): the index where a uniform draw falls in
    // the cumulative sum of p (normalized by its last value).
    int choice(const std::vector<double>& p);

private:
    unsigned __int128 state_ = 0, inc_ = 0;
    void step();
};

}  // namespace akunu::whisper
