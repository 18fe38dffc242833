#include "weight/safetensors_file.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "core/error.h"
#include "weight/json.h"

namespace akunu {

size_t safetensors_dtype_size(const std::string& d) {
    if (d == "F64" || d == "I64" || d == "U64") return 8;
    if (d == "F32" || d == "I32" || d == "U32") return 4;
    if (d == "F16" || d == "BF16" || d == "I16" || d == "U16") return 2;
    if (d == "I8" || d == "U8" || d == "BOOL" || d == "F8_E4M3" || d == "F8_E5M2") return 1;
    return 0;
}

SafeTensorsFile::SafeTensorsFile(const std::string& path) : path_(path), file_(std::make_shared<MappedFile>(path)) {
    const std::string what = "'" + path + "'";
    if (file_->size() < 8) throw FormatError(what + " is too short to be a safetensors file");
    uint64_t header_len;
    std::memcpy(&header_len, file_->data(), 8);
    if (header_len < 2 || header_len > (100u << 20) || header_len > file_->size() - 8)
        throw FormatError(what + ": safetensors header length " + std::to_string(header_len) +
                          " does not fit the file (" + std::to_string(file_->size()) + " bytes; truncated?)");
    JsonValue header = parse_json((const char*)file_->data() + 8, (size_t)header_len, what + " header");
    if (!header.is_object()) throw FormatError(what + ": safetensors header is not a JSON object");
    const uint64_t data_start = 8 + header_len;
    const uint64_t data_size = file_->size() - data_start;

    std::vector<GGUFTensorInfo> ranges;  // for the overlap check
    for (const auto& kv : header.obj) {
        if (kv.first == "__metadata__") continue;
        const std::string tw = what + " tensor '" + kv.first + "'";
        const JsonValue& e = kv.second;
        const JsonValue* dtype = e.get("dtype");
        const JsonValue* shape = e.get("shape");
        const JsonValue* offs = e.get("data_offsets");
        if (!dtype || !dtype->is_string() || !shape || shape->kind != JsonValue::Kind::Array || !offs ||
            offs->kind != JsonValue::Kind::Array || offs->arr.size() != 2)
            throw FormatError(tw + " needs dtype, shape and data_offsets [begin, end]");
        SafeTensor t;
        t.name = kv.first;
        t.dtype = dtype->str;
        const size_t es = safetensors_dtype_size(t.dtype);
        if (!es) throw FormatError(tw + " has unknown dtype '" + t.dtype + "'");
        if (shape->arr.size() > 8) throw FormatError(tw + " has more than 8 dimensions");
        uint64_t numel = 1;
        for (const JsonValue& d : shape->arr) {
            // NaN fails the range test before the cast (casting it would be undefined)
            if (!d.is_number() || !(d.num >= 0 && d.num <= 1e12) || d.num != (double)(uint64_t)d.num)
                throw FormatError(tw + " has a bad dimension in its shape");
            uint64_t s = (uint64_t)d.num;
            if (s && numel > std::numeric_limits<uint64_t>::max() / s / es)
                throw FormatError(tw + " element count overflows");
            numel *= s;
            t.shape.push_back(s);
        }
        uint64_t b[2];
        for (int i = 0; i < 2; i++) {
            const JsonValue& o = offs->arr[(size_t)i];
            if (!o.is_number() || !(o.num >= 0 && o.num <= 1.8e19) || o.num != (double)(uint64_t)o.num)
                throw FormatError(tw + " has a bad data offset");
            b[i] = (uint64_t)o.num;
        }
        if (b[0] > b[1] || b[1] > data_size)
            throw FormatError(tw + " data [" + std::to_string(b[0]) + ", " + std::to_string(b[1]) +
                              ") lies outside the data section (" + std::to_string(data_size) +
                              " bytes; truncated file?)");
        if (b[1] - b[0] != numel * es)
            throw FormatError(tw + " has " + std::to_string(b[1] - b[0]) + " bytes but its shape and dtype need " +
                              std::to_string(numel * es));
        t.data = file_->data() + data_start + b[0];
        t.n_bytes = b[1] - b[0];
        GGUFTensorInfo r;
        r.name = t.name;
        r.offset = b[0];
        r.n_bytes = t.n_bytes;
        ranges.push_back(r);
        index_.emplace(t.name, tensors_.size());  // names are unique: the JSON reader rejects duplicate members
        tensors_.push_back(std::move(t));
    }
    std::sort(ranges.begin(), ranges.end(),
              [](const GGUFTensorInfo& x, const GGUFTensorInfo& y) { return x.offset < y.offset; });
    for (size_t i = 1; i < ranges.size(); i++)
        if (ranges[i - 1].n_bytes && ranges[i - 1].offset + ranges[i - 1].n_bytes > ranges[i].offset)
            throw FormatError(what + ": tensors '" + ranges[i - 1].name + "' and '" + ranges[i].name +
                              "' overlap in the file");
}

const SafeTensor* SafeTensorsFile::find(const std::string& name) const {
    auto it = index_.find(name);
    return it == index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace akunu
