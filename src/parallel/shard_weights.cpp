#include "parallel/shard_weights.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/dtype_descriptor.h"
#include "core/error.h"
#include "core/quant_blocks.h"
#include "parallel/tensor_parallel_device.h"
#include "weight/model_file.h"

namespace akunu {
namespace {

// How one weight is split: which of its rows (GGUF order: shape[1]) or
// columns (shape[0]) a rank takes; the expert kinds apply per expert of a
// stacked [cols, rows, n] tensor.
enum class Split { Replicate, QRows, KVRows, QCols, FfnRows, FfnCols, VocabRows, ExpertRows, ExpertCols,
                   SharedRows, SharedCols };

struct ModelField {
    Weight ModelWeights::*member;
    Split split;
};

const ModelField kModelFields[] = {
    {&ModelWeights::tok_embd, Split::Replicate},
    {&ModelWeights::output_norm, Split::Replicate},
    {&ModelWeights::output, Split::VocabRows},
    {&ModelWeights::rope_freqs, Split::Replicate},
};

struct LayerField {
    Weight LayerWeights::*member;
    Split split;
};

const LayerField kLayerFields[] = {
    {&LayerWeights::attn_norm, Split::Replicate},   {&LayerWeights::wq, Split::QRows},
    {&LayerWeights::wk, Split::KVRows},             {&LayerWeights::wv, Split::KVRows},
    {&LayerWeights::bq, Split::QRows},              {&LayerWeights::bk, Split::KVRows},
    {&LayerWeights::bv, Split::KVRows},             {&LayerWeights::q_norm, Split::Replicate},
    {&LayerWeights::k_norm, Split::Replicate},      {&LayerWeights::wo, Split::QCols},
    {&LayerWeights::post_attn_norm, Split::Replicate}, {&LayerWeights::ffn_norm, Split::Replicate},
    {&LayerWeights::w_gate, Split::FfnRows},        {&LayerWeights::w_up, Split::FfnRows},
    {&LayerWeights::w_down, Split::FfnCols},        {&LayerWeights::post_ffn_norm, Split::Replicate},
    {&LayerWeights::gate_inp, Split::Replicate},    {&LayerWeights::gate_exps, Split::ExpertRows},
    {&LayerWeights::up_exps, Split::ExpertRows},    {&LayerWeights::down_exps, Split::ExpertCols},
    {&LayerWeights::gate_inp_shexp, Split::Replicate}, {&LayerWeights::gate_shexp, Split::SharedRows},
    {&LayerWeights::up_shexp, Split::SharedRows},   {&LayerWeights::down_shexp, Split::SharedCols},
};

// [first, first + count) of the rows or columns a rank takes.
struct Range {
    uint64_t first, count;
};

struct RankPlan {
    const ModelConfig& g;  // the whole model
    const ModelConfig& l;  // one rank's share
    int rank;

    Range range(Split s) const {
        const uint64_t hd = (uint64_t)g.head_dim, r = (uint64_t)rank;
        switch (s) {
            case Split::QRows:
            case Split::QCols:
                return {r * (uint64_t)l.n_heads * hd, (uint64_t)l.n_heads * hd};
            case Split::KVRows: {
                // the KV heads this rank's query heads read: a block of them,
                // or the one they share when there are fewer KV heads than ranks
                const uint64_t first_head = g.n_kv_heads >= l.tp_ranks
                                                ? r * (uint64_t)l.n_kv_heads
                                                : r * (uint64_t)g.n_kv_heads / (uint64_t)l.tp_ranks;
                return {first_head * hd, (uint64_t)l.n_kv_heads * hd};
            }
            case Split::FfnRows:
            case Split::FfnCols:
                return {r * (uint64_t)l.ffn_dim, (uint64_t)l.ffn_dim};
            case Split::ExpertRows:
            case Split::ExpertCols:
                if (l.experts_per_rank)  // whole experts: a range of the stacked tensor's experts
                    return {r * (uint64_t)l.experts_per_rank, (uint64_t)l.experts_per_rank};
                return {r * (uint64_t)l.expert_ffn_dim, (uint64_t)l.expert_ffn_dim};
            case Split::SharedRows:
            case Split::SharedCols:
                return {r * (uint64_t)l.shared_expert_ffn_dim, (uint64_t)l.shared_expert_ffn_dim};
            case Split::VocabRows:
                return {r * (uint64_t)l.vocab_shard, (uint64_t)l.vocab_shard};
            case Split::Replicate:
                break;
        }
        return {0, 0};
    }
};

bool experts_tensor(const std::vector<uint64_t>& shape) { return shape.size() > 2; }

bool splits_columns(Split s) { return s == Split::QCols || s == Split::FfnCols || s == Split::ExpertCols || s == Split::SharedCols; }

size_t row_bytes(uint32_t dtype, uint64_t cols, const char* what) {
    const DTypeDescriptor* dt = dtype_lookup(dtype);
    if (!dt || dt->block_elems == 0 || cols % dt->block_elems != 0)
        throw UnsupportedError(std::string("tensor parallelism: ") + what + " rows of " + std::to_string(cols) +
                               " are not whole " + dtype_name(dtype) + " blocks");
    return (size_t)(cols / dt->block_elems) * dt->block_bytes;
}

// The bytes of one rank's slice of `w`, in the file's layout (a column slice
// must start and end on block boundaries); `rows_out` / `cols_out` its shape.
std::vector<uint8_t> slice(const Weight& w, Split s, Range rg, bool whole_experts, uint64_t* cols_out,
                           uint64_t* rows_out, uint64_t* experts_out) {
    const uint64_t cols = w.shape[0];
    const uint64_t rows = w.shape.size() > 1 ? w.shape[1] : 1;
    const uint64_t n = w.shape.size() > 2 ? w.shape[2] : 1;
    const uint8_t* src = static_cast<const uint8_t*>(w.buf.contents);
    std::vector<uint8_t> out;
    *experts_out = n;
    if (whole_experts && (s == Split::ExpertRows || s == Split::ExpertCols)) {  // experts [first, first + count)
        const size_t expert = row_bytes(w.dtype, cols, "expert") * rows;
        out.assign(src + rg.first * expert, src + (rg.first + rg.count) * expert);
        *cols_out = cols;
        *rows_out = rows;
        *experts_out = rg.count;
        return out;
    }
    if (w.shape.size() == 1) {  // a vector (bias): elements are its rows
        const size_t e = row_bytes(w.dtype, 1, "vector");
        out.assign(src + rg.first * e, src + (rg.first + rg.count) * e);
        *cols_out = rg.count;
        *rows_out = 1;
        return out;
    }
    const size_t rb = row_bytes(w.dtype, cols, "weight");
    if (!splits_columns(s)) {
        // rows [first, first + count) of each expert; rows past the end (the
        // last vocabulary slice) stay zero: a zero block is 0 in every format
        out.assign((size_t)(rg.count * rb * n), 0);
        for (uint64_t e = 0; e < n; e++) {
            const uint64_t have = rg.first >= rows ? 0 : std::min(rg.count, rows - rg.first);
            if (have) std::memcpy(out.data() + e * rg.count * rb, src + (e * rows + rg.first) * rb, (size_t)(have * rb));
        }
        *cols_out = cols;
        *rows_out = rg.count;
        return out;
    }
    const size_t skip = row_bytes(w.dtype, rg.first, "column-split");
    const size_t keep = row_bytes(w.dtype, rg.count, "column-split");
    out.resize((size_t)(rows * n) * keep);
    for (uint64_t i = 0; i < rows * n; i++) std::memcpy(out.data() + i * keep, src + i * rb + skip, keep);
    *cols_out = rg.count;
    *rows_out = rows;
    return out;
}

// One weight on one rank: in place from host memory (replicated), or its
// slice; regrouped where the rank's device asks for another layout.
Weight place(Device& d, const Weight& w, Split s, Range rg, bool whole_experts) {
    const bool vector = w.shape.size() == 1, experts = w.shape.size() > 2;
    uint64_t cols = w.shape[0], rows = vector ? 1 : w.shape[1];
    std::vector<uint8_t> sliced;
    const uint8_t* data = static_cast<const uint8_t*>(w.buf.contents);
    size_t bytes = w.buf.size;
    std::vector<uint64_t> shape = w.shape;
    if (s != Split::Replicate) {
        uint64_t experts = 1;
        sliced = slice(w, s, rg, whole_experts, &cols, &rows, &experts);
        data = sliced.data();
        bytes = sliced.size();
        if (vector) shape = {cols};
        else shape[0] = cols, shape[1] = rows;
        if (experts_tensor(shape)) shape[2] = experts;
    }
    uint32_t layout = w.dtype;
    if (!vector && !experts) layout = d.weight_layout(w.dtype, rows, cols);
    if (layout != w.dtype) {
        std::vector<uint8_t> regrouped(bytes);
        blocks::regroup_x8(w.dtype, data, regrouped.data(), (int64_t)rows, (int64_t)cols);
        return Weight{d.allocate(regrouped.data(), regrouped.size()), layout, shape};
    }
    // host memory that outlives the model (the mapping, the host provider's vectors) is wrapped
    return Weight{sliced.empty() ? d.wrap_host(data, bytes) : d.allocate(data, bytes), layout, shape};
}

// The largest block (values) of the tensors whose names end with `suffix`:
// a column split of them must cut rows into whole blocks of it.
uint64_t block_of(const ModelFile& f, const std::string& suffix, std::string* type = nullptr) {
    uint64_t most = 1;
    for (const GGUFTensorInfo& t : f.tensors())
        if (t.name.size() >= suffix.size() && t.name.compare(t.name.size() - suffix.size(), suffix.size(), suffix) == 0)
            if (const DTypeDescriptor* dt = dtype_lookup(t.type))
                if (dt->block_elems > most) {
                    most = dt->block_elems;
                    if (type) *type = dtype_name(t.type);
                }
    return most;
}

}  // namespace

ModelConfig shard_config(const ModelConfig& c, const ArchDescriptor& arch, const ModelFile& file, int n) {
    auto fail = [&](const std::string& why) -> ModelConfig {
        throw UnsupportedError("this model cannot be split over " + std::to_string(n) + " ranks (tensor_parallel=" +
                               std::to_string(n) + "): " + why);
    };
    if (n < 2) return c;
    if (arch.encoder) return fail("tensor parallelism serves decoder models; embedding models run on one device");
    if (arch.qk_norm_full_width)
        return fail("its Q / K norms span every head (" + std::string(arch.name) + "), which a split by heads cannot compute");
    if (arch.attn_sinks || arch.has_attn_out_bias || arch.moe_biases)
        return fail("its sinks and projection biases (" + std::string(arch.name) + ") are not split over ranks");
    if (c.n_heads % n != 0)
        return fail(std::to_string(c.n_heads) + " attention heads do not split evenly");
    if (c.n_kv_heads % n != 0 && n % c.n_kv_heads != 0)
        return fail(std::to_string(c.n_kv_heads) + " KV heads neither split evenly nor divide the ranks");
    if (c.n_experts == 0 && c.ffn_dim % n != 0) return fail("the FFN width " + std::to_string(c.ffn_dim) + " does not split evenly");
    // Column splits (O, down) must cut each row into whole blocks of its type.
    auto whole_blocks = [&](const char* what, const std::string& suffix, uint64_t share) {
        std::string type;
        const uint64_t b = block_of(file, suffix, &type);
        if (share % b != 0)
            fail(std::string(what) + " would take " + std::to_string(share) + " columns a rank, not whole " + type +
                 " blocks (" + std::to_string(b) + " values)");
    };
    whole_blocks("the attention output", "attn_output.weight", (uint64_t)c.q_dim() / (uint64_t)n);
    if (c.n_experts == 0) whole_blocks("the FFN's down projection", "ffn_down.weight", (uint64_t)c.ffn_dim / (uint64_t)n);
    if (c.shared_expert_ffn_dim)
        whole_blocks("the shared expert's down projection", "ffn_down_shexp.weight",
                     (uint64_t)c.shared_expert_ffn_dim / (uint64_t)n);
    // Experts: each split by FFN width (every rank its share of every expert:
    // balanced whatever the router picks), unless those shares would not be
    // whole K-quant blocks (256 values) and the experts divide evenly over
    // the ranks: then whole experts a rank (expert parallelism).
    // AKUNU_TP_EXPERTS=width / whole forces one.
    bool whole = false;
    if (c.n_experts > 0) {
        const char* force = std::getenv("AKUNU_TP_EXPERTS");
        const std::string mode = force ? force : "";
        if (!mode.empty() && mode != "width" && mode != "whole")
            return fail("AKUNU_TP_EXPERTS is '" + mode + "' (expected 'width' or 'whole')");
        const uint64_t block = block_of(file, "ffn_down_exps.weight");
        whole = mode == "whole" ||
                (mode.empty() && c.n_experts % n == 0 && (c.expert_ffn_dim % n != 0 || (c.expert_ffn_dim / n) % block != 0));
        if (whole && c.n_experts % n != 0)
            return fail(std::to_string(c.n_experts) + " experts do not split evenly");
        if (!whole && c.expert_ffn_dim % n != 0) return fail("the experts' FFN width does not split evenly");
        if (!whole) whole_blocks("the experts' down projections", "ffn_down_exps.weight", (uint64_t)c.expert_ffn_dim / (uint64_t)n);
    }
    if (c.shared_expert_ffn_dim % n != 0) return fail("the shared expert's FFN width does not split evenly");
    ModelConfig l = c;
    l.tp_ranks = n;
    l.n_heads = c.n_heads / n;
    l.n_kv_heads = std::max(1, c.n_kv_heads / n);
    if (c.n_experts == 0) l.ffn_dim = c.ffn_dim / n;
    if (whole) l.experts_per_rank = c.n_experts / n;
    else l.expert_ffn_dim = c.expert_ffn_dim / n;
    l.shared_expert_ffn_dim = c.shared_expert_ffn_dim / n;
    l.vocab_shard = (c.vocab_size + n - 1) / n;
    return l;
}

ModelWeights shard_weights(const ModelWeights& host, const ModelConfig& global, const ModelConfig& local,
                           TensorParallelDevice& dev, std::vector<Buffer>& owned) {
    const int n = dev.ranks();
    std::vector<ModelWeights> per_rank((size_t)n, host);
    std::vector<std::vector<Buffer>> placed((size_t)n);  // each rank's, freed if any rank fails
    try {
    dev.for_each_rank([&](int r, Device& d) {
        RankPlan plan{global, local, r};
        ModelWeights& w = per_rank[(size_t)r];
        auto one = [&](Weight& dst, const Weight& src, Split s) {
            if (!src.buf.contents) return;  // a weight this model does not have
            dst = place(d, src, s, plan.range(s), local.experts_per_rank != 0);
            placed[(size_t)r].push_back(dst.buf);
        };
        for (const ModelField& f : kModelFields) one(w.*f.member, host.*f.member, f.split);
        for (size_t l = 0; l < host.layers.size(); l++)
            for (const LayerField& f : kLayerFields) one(w.layers[l].*f.member, host.layers[l].*f.member, f.split);
    });
    } catch (...) {
        dev.for_each_rank([&](int r, Device& d) {
            for (Buffer b : placed[(size_t)r]) d.free_buffer(b);
        });
        throw;
    }
    // one buffer of `dev` for each weight: rank r's part is rank r's slice
    ModelWeights out = per_rank[0];
    auto compose = [&](Weight& dst, const Weight& src, auto part_of) {
        if (!src.buf.contents) return;
        std::vector<Buffer> parts;
        for (const ModelWeights& w : per_rank) parts.push_back(part_of(w).buf);
        dst.buf = dev.compose(parts);
        owned.push_back(dst.buf);
    };
    for (const ModelField& f : kModelFields)
        compose(out.*f.member, host.*f.member, [&](const ModelWeights& w) -> const Weight& { return w.*f.member; });
    for (size_t l = 0; l < host.layers.size(); l++)
        for (const LayerField& f : kLayerFields)
            compose(out.layers[l].*f.member, host.layers[l].*f.member,
                    [&](const ModelWeights& w) -> const Weight& { return w.layers[l].*f.member; });
    return out;
}

}  // namespace akunu
