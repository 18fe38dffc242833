#include "inference/batch_engine.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "core/command_builder.h"
#include "core/error.h"
#include "core/kernel_params.h"

namespace akunu {

namespace {
// The batch table's output head starts at its last gather_rows (then
// output_norm, lm_head and whatever maps the logits: the vocabulary slices'
// gather over tensor-parallel ranks, Gemma 2's soft cap; table_builder.cpp).
size_t head_start(const DispatchTable& t) {
    for (size_t i = t.labels.size(); i-- > 0;)
        if (t.labels[i] == "gather_rows") {
            if (i + 2 >= t.labels.size() || t.labels[i + 2] != "lm_head") break;
            return i;
        }
    throw Error("internal error: the batch table does not end with its output head");
}

// One command built through the table builder's Cmd helper, returned alone.
template <class F>
DispatchCmd single_command(Device& dev, const char* kernel, F&& bind) {
    DispatchTable t;
    Cmd cmd(t, dev, kernel, kernel);
    bind(cmd);
    cmd.emit();
    return t.commands.back();
}
}  // namespace

BatchEngine::BatchEngine(Device& dev, const ModelConfig& cfg, const ArchDescriptor& arch, const ModelWeights& w,
                         int n_ctx, int prefill_chunk, const BatchOptions& opt, std::mutex& device_lock)
    : dev_(dev), device_lock_(device_lock), cfg_(cfg), n_ctx_(n_ctx), pool_(1, 1) {
    if (opt.max_seqs < 1 || opt.max_seqs > 4096)
        throw Error("the number of parallel sequences must be between 1 and 4096, got " + std::to_string(opt.max_seqs));
    if (opt.block_size < 1 || opt.block_size > 1024)
        throw Error("KV block size must be between 1 and 1024, got " + std::to_string(opt.block_size));
    if (opt.kv_tokens < 0) throw Error("kv_tokens must be >= 0 (0: room for every sequence's whole context)");
    const int bs = opt.block_size;
    const long long kv_tokens = opt.kv_tokens > 0 ? opt.kv_tokens : (long long)opt.max_seqs * n_ctx;
    const long long n_blocks = (kv_tokens + bs - 1) / bs;
    if (n_blocks > (1 << 28)) throw Error("kv_tokens " + std::to_string(kv_tokens) + " is too large");
    const int pass = opt.max_pass_tokens > 0 ? opt.max_pass_tokens : std::max(prefill_chunk, opt.max_seqs);
    const size_t vocab = (size_t)cfg.vocab_size;
    if ((size_t)opt.max_seqs * vocab * 4 >= (1ull << 32))
        throw Error("too many parallel sequences for a vocabulary of " + std::to_string(vocab) + " tokens");

    const size_t kv_bytes = (size_t)n_blocks * bs * PagedKVCache::bytes_per_token(cfg.n_layers, cfg.kv_dim(),
                                                                                  cfg.k_cache_type, cfg.v_cache_type);
    const size_t avail = dev.available_memory();
    if (avail && (double)kv_bytes > 0.95 * (double)avail)
        throw Error("a KV cache of " + std::to_string(kv_tokens) + " tokens for " + std::to_string(opt.max_seqs) +
                    " sequences needs " + std::to_string(kv_bytes >> 20) + " MiB but " +
                    std::to_string(avail >> 20) + " MiB is free; ask for fewer kv_tokens or parallel sequences");

    kv_.allocate(dev, cfg.n_layers, (int)n_blocks, bs, opt.max_seqs, n_ctx, cfg.kv_dim(), cfg.k_cache_type,
                 cfg.v_cache_type);
    pool_ = BlockPool((int)n_blocks, bs);
    scratch_.allocate(dev, cfg, pass, 1, opt.max_seqs);
    const size_t mask_words = (vocab + 31) / 32;
    rows_ = owned_.allocate(dev, (size_t)pass * 8);
    out_rows_ = owned_.allocate(dev, (size_t)opt.max_seqs * 4);
    out_ids_ = owned_.allocate(dev, (size_t)opt.max_seqs * 4);
    history_ = owned_.allocate(dev, (size_t)opt.max_seqs * ((size_t)n_ctx + 1) * 4);
    bias_ = owned_.allocate(dev, (size_t)opt.max_seqs * SamplerBuffers::kMaxBias * 8);
    mask_ = owned_.allocate(dev, (size_t)opt.max_seqs * mask_words * 4);
    work_ = owned_.allocate(dev, vocab * 8 + SamplerBuffersScratchBytes);

    BatchBuffers bb{&kv_, rows_, out_rows_};
    table_ = build_dispatch_table(dev, cfg, arch, w, unused_kv_, scratch_, TableKind::Batch, &bb);
    body_ = table_;
    body_.commands.resize(head_start(table_));
    body_.labels.resize(body_.commands.size());
    body_.renew_id();
    argmax_cmd_ = single_command(dev, "argmax", [&](Cmd& c) {
        c.buf(scratch_.logits).buf(out_ids_).params(ArgmaxParams{(uint32_t)vocab, 0, 1});
    });
    sample_cmd_ = single_command(dev, "sample", [&](Cmd& c) {
        c.buf(scratch_.logits).buf(out_ids_).buf(history_).buf(bias_).buf(mask_).buf(work_)
            .params(SamplingConfig().to_params((int)vocab, false));
    });
    draws_.commands.reserve((size_t)opt.max_seqs);
    seqs_.resize((size_t)opt.max_seqs);
    ids_.reserve((size_t)pass);
    rows_host_.reserve((size_t)pass * 2);
    out_idx_.reserve((size_t)opt.max_seqs);
    out_host_.resize((size_t)opt.max_seqs);
    table_row_.resize((size_t)kv_.max_blocks);
}

BatchEngine::~BatchEngine() {
    kv_.release(dev_);
    scratch_.release(dev_);
    owned_.release(dev_);
}

void BatchEngine::check_seq(int seq) const {
    if (seq < 0 || seq >= (int)seqs_.size() || !seqs_[(size_t)seq].open)
        throw Error("no open batch sequence " + std::to_string(seq));
}

int BatchEngine::length(int seq) const {
    std::lock_guard<std::mutex> lock(device_lock_);
    check_seq(seq);
    return (int)seqs_[(size_t)seq].tokens.size();
}

int BatchEngine::blocks_needed(int seq, int n) const {
    std::lock_guard<std::mutex> lock(device_lock_);
    return new_blocks(seq, n);
}

int BatchEngine::pass_shortfall(const std::vector<std::pair<int, int>>& entries) const {
    std::lock_guard<std::mutex> lock(device_lock_);
    long long need = 0;
    for (const auto& [seq, n] : entries) need += new_blocks(seq, n);
    return (int)std::max<long long>(0, need - (long long)pool_.available());
}

int BatchEngine::new_blocks(int seq, int n) const {
    check_seq(seq);
    const Sequence& s = seqs_[(size_t)seq];
    const long long need = ((long long)s.tokens.size() + n + kv_.block_size - 1) / kv_.block_size;
    return (int)std::max<long long>(0, need - (long long)s.blocks.size());
}

int BatchEngine::open(const std::vector<int32_t>& prompt, int* cached_tokens) {
    std::lock_guard<std::mutex> lock(device_lock_);
    for (int32_t t : prompt)
        if (t < 0 || t >= cfg_.vocab_size)
            throw Error("token id " + std::to_string(t) + " is outside the vocabulary (size " +
                        std::to_string(cfg_.vocab_size) + ")");
    if (prompt.size() >= (size_t)n_ctx_)
        throw Error("prompt of " + std::to_string(prompt.size()) + " tokens does not fit the context of " +
                    std::to_string(n_ctx_) + " tokens");
    int seq = -1;
    for (size_t i = 0; i < seqs_.size(); i++)
        if (!seqs_[i].open) {
            seq = (int)i;
            break;
        }
    if (cached_tokens) *cached_tokens = 0;
    if (seq < 0) return -1;
    Sequence& s = seqs_[(size_t)seq];
    s = Sequence();
    s.open = true;
    s.tokens.reserve((size_t)n_ctx_);
    s.blocks.reserve((size_t)kv_.max_blocks);
    s.hashes.reserve((size_t)kv_.max_blocks);
    const int bs = kv_.block_size;
    // Reuse whole cached blocks, leaving at least the last prompt token to feed.
    const size_t reusable = prompt.empty() ? 0 : (prompt.size() - 1) / (size_t)bs;
    uint64_t parent = 0;
    for (size_t i = 0; i < reusable; i++) {
        const int32_t* blk = prompt.data() + i * bs;
        const uint64_t h = BlockPool::chain_hash(parent, blk, bs);
        const int b = pool_.lookup(h, parent, blk);
        if (b < 0) break;
        s.blocks.push_back(b);
        s.hashes.push_back(h);
        s.tokens.insert(s.tokens.end(), blk, blk + bs);
        parent = h;
    }
    lookup_tokens_ += (long long)prompt.size();
    hit_tokens_ += (long long)s.tokens.size();
    if (cached_tokens) *cached_tokens = (int)s.tokens.size();
    write_table_row(seq);
    return seq;
}

int BatchEngine::adopt_locked(int seq, const std::vector<int32_t>& tokens, int n, const KVCache& src) {
    check_seq(seq);
    Sequence& s = seqs_[(size_t)seq];
    const int start = (int)s.tokens.size();
    n = std::min(n, (int)tokens.size());
    if (n <= start || n > n_ctx_ || src.k_type != kv_.k_type || src.v_type != kv_.v_type || src.kv_dim != kv_.kv_dim)
        return start;
    for (int i = 0; i < start; i++)
        if (s.tokens[(size_t)i] != tokens[(size_t)i]) throw Error("internal error: adopted tokens differ from the sequence's");
    if (new_blocks(seq, n - start) > pool_.available()) return start;
    grow(seq, n - start);
    const int bs = kv_.block_size;
    const size_t k_row = kv_row_bytes(kv_.k_type, (uint32_t)kv_.kv_dim);
    const size_t v_row = kv_row_bytes(kv_.v_type, (uint32_t)kv_.kv_dim);
    for (size_t l = 0; l < kv_.k.size(); l++)
        for (int p = start; p < n;) {  // one copy per block's run of positions
            const int run = std::min(n, (p / bs + 1) * bs) - p;
            const size_t row = (size_t)s.blocks[(size_t)(p / bs)] * bs + (size_t)(p % bs);
            dev_.copy_buffer(kv_.k[l], row * k_row, src.k[l], (size_t)p * k_row, (size_t)run * k_row);
            dev_.copy_buffer(kv_.v[l], row * v_row, src.v[l], (size_t)p * v_row, (size_t)run * v_row);
            p += run;
        }
    s.tokens.insert(s.tokens.end(), tokens.begin() + start, tokens.begin() + n);
    publish_full_blocks(s);
    return n;
}

void BatchEngine::close(int seq) {
    std::lock_guard<std::mutex> lock(device_lock_);
    check_seq(seq);
    Sequence& s = seqs_[(size_t)seq];
    for (int b : s.blocks) pool_.release(b);
    s = Sequence();
}

void BatchEngine::set_sampling(int seq, const SamplingConfig& cfg) {
    std::lock_guard<std::mutex> lock(device_lock_);
    check_seq(seq);
    cfg.validate(cfg_.vocab_size);
    Sequence& s = seqs_[(size_t)seq];
    s.sampling = cfg;
    s.greedy = cfg.temperature <= 0.0f && cfg.logit_bias.empty() && !cfg.penalizes() && !s.mask_on;
    std::vector<int32_t> pairs(cfg.logit_bias.size() * 2);
    for (size_t i = 0; i < cfg.logit_bias.size(); i++) {
        pairs[2 * i] = cfg.logit_bias[i].first;
        std::memcpy(&pairs[2 * i + 1], &cfg.logit_bias[i].second, 4);
    }
    if (!pairs.empty())
        dev_.write_buffer(bias_, pairs.data(), pairs.size() * 4, (size_t)seq * SamplerBuffers::kMaxBias * 8);
    // the penalties look back at the context: the cached prompt tokens too
    if (cfg.penalizes() && !s.tokens.empty())
        dev_.write_buffer(history_, s.tokens.data(), s.tokens.size() * 4, (size_t)seq * ((size_t)n_ctx_ + 1) * 4);
}

void BatchEngine::set_mask(int seq, const std::vector<uint32_t>& words) {
    std::lock_guard<std::mutex> lock(device_lock_);
    check_seq(seq);
    Sequence& s = seqs_[(size_t)seq];
    const size_t need = ((size_t)cfg_.vocab_size + 31) / 32;
    if (!words.empty()) {
        if (words.size() != need)
            throw Error("grammar mask has " + std::to_string(words.size()) + " words, expected " +
                        std::to_string(need) + " (one bit per token)");
        dev_.write_buffer(mask_, words.data(), need * 4, (size_t)seq * need * 4);
    }
    s.mask_on = !words.empty();
    const SamplingConfig& c = s.sampling;
    s.greedy = c.temperature <= 0.0f && c.logit_bias.empty() && !c.penalizes() && !s.mask_on;
}

void BatchEngine::write_table_row(int seq) {
    const Sequence& s = seqs_[(size_t)seq];
    std::fill(table_row_.begin(), table_row_.end(), 0);  // unused entries: a valid block, never read
    std::copy(s.blocks.begin(), s.blocks.end(), table_row_.begin());
    dev_.write_buffer(kv_.tables, table_row_.data(), table_row_.size() * 4, (size_t)seq * kv_.max_blocks * 4);
}

void BatchEngine::grow(int seq, int n) {
    Sequence& s = seqs_[(size_t)seq];
    const int need = new_blocks(seq, n);
    for (int i = 0; i < need; i++) {
        const int b = pool_.allocate();
        if (b < 0) throw Error("internal error: KV blocks ran out after the check");
        s.blocks.push_back(b);
    }
    if (need > 0) write_table_row(seq);
}

void BatchEngine::publish_full_blocks(Sequence& s) {
    const size_t bs = (size_t)kv_.block_size;
    while (s.hashes.size() < s.tokens.size() / bs) {
        const size_t i = s.hashes.size();
        const uint64_t parent = i ? s.hashes[i - 1] : 0;
        const int32_t* blk = s.tokens.data() + i * bs;
        const uint64_t h = BlockPool::chain_hash(parent, blk, (int)bs);
        pool_.publish(s.blocks[i], h, parent, blk);
        s.hashes.push_back(h);
    }
}

std::vector<int32_t> BatchEngine::step(const std::vector<BatchEntry>& entries) {
    std::lock_guard<std::mutex> lock(device_lock_);
    return run_step(entries, nullptr);
}

std::vector<std::pair<std::string, double>> BatchEngine::profile_step(const std::vector<BatchEntry>& entries,
                                                                       std::vector<int32_t>* drawn) {
    std::lock_guard<std::mutex> lock(device_lock_);
    std::vector<std::pair<std::string, double>> out;
    std::vector<int32_t> d = run_step(entries, &out);
    if (drawn) *drawn = d;
    return out;
}

std::vector<int32_t> BatchEngine::run_step(const std::vector<BatchEntry>& entries,
                                           std::vector<std::pair<std::string, double>>* profile) {
    // every check before any work
    size_t total = 0, n_out = 0;
    int blocks = 0;
    for (size_t e = 0; e < entries.size(); e++) {
        const BatchEntry& be = entries[e];
        check_seq(be.seq);
        for (size_t f = 0; f < e; f++)
            if (entries[f].seq == be.seq) throw Error("a batch step feeds each sequence at most once");
        if (be.tokens.empty()) throw Error("a batch entry needs at least one token");
        for (int32_t t : be.tokens)
            if (t < 0 || t >= cfg_.vocab_size)
                throw Error("token id " + std::to_string(t) + " is outside the vocabulary (size " +
                            std::to_string(cfg_.vocab_size) + ")");
        const size_t len = seqs_[(size_t)be.seq].tokens.size();
        if (len + be.tokens.size() > (size_t)n_ctx_)
            throw Error("context overflow: sequence " + std::to_string(be.seq) + " has " + std::to_string(len) +
                        " tokens, " + std::to_string(be.tokens.size()) + " more exceed n_ctx = " +
                        std::to_string(n_ctx_));
        total += be.tokens.size();
        n_out += be.sample ? 1 : 0;
        blocks += new_blocks(be.seq, (int)be.tokens.size());
    }
    if (total == 0) return {};
    if (total > (size_t)scratch_.max_tokens)
        throw Error("a batch pass takes at most " + std::to_string(scratch_.max_tokens) + " tokens, got " +
                    std::to_string(total));
    if (blocks > pool_.available())
        throw Error("KV cache full: the step needs " + std::to_string(blocks) + " more blocks, " +
                    std::to_string(pool_.available()) + " are free");

    // Rows of generated tokens lead the pass (and their draws the logits
    // rows): backends that run the two kinds on different kernels split there.
    order_.clear();
    for (int pass = 0; pass < 2; pass++)
        for (size_t e = 0; e < entries.size(); e++)
            if (entries[e].generated == (pass == 0)) order_.push_back((int)e);
    uint32_t n_generated = 0, n_out_generated = 0;
    ids_.clear();
    rows_host_.clear();
    out_idx_.clear();
    out_of_entry_.assign(entries.size(), -1);
    for (int e : order_) {
        const BatchEntry& be = entries[(size_t)e];
        Sequence& s = seqs_[(size_t)be.seq];
        grow(be.seq, (int)be.tokens.size());
        const int pos0 = (int)s.tokens.size();
        for (size_t i = 0; i < be.tokens.size(); i++) {
            rows_host_.push_back(be.seq);
            rows_host_.push_back(pos0 + (int)i);
        }
        ids_.insert(ids_.end(), be.tokens.begin(), be.tokens.end());
        if (be.generated) n_generated += (uint32_t)be.tokens.size();
        if (be.sample) {
            out_of_entry_[(size_t)e] = (int)out_idx_.size();
            out_idx_.push_back((int32_t)ids_.size() - 1);
            if (be.generated) n_out_generated++;
        }
        if (s.sampling.penalizes())
            dev_.write_buffer(history_, be.tokens.data(), be.tokens.size() * 4,
                              ((size_t)be.seq * ((size_t)n_ctx_ + 1) + (size_t)pos0) * 4);
    }
    dev_.write_buffer(scratch_.prompt_ids, ids_.data(), ids_.size() * 4);
    dev_.write_buffer(rows_, rows_host_.data(), rows_host_.size() * 4);
    if (n_out) dev_.write_buffer(out_rows_, out_idx_.data(), n_out * 4);

    ReplayState st;
    st.n_tokens = (uint32_t)total;
    st.n_out = (uint32_t)n_out;
    st.n_generated = n_generated;
    st.n_out_generated = n_out_generated;
    const DispatchTable& pass = n_out ? table_ : body_;
    if (profile) {
        const std::vector<double> t = dev_.time_commands(pass, st);
        for (size_t i = 0; i < t.size(); i++) profile->emplace_back(pass.labels[i], t[i]);
    } else if (n_generated == total) {
        dev_.encode_decode_pass(pass, st);  // (a graph on CUDA: such passes repeat)
    } else {
        dev_.encode_dispatch_table(pass, st);
    }

    // one draw per sampling entry, from its logits row, with its own settings
    draws_.commands.clear();
    const size_t vocab = (size_t)cfg_.vocab_size;
    uint32_t r = 0;
    for (int e : order_) {
        const BatchEntry& be = entries[(size_t)e];
        if (!be.sample) continue;
        const Sequence& s = seqs_[(size_t)be.seq];
        const uint32_t pos = (uint32_t)(s.tokens.size() + be.tokens.size() - 1);  // of the token fed last
        DispatchCmd cmd = s.greedy ? argmax_cmd_ : sample_cmd_;
        if (s.greedy) {
            ArgmaxParams p{(uint32_t)vocab, r, 1};
            std::memcpy(cmd.param_bytes, &p, sizeof(p));
            cmd.offsets[1] = 4 * r;
        } else {
            SampleParams p = s.sampling.to_params((int)vocab, s.mask_on);
            p.pos0 = pos;
            std::memcpy(cmd.param_bytes, &p, sizeof(p));
            cmd.offsets[0] = (uint32_t)(r * vocab * 4);
            cmd.offsets[1] = 4 * r;
            cmd.offsets[2] = (uint32_t)((size_t)be.seq * ((size_t)n_ctx_ + 1) * 4);
            cmd.offsets[3] = (uint32_t)((size_t)be.seq * SamplerBuffers::kMaxBias * 8);
            cmd.offsets[4] = (uint32_t)((size_t)be.seq * ((vocab + 31) / 32) * 4);
        }
        draws_.commands.push_back(cmd);
        r++;
    }
    draws_.renew_id();  // new content each step: no device may replay a compiled form of the last
    draws_.transient = true;
    if (n_out) {  // (a step without draws is waited for by the next read)
        if (profile) {
            draws_.labels.assign(draws_.commands.size(), "draw");
            double total = 0;
            for (double s : dev_.time_commands(draws_, ReplayState())) total += s;
            profile->emplace_back("draws", total);
        } else {
            dev_.encode_dispatch_table(draws_, ReplayState());
        }
        dev_.read_buffer(out_host_.data(), out_ids_, n_out * 4);
    }

    for (const BatchEntry& be : entries) {
        Sequence& s = seqs_[(size_t)be.seq];
        s.tokens.insert(s.tokens.end(), be.tokens.begin(), be.tokens.end());
        publish_full_blocks(s);
    }
    computed_tokens_ += (long long)total;
    last_out_rows_ = (int)n_out;
    std::vector<int32_t> drawn;
    drawn.reserve(n_out);
    for (size_t e = 0; e < entries.size(); e++)
        if (out_of_entry_[e] >= 0) drawn.push_back(out_host_[(size_t)out_of_entry_[e]]);
    return drawn;
}

std::vector<float> BatchEngine::last_logits(int n_rows) const {
    std::lock_guard<std::mutex> lock(device_lock_);
    if (n_rows < 0 || n_rows > last_out_rows_)
        throw Error("the last batch step has " + std::to_string(last_out_rows_) + " logits rows");
    std::vector<float> out((size_t)n_rows * cfg_.vocab_size);
    if (n_rows) dev_.read_buffer(out.data(), scratch_.logits, out.size() * 4);
    return out;
}

BatchStats BatchEngine::stats() const {
    std::lock_guard<std::mutex> lock(device_lock_);
    BatchStats st;
    st.blocks_total = pool_.n_blocks();
    st.blocks_used = pool_.used();
    st.blocks_cached = pool_.cached();
    st.block_size = kv_.block_size;
    for (const Sequence& s : seqs_) st.sequences += s.open ? 1 : 0;
    st.prefix_lookup_tokens = lookup_tokens_;
    st.prefix_hit_tokens = hit_tokens_;
    st.computed_tokens = computed_tokens_;
    return st;
}

}  // namespace akunu
