#include "whisper/transcription/window_decoder.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "whisper/transcription/compression_ratio.h"
#include "whisper/transcription/numpy_random.h"

namespace akunu::whisper {

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// The code point of the UTF-8 sequence at s[i] and its length (invalid bytes: -1, 1).
std::pair<long, size_t> code_point(const std::string& s, size_t i) {
    const unsigned char c = (unsigned char)s[i];
    if (c < 0x80) return {c, 1};
    const size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    if (len == 1 || i + len > s.size()) return {-1, 1};
    long cp = c & (0x3F >> (len - 1));
    for (size_t k = 1; k < len; k++) cp = (cp << 6) | ((unsigned char)s[i + k] & 0x3F);
    return {cp, len};
}

// str.isspace() for one code point.
bool is_space(long c) {
    return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

int argmax(const std::vector<double>& x) {
    return (int)(std::max_element(x.begin(), x.end()) - x.begin());  // the first maximum, as numpy
}

}  // namespace

std::string strip_text(const std::string& s) {
    size_t b = 0, e = s.size();
    while (b < e) {
        auto [cp, len] = code_point(s, b);
        if (!is_space(cp)) break;
        b += len;
    }
    // from the end: find the last non-space character
    size_t last_end = b;
    for (size_t i = b; i < e;) {
        auto [cp, len] = code_point(s, i);
        i += len;
        if (!is_space(cp)) last_end = i;
    }
    return s.substr(b, last_end - b);
}

std::vector<double> log_softmax(const std::vector<double>& x) {
    const double m = *std::max_element(x.begin(), x.end());
    double sum = 0.0;
    for (double v : x) sum += std::exp(v - m);
    const double lse = m + std::log(sum);
    std::vector<double> out(x.size());
    for (size_t i = 0; i < x.size(); i++) out[i] = x[i] - lse;
    return out;
}

LogitFilters::LogitFilters(const WhisperTokens& tok, const DecodeOptions& opts) : tok_(tok), opts_(opts) {
    begin_suppress_ = tok.space;
    begin_suppress_.push_back(tok.eot);
    max_initial_ = (int)std::nearbyint(opts.max_initial_timestamp / kTimePrecision);
}

void LogitFilters::apply(std::vector<double>& logits, const std::vector<int32_t>& sampled) const {
    mask(logits, sampled);
    // a timestamp when all timestamps together are likelier than any text token
    if (opts_.timestamps && timestamp_margin(logits) > 0)
        std::fill(logits.begin(), logits.begin() + tok_.timestamp_begin, kNegInf);
}

void LogitFilters::mask(std::vector<double>& logits, const std::vector<int32_t>& sampled) const {
    const int n = (int)logits.size();
    const int ts = tok_.timestamp_begin;
    auto set = [&](int32_t id) {
        if (id >= 0 && id < n) logits[(size_t)id] = kNegInf;
    };
    auto range = [&](int a, int b) {  // logits[a:b] = -inf, Python slice bounds
        a = std::clamp(a, 0, n);
        b = std::clamp(b, 0, n);
        for (int i = a; i < b; i++) logits[(size_t)i] = kNegInf;
    };
    if (sampled.empty() && opts_.suppress_blank)
        for (int32_t t : begin_suppress_) set(t);
    for (int32_t t : tok_.suppress) set(t);
    if (!opts_.timestamps) return;
    set(tok_.no_timestamps);
    // timestamps come in pairs (end of one segment, start of the next), except
    // just before the end token
    const size_t k = sampled.size();
    const bool last_ts = k >= 1 && sampled[k - 1] >= ts;
    const bool penultimate_ts = k < 2 || sampled[k - 2] >= ts;
    if (last_ts) {
        if (penultimate_ts) range(ts, n);
        else range(0, tok_.eot);
    }
    int32_t last_stamp = -1;
    for (int32_t t : sampled)
        if (t >= ts) last_stamp = t;
    if (last_stamp >= 0) {  // never go back in time (a closing timestamp may repeat the last one)
        const int floor = last_ts && !penultimate_ts ? last_stamp : last_stamp + 1;
        range(ts, floor);
    }
    if (sampled.empty()) {  // the first token is a timestamp, and not too late
        range(0, ts);
        range(ts + max_initial_ + 1, n);
    }
}

double LogitFilters::timestamp_margin(const std::vector<double>& logits) const {
    const size_t ts = (size_t)tok_.timestamp_begin;
    const std::vector<double> lp = log_softmax(logits);
    double m = kNegInf;
    for (size_t i = ts; i < lp.size(); i++)
        if (std::isfinite(lp[i])) m = std::max(m, lp[i]);
    if (m == kNegInf) return kNegInf;
    double sum = 0.0;
    for (size_t i = ts; i < lp.size(); i++)
        if (std::isfinite(lp[i])) sum += std::exp(lp[i] - m);
    const double best_text = *std::max_element(lp.begin(), lp.begin() + (long)ts);
    return m + std::log(sum) - best_text;
}

std::vector<int32_t> WindowDecoder::prompt(const std::vector<int32_t>& previous, const DecodeOptions& opts) const {
    std::vector<int32_t> tokens;
    if (!previous.empty()) {
        if (tok_.sot_prev < 0) throw UnsupportedError("the Whisper tokenizer has no <|startofprev|> token");
        tokens.push_back(tok_.sot_prev);
        const size_t keep = (size_t)(core_.config().n_text_ctx / 2 - 1);
        const size_t from = previous.size() > keep ? previous.size() - keep : 0;
        tokens.insert(tokens.end(), previous.begin() + (long)from, previous.end());
    }
    std::vector<int32_t> sot = tok_.sot_sequence(opts.language, opts.translate, opts.timestamps);
    tokens.insert(tokens.end(), sot.begin(), sot.end());
    return tokens;
}

std::pair<std::string, std::vector<double>> WindowDecoder::detect_language() {
    std::vector<float> logits = core_.decode(0, {tok_.sot}, 0);
    std::vector<double> x;
    for (const auto& l : tok_.languages) x.push_back((double)logits[(size_t)l.second]);
    if (x.empty()) throw UnsupportedError("the Whisper tokenizer lists no languages");
    std::vector<double> lp = log_softmax(x);
    for (double& v : lp) v = std::exp(v);
    return {tok_.languages[(size_t)argmax(lp)].first, lp};
}

std::pair<std::vector<int32_t>, double> WindowDecoder::sample(const std::vector<float>& first, int pos, int max_new,
                                                              const LogitFilters& filters, double temperature,
                                                              NumpyRng* rng) {
    std::vector<int32_t> tokens;
    double sum_lp = 0.0;
    std::vector<float> logits = first;
    const int n_ctx = core_.config().n_text_ctx;
    std::vector<double> x(logits.size()), p;
    for (int step = 0; step < max_new; step++) {
        for (size_t i = 0; i < logits.size(); i++) x[i] = (double)logits[i];
        filters.apply(x, tokens);
        const std::vector<double> lp = log_softmax(x);
        int32_t t;
        if (temperature == 0) {
            t = argmax(x);
        } else {
            std::vector<double> scaled(x.size());
            for (size_t i = 0; i < x.size(); i++) scaled[i] = x[i] / temperature;
            p = log_softmax(scaled);
            double total = 0.0;
            for (double& v : p) total += (v = std::exp(v));
            for (double& v : p) v /= total;
            t = rng->choice(p);
        }
        sum_lp += lp[(size_t)t];
        if (t == tok_.eot) break;
        tokens.push_back(t);
        if (pos >= n_ctx) break;
        logits = core_.decode(0, {t}, pos);
        pos++;
    }
    return {tokens, sum_lp};
}

WindowResult WindowDecoder::decode(const std::vector<int32_t>& previous, const DecodeOptions& opts) {
    const std::vector<int32_t> pr = prompt(previous, opts);
    const int max_new = core_.config().n_text_ctx - (int)pr.size();
    // the prompt in slot 0, split after <|startoftranscript|>: the logits there
    // give the no-speech probability
    const size_t split = (size_t)(std::find(pr.begin(), pr.end(), tok_.sot) - pr.begin()) + 1;
    const std::vector<float> at_sot = core_.decode(0, std::vector<int32_t>(pr.begin(), pr.begin() + (long)split), 0);
    const std::vector<float> first =
        split == pr.size() ? at_sot : core_.decode(0, std::vector<int32_t>(pr.begin() + (long)split, pr.end()), (int)split);
    WindowResult r;
    if (tok_.no_speech >= 0) {
        std::vector<double> x(at_sot.begin(), at_sot.end());
        r.no_speech_prob = std::exp(log_softmax(x)[(size_t)tok_.no_speech]);
    }
    LogitFilters filters(tok_, opts);
    std::pair<std::vector<int32_t>, double> best;
    if (opts.temperature == 0) {
        best = sample(first, (int)pr.size(), max_new, filters, 0.0, nullptr);
    } else {
        // best of N samples, one after another in slot 0: a sample writes only
        // the positions after the prompt, so the prompt's cache serves each one
        NumpyRng rng(opts.seed);
        bool have = false;
        for (int i = 0; i < std::max(1, opts.best_of); i++) {
            auto cand = sample(first, (int)pr.size(), max_new, filters, opts.temperature, &rng);
            if (!have || cand.second / (double)(cand.first.size() + 1) > best.second / (double)(best.first.size() + 1)) {
                best = std::move(cand);
                have = true;
            }
        }
    }
    r.tokens = std::move(best.first);
    r.sum_logprob = best.second;
    r.text = tok_.decode(r.tokens);
    r.avg_logprob = r.sum_logprob / (double)(r.tokens.size() + 1);
    r.temperature = opts.temperature;
    r.compression_ratio = compression_ratio(strip_text(r.text));
    return r;
}

}  // namespace akunu::whisper
