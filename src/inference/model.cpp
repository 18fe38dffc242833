#include "inference/model.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "core/device_factory.h"
#include "core/error.h"
#include "core/table_builder.h"
#include "parallel/shard_weights.h"
#include "parallel/tensor_parallel_device.h"

namespace akunu {

namespace {
constexpr int kMaxBatch = 1 << 16;  // tokens per prefill pass (its buffers hold this many rows of logits)
// Rows a sliding-window ring keeps beyond the window and one pass: how far
// back the context can be cut without re-feeding it (speculative drafts
// rejected, a chat's re-sent last turn differing in its closing tokens).
constexpr int kRingSlack = 256;
// One model, one caller at a time: a second thread gets a clear error instead
// of corrupting the KV cache. Once a batch engine runs beside the
// single-stream path, a call waits for its step instead.
class BusyGuard {
public:
    BusyGuard(std::mutex& m, const std::atomic<bool>& shared) : lock_(m, std::defer_lock) {
        if (shared.load(std::memory_order_acquire)) {
            lock_.lock();
            return;
        }
        if (!lock_.try_lock())
            throw Error("this model is already generating in another thread; use one model per thread "
                        "or serialize calls");
    }

private:
    std::unique_lock<std::mutex> lock_;
};
}  // namespace

Model::Model(const std::string& path, const LoadOptions& opt) {
    file_ = open_model_file(path);
    std::string arch_name = file_->get_string("general.architecture");
    if (arch_name.empty()) throw FormatError("metadata 'general.architecture' is missing");
    if (arch_name == "whisper")
        throw Error("this is a Whisper speech-to-text model: load it with akunu.load() and call transcribe()");
    arch_ = arch_from_name(arch_name);
    // Hugging Face and MLX checkpoints rotate half-split pairs (rotate_half);
    // llama.cpp's converter permutes Llama's Q/K to adjacent pairs instead.
    if (std::string(file_->format()) != "gguf") arch_.rope_neox = true;
    cfg_ = config_from_file(*file_, arch_);
    model_cfg_ = cfg_;
    if (opt.n_batch < 0 || opt.n_batch > kMaxBatch)
        throw Error("n_batch must be between 1 and " + std::to_string(kMaxBatch) + " (0: the device's default), got " +
                    std::to_string(opt.n_batch));
    if (opt.tensor_parallel < 1) throw Error("tensor_parallel must be at least 1, got " + std::to_string(opt.tensor_parallel));
    if (opt.tensor_parallel > 1) {
        load_tensor_parallel(opt);
    } else {
        device_ = create_device(opt.device, opt.n_threads);
        weights_ = std::make_unique<WeightProvider>(file_, *device_);
        w_ = resolve_weights(*weights_, cfg_, arch_);
    }
    prefill_chunk_ = opt.n_batch > 0 ? opt.n_batch : std::max(1, device_->prefill_chunk());
    if (arch_.encoder) {
        load_encoder(opt);
        return;
    }

    int n_ctx = opt.n_ctx > 0 ? opt.n_ctx : std::min(cfg_.context_length, 4096);
    if (n_ctx > (1 << 20)) throw Error("n_ctx " + std::to_string(n_ctx) + " is too large");
    set_cache_types(opt);
    const std::vector<int> rows = layer_kv_rows(n_ctx);
    check_memory(n_ctx, rows);
    kv_.allocate(*device_, cfg_.n_layers, n_ctx, cfg_.kv_dim(), cfg_.k_cache_type, cfg_.v_cache_type, rows);
    for (int r : rows)
        if (r < n_ctx) ring_rows_ = ring_rows_ ? std::min(ring_rows_, r) : r;
    chain_length_ = std::max(1, device_->chain_length());
    chain_out_.resize((size_t)chain_length_ + 1);  // once: decode reads chain results into it
    scratch_.allocate(*device_, cfg_, prefill_chunk_, chain_length_, prefill_chunk_);
    prefill_table_ = build_dispatch_table(*device_, cfg_, arch_, w_, kv_, scratch_, TableKind::Prefill);
    decode_table_ = build_dispatch_table(*device_, cfg_, arch_, w_, kv_, scratch_, TableKind::Decode);
    sampler_.allocate(*device_, cfg_.vocab_size, n_ctx);
    SampleParams sp = sampling_.to_params(cfg_.vocab_size, false);
    sample_first_table_ = build_sample_table(*device_, cfg_, scratch_, sampler_, sp, false);
    // the sampled chain is the decode table with its argmax replaced by the sampler
    decode_sampled_table_ = decode_table_;
    decode_sampled_table_.commands.back() =
        build_sample_table(*device_, cfg_, scratch_, sampler_, sp, true).commands.back();
    decode_sampled_table_.renew_id();
    decode_sampled_table_.labels.back() = "sample";
}

// The model split over opt.tensor_parallel ranks: the weights are read on
// the host in the file's layout, and each rank takes its slices
// (parallel/shard_weights.h); the tables are built once for one rank's share
// and every rank replays them (parallel/tensor_parallel_device.h).
void Model::load_tensor_parallel(const LoadOptions& opt) {
    cfg_ = shard_config(model_cfg_, arch_, *file_, opt.tensor_parallel);  // a clear error before any device is made
    std::unique_ptr<TensorParallelDevice> tp =
        create_tensor_parallel_device(opt.device, opt.tensor_parallel, opt.n_threads);
    host_device_ = create_host_device();
    weights_ = std::make_unique<WeightProvider>(file_, *host_device_);
    const ModelWeights host = resolve_weights(*weights_, model_cfg_, arch_);
    device_ = std::move(tp);
    shards_.device = device_.get();
    w_ = shard_weights(host, model_cfg_, cfg_, static_cast<TensorParallelDevice&>(*device_), shards_.buffers);
}

// The KV cache's element types: a block type (Q8_0, Q4_0) needs heads of
// whole 32-value blocks, as llama.cpp requires.
void Model::set_cache_types(const LoadOptions& opt) {
    for (uint32_t t : {opt.k_cache_type, opt.v_cache_type})
        if (t >= kKvTypeCount) throw Error("unknown KV cache type " + std::to_string(t));
    if ((kv_type_is_block(opt.k_cache_type) || kv_type_is_block(opt.v_cache_type)) && cfg_.head_dim % kKvBlock)
        throw Error("a Q8_0 / Q4_0 KV cache needs a head size that is a multiple of 32; this model's is " +
                    std::to_string(cfg_.head_dim) + " (use f16 or bf16)");
    cfg_.k_cache_type = model_cfg_.k_cache_type = opt.k_cache_type;
    cfg_.v_cache_type = model_cfg_.v_cache_type = opt.v_cache_type;
}

void Model::require_decoder(const char* what) const {
    if (arch_.encoder)
        throw Error(std::string("this is an embedding model (") + arch_.name + "): it cannot " + what +
                    "; use embed()");
}

// Rows of each layer's KV cache: n_ctx, but a sliding-window layer keeps a
// ring of window + one pass + kRingSlack rows when that is fewer (Gemma 3's
// local layers: 1088 rows of a 512-token window on CUDA, whatever n_ctx).
// AKUNU_KV_RING=0 gives every layer n_ctx rows.
std::vector<int> Model::layer_kv_rows(int n_ctx) const {
    std::vector<int> rows((size_t)cfg_.n_layers, n_ctx);
    const char* env = std::getenv("AKUNU_KV_RING");
    if (env && std::string(env) == "0") return rows;
    if (env && std::string(env) != "1") throw Error("AKUNU_KV_RING must be 0 or 1, got '" + std::string(env) + "'");
    for (int l = 0; l < cfg_.n_layers; l++)
        if (cfg_.layer_is_local[(size_t)l] && cfg_.sliding_window > 0)
            rows[(size_t)l] = (int)std::min<long long>(n_ctx, (long long)cfg_.sliding_window + prefill_chunk_ + kRingSlack);
    return rows;
}

// Refuses, before allocating, a model whose weights exceed the device's
// memory or whose KV cache and buffers exceed what is free now.
void Model::check_memory(int n_ctx, const std::vector<int>& rows) const {
    auto gib = [](double b) { return std::to_string(b / (1 << 30)).substr(0, 5) + " GiB"; };
    size_t weights = 0;
    for (const auto& t : file_->tensors()) weights += t.n_bytes;
    const size_t total = device_->total_memory();
    if (total && weights > total)
        throw Error("the model's weights take " + gib((double)weights) + " but the " +
                    device_->backend_name() + " device has " + gib((double)total) +
                    " of memory; use a smaller or more quantized model");
    const bool typed = cfg_.k_cache_type != kKvF16 || cfg_.v_cache_type != kKvF16;
    double all_rows = 0;
    for (int r : rows) all_rows += r;
    const double kv = all_rows *
                          (kv_row_bytes(cfg_.k_cache_type, (uint32_t)cfg_.kv_dim()) +
                           kv_row_bytes(cfg_.v_cache_type, (uint32_t)cfg_.kv_dim())) +
                      (typed && device_->stages_typed_kv() ? 4.0 * n_ctx * cfg_.kv_dim() : 0.0);
    const double scratch = 4.0 * prefill_chunk_ *
                           (3.0 * cfg_.dim + 2.0 * cfg_.q_dim() + 2.0 * cfg_.kv_dim() + 3.0 * cfg_.act_row_width() +
                            cfg_.vocab_size);
    const size_t avail = device_->available_memory();
    if (avail && kv + scratch > (double)avail)
        throw Error("a context of " + std::to_string(n_ctx) + " tokens needs " + gib(kv + scratch) +
                    " for the KV cache and buffers but " + gib((double)avail) +
                    " is available; load with a smaller n_ctx");
}

Model::~Model() {
    batch_.reset();
    kv_.release(*device_);
    scratch_.release(*device_);
    if (!arch_.encoder) sampler_.release(*device_);
    weights_.reset();
}

size_t Model::memory_bytes() const {
    size_t weights = 0;
    for (const auto& t : file_->tensors()) weights += t.n_bytes;
    // (a split model's buffers are one a rank, each the size counted here)
    const size_t per_rank = kv_.bytes() + scratch_.bytes() + sampler_.bytes() + (batch_ ? batch_->memory_bytes() : 0);
    return weights + per_rank * (size_t)cfg_.tp_ranks;
}

BatchEngine& Model::enable_batching(const BatchOptions& opt) {
    require_decoder("generate");
    shared_.store(true, std::memory_order_release);
    std::lock_guard<std::mutex> lock(busy_);
    batch_.reset();  // its memory back before the new one is sized
    device_->set_batch_rows(opt.max_seqs);
    batch_ = std::make_unique<BatchEngine>(*device_, cfg_, arch_, w_, kv_.n_ctx, prefill_chunk_, opt, busy_);
    return *batch_;
}

void Model::truncate(int n) {
    if (n < 0 || n > n_past_) throw Error("cannot truncate context of " + std::to_string(n_past_) + " to " +
                                          std::to_string(n));
    if (reusable_prefix(n) != n)
        throw Error("cannot go back to position " + std::to_string(n) + ": the sliding-window layers keep the last " +
                    std::to_string(ring_rows_) + " positions and no longer hold the keys it sees; truncate to 0 "
                    "and feed the context again");
    n_past_ = n;
    if (n == 0) ring_floor_ = 0;  // every position is written again from here
}

int Model::reusable_prefix(int n) const {
    n = std::max(0, std::min(n, n_past_));
    const int first_key = std::max(0, n + 1 - cfg_.sliding_window);  // the oldest key position n sees
    return ring_rows_ == 0 || first_key >= ring_floor_ ? n : 0;
}

int Model::adopt_into_batch(int seq, const std::vector<int32_t>& tokens, int n) {
    std::lock_guard<std::mutex> lock(busy_);
    if (!batch_) throw Error("this model has no batch engine");
    check_tokens(tokens);
    n = std::max(0, std::min(n, n_past_));
    // rows are positions only while no ring has wrapped
    if (ring_rows_ && (ring_floor_ > 0 || n_past_ > ring_rows_)) return batch_->adopt_locked(seq, tokens, 0, kv_);
    return batch_->adopt_locked(seq, tokens, n, kv_);
}

void Model::check_tokens(const std::vector<int32_t>& tokens) const {
    for (int32_t t : tokens)
        if (t < 0 || t >= cfg_.vocab_size)
            throw Error("token id " + std::to_string(t) + " is outside the vocabulary (size " +
                        std::to_string(cfg_.vocab_size) + ")");
}

void Model::check_room(size_t n) const {
    if ((size_t)n_past_ + n > (size_t)kv_.n_ctx)
        throw Error("context overflow: " + std::to_string(n_past_) + " cached + " + std::to_string(n) +
                    " new tokens exceed n_ctx = " + std::to_string(kv_.n_ctx));
}

void Model::record_history(const int32_t* ids, size_t n, int pos) {
    device_->write_buffer(sampler_.history, ids, n * 4, (size_t)pos * 4);
}

void Model::run_prefill_chunks(const std::vector<int32_t>& tokens, PrefillOutput mode, std::vector<float>* logits,
                               std::vector<int32_t>* ids) {
    const size_t vocab = (size_t)cfg_.vocab_size;
    for (size_t start = 0; start < tokens.size(); start += (size_t)prefill_chunk_) {
        size_t n = std::min(tokens.size() - start, (size_t)prefill_chunk_);
        device_->write_buffer(scratch_.prompt_ids, tokens.data() + start, n * 4);
        record_history(tokens.data() + start, n, n_past_);
        ReplayState st;
        st.pos0 = (uint32_t)n_past_;
        st.n_tokens = (uint32_t)n;
        st.last_row_only = mode == PrefillOutput::LastRow;
        device_->encode_dispatch_table(prefill_table_, st);
        if (mode == PrefillOutput::AllLogits)
            device_->read_buffer(logits->data() + start * vocab, scratch_.logits, n * vocab * 4);
        if (mode == PrefillOutput::RowArgmax) device_->read_buffer(ids->data() + start, scratch_.row_ids, n * 4);
        n_past_ += (int)n;
        note_written(n_past_);
    }
}

std::vector<float> Model::logits(const std::vector<int32_t>& tokens) {
    require_decoder("compute logits");
    BusyGuard g(busy_, shared_);
    check_tokens(tokens);
    n_past_ = 0;
    ring_floor_ = 0;
    check_room(tokens.size());
    std::vector<float> out(tokens.size() * (size_t)cfg_.vocab_size);
    run_prefill_chunks(tokens, PrefillOutput::AllLogits, &out, nullptr);
    return out;
}

int32_t Model::prefill(const std::vector<int32_t>& tokens) {
    require_decoder("generate");
    BusyGuard g(busy_, shared_);
    if (tokens.empty()) throw Error("prefill needs at least one token");
    check_tokens(tokens);
    check_room(tokens.size());
    run_prefill_chunks(tokens, PrefillOutput::LastRow, nullptr, nullptr);
    int32_t next;
    device_->read_buffer(&next, scratch_.row_ids, 4);
    return next;
}

std::vector<int32_t> Model::verify(const std::vector<int32_t>& tokens) {
    require_decoder("generate");
    BusyGuard g(busy_, shared_);
    if (tokens.empty()) throw Error("verify needs at least one token");
    check_tokens(tokens);
    check_room(tokens.size());
    std::vector<int32_t> ids(tokens.size());
    run_prefill_chunks(tokens, PrefillOutput::RowArgmax, nullptr, &ids);
    return ids;
}

std::vector<int32_t> Model::decode_greedy(int32_t first, int count, const std::vector<int32_t>& stop) {
    require_decoder("generate");
    BusyGuard g(busy_, shared_);
    return decode_chain(decode_table_, first, count, stop);
}

std::vector<int32_t> Model::decode_sampled(int32_t first, int count, const std::vector<int32_t>& stop) {
    require_decoder("generate");
    BusyGuard g(busy_, shared_);
    return decode_chain(decode_sampled_table_, first, count, stop);
}

// N tokens per submission: the table's last command (argmax or sample)
// writes chain slot i + 1, which the next step's embedding reads.
std::vector<int32_t> Model::decode_chain(const DispatchTable& table, int32_t first, int count,
                                         const std::vector<int32_t>& stop) {
    check_tokens({first});
    std::vector<int32_t> out;
    int32_t* ids = chain_out_.data();
    int32_t feed = first;
    // With a grammar mask the next mask depends on this token: one step per call.
    const int max_chunk = mask_on_ ? 1 : chain_length_;
    while ((int)out.size() < count) {
        int chunk = std::min(max_chunk, count - (int)out.size());
        chunk = std::min(chunk, kv_.n_ctx - n_past_);
        if (chunk <= 0) throw Error("context full: n_ctx = " + std::to_string(kv_.n_ctx) + " tokens");
        device_->write_buffer(scratch_.chain_ids, &feed, 4);
        record_history(&feed, 1, n_past_);
        device_->encode_chain(table, (uint32_t)n_past_, chunk);
        note_written(n_past_ + chunk);  // the chain wrote every step's row, also past a stop
        device_->read_buffer(ids, scratch_.chain_ids, (size_t)(chunk + 1) * 4);
        record_history(ids, (size_t)chunk, n_past_);
        for (int i = 1; i <= chunk; i++) {
            out.push_back(ids[i]);
            if (std::find(stop.begin(), stop.end(), ids[i]) != stop.end()) {
                n_past_ += i;  // tokens fed so far: ids[0..i-1]
                return out;
            }
        }
        n_past_ += chunk;
        feed = ids[chunk];
    }
    return out;
}

int32_t Model::sample_next() {
    require_decoder("generate");
    BusyGuard g(busy_, shared_);
    if (n_past_ == 0) throw Error("sample_next needs a prefill first");
    ReplayState st;
    st.pos0 = (uint32_t)(n_past_ - 1);
    device_->encode_dispatch_table(sample_first_table_, st);
    int32_t next;
    device_->read_buffer(&next, scratch_.chain_ids, 4);
    return next;
}

void Model::set_sampling(const SamplingConfig& cfg) {
    require_decoder("sample");
    BusyGuard g(busy_, shared_);
    cfg.validate(cfg_.vocab_size);
    sampling_ = cfg;
    std::vector<int32_t> pairs(cfg.logit_bias.size() * 2);
    for (size_t i = 0; i < cfg.logit_bias.size(); i++) {
        pairs[2 * i] = cfg.logit_bias[i].first;
        std::memcpy(&pairs[2 * i + 1], &cfg.logit_bias[i].second, 4);
    }
    if (!pairs.empty()) device_->write_buffer(sampler_.bias, pairs.data(), pairs.size() * 4);
    apply_sample_params();
}

void Model::set_mask(const std::vector<uint32_t>& words) {
    require_decoder("generate");
    BusyGuard g(busy_, shared_);
    if (!words.empty()) {
        size_t need = ((size_t)cfg_.vocab_size + 31) / 32;
        if (words.size() != need)
            throw Error("grammar mask has " + std::to_string(words.size()) + " words, expected " +
                        std::to_string(need) + " (one bit per token)");
        device_->write_buffer(sampler_.mask, words.data(), need * 4);
    }
    mask_on_ = !words.empty();
    apply_sample_params();
}

// The sampler's settings live in its command's parameter bytes (position is
// patched at replay), so changing them rebuilds nothing.
void Model::apply_sample_params() {
    SampleParams p = sampling_.to_params(cfg_.vocab_size, mask_on_);
    for (DispatchTable* t : {&sample_first_table_, &decode_sampled_table_}) {
        std::memcpy(t->commands.back().param_bytes, &p, sizeof(p));
        t->renew_id();
    }
}

std::vector<float> Model::processed_logits() {
    require_decoder("sample");
    BusyGuard g(busy_, shared_);
    std::vector<float> out((size_t)cfg_.vocab_size);
    device_->read_buffer(out.data(), sampler_.work, out.size() * 4);
    return out;
}

std::vector<float> Model::decode_logits(int32_t token) {
    require_decoder("generate");
    BusyGuard g(busy_, shared_);
    check_tokens({token});
    check_room(1);
    device_->write_buffer(scratch_.chain_ids, &token, 4);
    record_history(&token, 1, n_past_);
    ReplayState st;
    st.pos0 = (uint32_t)n_past_;
    device_->encode_dispatch_table(decode_table_, st);
    n_past_ += 1;
    note_written(n_past_);
    std::vector<float> out((size_t)cfg_.vocab_size);
    device_->read_buffer(out.data(), scratch_.logits, out.size() * 4);
    return out;
}

std::vector<std::pair<std::string, double>> Model::profile_decode(int32_t token) {
    require_decoder("decode");
    BusyGuard g(busy_, shared_);
    check_tokens({token});
    check_room(1);
    device_->write_buffer(scratch_.chain_ids, &token, 4);
    ReplayState st;
    st.pos0 = (uint32_t)n_past_;
    std::vector<double> t = device_->time_commands(decode_table_, st);
    note_written(n_past_ + 1);  // its row overwrote a ring's older position
    std::vector<std::pair<std::string, double>> out;
    for (size_t i = 0; i < t.size(); i++) out.emplace_back(decode_table_.labels[i], t[i]);
    return out;  // n_past unchanged: the step's KV entry is overwritten by the next real one
}

std::vector<std::pair<std::string, double>> Model::profile_prefill(const std::vector<int32_t>& tokens) {
    require_decoder("prefill");
    BusyGuard g(busy_, shared_);
    if (tokens.empty() || tokens.size() > (size_t)prefill_chunk_)
        throw Error("profile_prefill takes one pass: 1 to " + std::to_string(prefill_chunk_) + " tokens, not " +
                    std::to_string(tokens.size()));
    check_tokens(tokens);
    check_room(tokens.size());
    device_->write_buffer(scratch_.prompt_ids, tokens.data(), tokens.size() * 4);
    record_history(tokens.data(), tokens.size(), n_past_);
    ReplayState st;
    st.pos0 = (uint32_t)n_past_;
    st.n_tokens = (uint32_t)tokens.size();
    st.last_row_only = true;
    std::vector<double> t = device_->time_commands(prefill_table_, st);
    n_past_ += (int)tokens.size();
    note_written(n_past_);
    std::vector<std::pair<std::string, double>> out;
    for (size_t i = 0; i < t.size(); i++) out.emplace_back(prefill_table_.labels[i], t[i]);
    return out;
}

std::vector<float> Model::last_logits() {
    require_decoder("compute logits");
    BusyGuard g(busy_, shared_);
    std::vector<float> out((size_t)cfg_.vocab_size);
    device_->read_buffer(out.data(), scratch_.logits, out.size() * 4);
    return out;
}

}  // namespace akunu
