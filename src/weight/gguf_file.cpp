#include "weight/gguf_file.h"

#include <cstring>
#include <limits>

#include "core/dtype_descriptor.h"
#include "core/error.h"

namespace akunu {

namespace {

// Bounds-checked cursor over the mapping.
class Reader {
public:
    Reader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
    size_t pos() const { return pos_; }
    size_t remaining() const { return size_ - pos_; }

    void need(uint64_t n, const char* what) {
        if (n > remaining())
            throw FormatError(std::string("GGUF file is truncated: ") + what + " needs " +
                              std::to_string(n) + " bytes at offset " + std::to_string(pos_) +
                              " but only " + std::to_string(remaining()) + " remain");
    }
    template <typename T>
    T read(const char* what) {
        need(sizeof(T), what);
        T v;
        std::memcpy(&v, data_ + pos_, sizeof(T));
        pos_ += sizeof(T);
        return v;
    }
    std::string read_string(const char* what) {
        uint64_t len = read<uint64_t>(what);
        need(len, what);
        std::string s((const char*)data_ + pos_, (size_t)len);
        pos_ += (size_t)len;
        return s;
    }

private:
    const uint8_t* data_;
    size_t size_;
    size_t pos_ = 0;
};

size_t scalar_size(GGUFType t) {
    switch (t) {
        case GGUFType::UINT8: case GGUFType::INT8: case GGUFType::BOOL: return 1;
        case GGUFType::UINT16: case GGUFType::INT16: return 2;
        case GGUFType::UINT32: case GGUFType::INT32: case GGUFType::FLOAT32: return 4;
        case GGUFType::UINT64: case GGUFType::INT64: case GGUFType::FLOAT64: return 8;
        case GGUFType::STRING: return 8;  // at least the length prefix
        case GGUFType::ARRAY: return 12;  // at least type + count
    }
    return 0;
}

// A float's integer view, defined for every value (casting an out-of-range
// or NaN float to an integer is undefined behaviour).
int64_t float_as_int(double f) {
    if (!(f == f)) return 0;
    if (f >= 9.2233720368547758e18) return std::numeric_limits<int64_t>::max();
    if (f <= -9.2233720368547758e18) return std::numeric_limits<int64_t>::min();
    return (int64_t)f;
}

void read_scalar(Reader& r, GGUFType t, GGUFValue& v) {
    switch (t) {
        case GGUFType::UINT8: v.u = r.read<uint8_t>("u8"); v.i = (int64_t)v.u; v.f = (double)v.u; break;
        case GGUFType::INT8: v.i = r.read<int8_t>("i8"); v.u = (uint64_t)v.i; v.f = (double)v.i; break;
        case GGUFType::UINT16: v.u = r.read<uint16_t>("u16"); v.i = (int64_t)v.u; v.f = (double)v.u; break;
        case GGUFType::INT16: v.i = r.read<int16_t>("i16"); v.u = (uint64_t)v.i; v.f = (double)v.i; break;
        case GGUFType::UINT32: v.u = r.read<uint32_t>("u32"); v.i = (int64_t)v.u; v.f = (double)v.u; break;
        case GGUFType::INT32: v.i = r.read<int32_t>("i32"); v.u = (uint64_t)v.i; v.f = (double)v.i; break;
        case GGUFType::UINT64: v.u = r.read<uint64_t>("u64"); v.i = (int64_t)v.u; v.f = (double)v.u; break;
        case GGUFType::INT64: v.i = r.read<int64_t>("i64"); v.u = (uint64_t)v.i; v.f = (double)v.i; break;
        case GGUFType::FLOAT32: v.f = r.read<float>("f32"); v.i = float_as_int(v.f); break;
        case GGUFType::FLOAT64: v.f = r.read<double>("f64"); v.i = float_as_int(v.f); break;
        case GGUFType::BOOL: {
            uint8_t b = r.read<uint8_t>("bool");
            if (b > 1) throw FormatError("GGUF bool value is " + std::to_string(b));
            v.b = b; v.i = b; v.u = b;
            break;
        }
        case GGUFType::STRING: v.s = r.read_string("string value"); break;
        default: throw FormatError("GGUF value has unknown type " + std::to_string((uint32_t)t));
    }
}

GGUFType check_type(uint32_t t) {
    if (t > (uint32_t)GGUFType::FLOAT64)
        throw FormatError("GGUF metadata value has unknown type " + std::to_string(t));
    return (GGUFType)t;
}

void read_value(Reader& r, GGUFType t, GGUFValue& v, int depth) {
    v.type = t;
    if (t != GGUFType::ARRAY) {
        read_scalar(r, t, v);
        return;
    }
    if (depth > 4) throw FormatError("GGUF arrays nested deeper than 4 levels");
    v.elem_type = check_type(r.read<uint32_t>("array type"));
    uint64_t n = r.read<uint64_t>("array length");
    // Each element takes at least scalar_size bytes: reject counts the file cannot hold.
    if (n > r.remaining() / scalar_size(v.elem_type))
        throw FormatError("GGUF array length " + std::to_string(n) + " exceeds the file size");
    v.array_len = n;
    for (uint64_t k = 0; k < n; k++) {
        if (v.elem_type == GGUFType::STRING) {
            v.strings.push_back(r.read_string("string array element"));
        } else if (v.elem_type == GGUFType::ARRAY) {
            v.nested.emplace_back();
            read_value(r, GGUFType::ARRAY, v.nested.back(), depth + 1);
        } else {
            GGUFValue e;
            read_scalar(r, v.elem_type, e);
            if (v.elem_type == GGUFType::FLOAT32 || v.elem_type == GGUFType::FLOAT64)
                v.floats.push_back(e.f);
            else
                v.ints.push_back(e.i);
        }
    }
}

bool mul_overflows(uint64_t a, uint64_t b, uint64_t* out) {
    if (a != 0 && b > std::numeric_limits<uint64_t>::max() / a) return true;
    *out = a * b;
    return false;
}

}  // namespace

GGUFFile::GGUFFile(const std::string& path) : file_(std::make_shared<MappedFile>(path)) {
    Reader r(file_->data(), file_->size());
    if (file_->size() < 4 || std::memcmp(file_->data(), "GGUF", 4) != 0)
        throw FormatError("'" + path + "' is not a GGUF file (bad magic)");
    r.read<uint32_t>("magic");
    version_ = r.read<uint32_t>("version");
    if (version_ != 2 && version_ != 3)
        throw FormatError("unsupported GGUF version " + std::to_string(version_) + " (expected 2 or 3)");
    uint64_t n_tensors = r.read<uint64_t>("tensor count");
    uint64_t n_kv = r.read<uint64_t>("metadata count");
    // A key-value pair takes at least 8 (key length) + 4 (type) + 1 bytes,
    // a tensor info at least 8 + 4 + 4 + 8 bytes.
    if (n_kv > r.remaining() / 13)
        throw FormatError("GGUF metadata count " + std::to_string(n_kv) + " exceeds the file size");
    if (n_tensors > r.remaining() / 24)
        throw FormatError("GGUF tensor count " + std::to_string(n_tensors) + " exceeds the file size");

    for (uint64_t k = 0; k < n_kv; k++) {
        std::string key = r.read_string("metadata key");
        GGUFType t = check_type(r.read<uint32_t>("metadata type"));
        GGUFValue v;
        read_value(r, t, v, 0);
        if (kv_.count(key)) throw FormatError("GGUF metadata key '" + key + "' appears twice");
        kv_.emplace(std::move(key), std::move(v));
    }

    if (const GGUFValue* a = find("general.alignment")) {
        if (a->type != GGUFType::UINT32 && a->type != GGUFType::UINT64 && a->type != GGUFType::INT32)
            throw FormatError("general.alignment is not an integer");
        if (a->u == 0 || (a->u & (a->u - 1)) != 0 || a->u > 65536)
            throw FormatError("general.alignment " + std::to_string(a->u) + " is not a power of two <= 65536");
        alignment_ = (size_t)a->u;
    }

    tensors_.reserve((size_t)n_tensors);
    for (uint64_t k = 0; k < n_tensors; k++) {
        GGUFTensorInfo ti;
        ti.name = r.read_string("tensor name");
        uint32_t n_dims = r.read<uint32_t>("tensor dims");
        if (n_dims == 0 || n_dims > 4)
            throw FormatError("tensor '" + ti.name + "' has " + std::to_string(n_dims) + " dimensions (1..4 allowed)");
        uint64_t n_elems = 1;
        for (uint32_t d = 0; d < n_dims; d++) {
            uint64_t s = r.read<uint64_t>("tensor shape");
            if (s == 0 || s > (1ull << 40))
                throw FormatError("tensor '" + ti.name + "' has dimension " + std::to_string(s));
            if (mul_overflows(n_elems, s, &n_elems))
                throw FormatError("tensor '" + ti.name + "' element count overflows");
            ti.shape.push_back(s);
        }
        ti.type = r.read<uint32_t>("tensor type");
        ti.offset = r.read<uint64_t>("tensor offset");
        const DTypeDescriptor* dt = dtype_lookup(ti.type);
        if (!dt || dt->internal) throw FormatError("tensor '" + ti.name + "' has unknown GGML type " + std::to_string(ti.type));
        if (ti.shape[0] % dt->block_elems != 0)
            throw FormatError("tensor '" + ti.name + "' row length " + std::to_string(ti.shape[0]) +
                              " is not a multiple of the " + dt->name + " block size " +
                              std::to_string(dt->block_elems));
        if (mul_overflows(n_elems / dt->block_elems, dt->block_bytes, &ti.n_bytes))
            throw FormatError("tensor '" + ti.name + "' byte size overflows");
        add_tensor(std::move(ti));
    }

    size_t data_start = (r.pos() + alignment_ - 1) / alignment_ * alignment_;
    if (data_start > file_->size() && !tensors_.empty())
        throw FormatError("GGUF file is truncated before the tensor data");
    uint64_t data_size = file_->size() > data_start ? file_->size() - data_start : 0;
    for (auto& ti : tensors_) {
        if (ti.offset % alignment_ != 0)
            throw FormatError("tensor '" + ti.name + "' offset " + std::to_string(ti.offset) +
                              " is not aligned to " + std::to_string(alignment_));
        if (ti.offset > data_size || ti.n_bytes > data_size - ti.offset)
            throw FormatError("tensor '" + ti.name + "' data (offset " + std::to_string(ti.offset) + ", " +
                              std::to_string(ti.n_bytes) + " bytes) extends past the end of the file " +
                              "(data section is " + std::to_string(data_size) + " bytes; truncated file?)");
        ti.data = file_->data() + data_start + ti.offset;
    }
    std::vector<const GGUFTensorInfo*> all;
    for (const auto& ti : tensors_) all.push_back(&ti);
    check_no_overlap(std::move(all));
}

}  // namespace akunu
