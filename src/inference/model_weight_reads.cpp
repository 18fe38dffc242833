// Model::decode_weight_reads: what a decode step reads of the weights,
// counted from the decode table's bindings rather than timed, so that it can
// be measured on any device (the book's "each weight read once a token";
// BENCHMARKS.md's Metal counts, taken through the emulation). A command that
// binds a matrix reads all of it; the embedding command reads one row.
#include <map>
#include <utility>

#include "core/error.h"
#include "inference/model.h"

namespace akunu {

Model::WeightReads Model::decode_weight_reads() const {
    require_decoder("decode");
    // (a split model's tables bind each rank's shards, not the weights read from the file)
    if (shards_.device || !weights_)
        throw Error("decode_weight_reads counts a model on one device; this one is split over several");
    struct Seen {
        const Weight* w;
        int commands = 0;       // commands other than the embedding that bind it
        bool row_read = false;  // the embedding command's table
    };
    // a buffer by its handle and host pointer (host-memory devices wrap the
    // mapped file without a handle of their own)
    using Key = std::pair<void*, void*>;
    std::map<Key, Seen> seen;
    WeightReads r;
    for (const Weight& w : weights_->placed())
        if (seen.emplace(Key{w.buf.handle, w.buf.contents}, Seen{&w}).second) {
            r.weight_bytes += w.buf.size;
            r.weights++;
        }
    const DispatchTable& t = decode_table_;
    for (size_t i = 0; i < t.commands.size(); i++) {
        const DispatchCmd& cmd = t.commands[i];
        const bool embedding = i < t.labels.size() && t.labels[i] == "embedding";
        std::map<Key, bool> bound;  // a command binding one matrix in several slots reads it once
        for (int b = 0; b < cmd.buffer_count; b++) bound[Key{cmd.buffers[b].handle, cmd.buffers[b].contents}] = true;
        for (const auto& kv : bound) {
            auto it = seen.find(kv.first);
            if (it == seen.end()) continue;
            const Weight& w = *it->second.w;
            const uint64_t rows = w.shape.size() > 1 && w.shape.back() ? w.shape.back() : 1;
            r.read_bytes += embedding ? w.buf.size / rows : w.buf.size;
            if (embedding) it->second.row_read = true;
            else it->second.commands++;
        }
    }
    for (const auto& kv : seen) {
        const Seen& s = kv.second;
        const uint64_t rows = s.w->shape.size() > 1 && s.w->shape.back() ? s.w->shape.back() : 1;
        if (s.commands > 0) r.once_bytes += s.w->buf.size;
        else if (s.row_read) r.once_bytes += s.w->buf.size / rows;
        else r.unread++;
    }
    return r;
}

}  // namespace akunu
