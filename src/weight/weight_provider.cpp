#include "weight/weight_provider.h"

#include <vector>

#include "core/quant_blocks.h"
#include "core/dtype_descriptor.h"
#include "core/error.h"

namespace akunu {

WeightProvider::WeightProvider(std::shared_ptr<ModelFile> file, Device& device)
    : file_(std::move(file)), device_(device) {}

WeightProvider::~WeightProvider() {
    for (Buffer b : owned_) device_.free_buffer(b);
}

const GGUFTensorInfo& WeightProvider::require(const std::string& name) const {
    const GGUFTensorInfo* t = file_->tensor(name);
    if (!t) throw FormatError("tensor '" + name + "' is missing from the model file");
    return *t;
}

static std::string shape_str(const std::vector<uint64_t>& s) {
    std::string r = "[";
    for (size_t i = 0; i < s.size(); i++) r += (i ? ", " : "") + std::to_string(s[i]);
    return r + "]";
}

Weight WeightProvider::matrix(const std::string& name, uint64_t cols, uint64_t rows) {
    const GGUFTensorInfo& t = require(name);
    if (t.shape.size() != 2 || t.shape[0] != cols || t.shape[1] != rows)
        throw FormatError("tensor '" + name + "' has shape " + shape_str(t.shape) + ", expected [" +
                          std::to_string(cols) + ", " + std::to_string(rows) + "]");
    return place(name, t.type, static_cast<const uint8_t*>(t.data), t.n_bytes, cols, rows, t.shape);
}

Weight WeightProvider::place(const std::string& name, uint32_t type, const uint8_t* data, size_t bytes,
                             uint64_t cols, uint64_t rows, const std::vector<uint64_t>& shape) {
    const DTypeDescriptor* dt = dtype_lookup(type);
    if (!dt || !dt->supported)
        throw UnsupportedError("tensor '" + name + "' has weight type " + dtype_name(type) +
                               ", which this build does not support yet");
    const uint32_t layout = device_.weight_layout(type, rows, cols);
    if (layout != type) {  // the device's regrouping (Q4_0 / Q8_0 / Q6_K -> x8; nothing else is asked for)
        const DTypeDescriptor* x8 = dtype_lookup(layout);
        if (!is_x8_dtype(layout) || layout != kX8Base + type || !x8 || cols % x8->block_elems != 0)
            throw UnsupportedError("tensor '" + name + "': the device asked for layout " + dtype_name(layout) +
                                   " of " + dtype_name(type));
        std::vector<uint8_t> regrouped(bytes);
        blocks::regroup_x8(type, data, regrouped.data(), (int64_t)rows, (int64_t)cols);
        Buffer b = device_.allocate(regrouped.data(), regrouped.size());
        owned_.push_back(b);
        return keep(Weight{b, layout, shape});
    }
    return keep(Weight{device_.wrap_host(data, bytes), type, shape});
}

Weight WeightProvider::matrix_rows(const std::string& name, uint64_t cols, uint64_t total_rows, uint64_t row0,
                                   uint64_t rows) {
    const GGUFTensorInfo& t = require(name);
    if (t.shape.size() != 2 || t.shape[0] != cols || t.shape[1] != total_rows)
        throw FormatError("tensor '" + name + "' has shape " + shape_str(t.shape) + ", expected [" +
                          std::to_string(cols) + ", " + std::to_string(total_rows) + "]");
    const DTypeDescriptor* dt = dtype_lookup(t.type);
    if (!dt || !dt->supported || dt->block_elems == 0 || cols % dt->block_elems != 0)
        throw UnsupportedError("tensor '" + name + "' has weight type " + dtype_name(t.type) +
                               ", whose rows this build cannot split");
    if (row0 + rows > total_rows) throw Error("internal error: rows past the end of '" + name + "'");
    const size_t row_bytes = (size_t)(cols / dt->block_elems) * dt->block_bytes;
    if (row_bytes * total_rows != t.n_bytes)
        throw FormatError("tensor '" + name + "' holds " + std::to_string(t.n_bytes) + " bytes, not " +
                          std::to_string(total_rows) + " rows of " + std::to_string(row_bytes));
    return place(name, t.type, static_cast<const uint8_t*>(t.data) + row0 * row_bytes, rows * row_bytes, cols, rows,
                 {cols, rows});
}

Weight WeightProvider::experts(const std::string& name, uint64_t cols, uint64_t rows, uint64_t n) {
    const GGUFTensorInfo& t = require(name);
    if (t.shape.size() != 3 || t.shape[0] != cols || t.shape[1] != rows || t.shape[2] != n)
        throw FormatError("tensor '" + name + "' has shape " + shape_str(t.shape) + ", expected [" +
                          std::to_string(cols) + ", " + std::to_string(rows) + ", " + std::to_string(n) + "]");
    const DTypeDescriptor* dt = dtype_lookup(t.type);
    if (!dt || !dt->supported || dt->internal || is_mlx_dtype(t.type))
        throw UnsupportedError("tensor '" + name + "' has weight type " + dtype_name(t.type) +
                               ", which the expert kernels do not support");
    if (cols % dt->block_elems != 0)
        throw FormatError("tensor '" + name + "': rows of " + std::to_string(cols) + " are not whole " +
                          dtype_name(t.type) + " blocks");
    return keep(Weight{device_.wrap_host(t.data, t.n_bytes), t.type, t.shape});
}

Weight WeightProvider::vector_f32(const std::string& name, uint64_t n) {
    const GGUFTensorInfo& t = require(name);
    if (t.shape.size() != 1 || t.shape[0] != n)
        throw FormatError("tensor '" + name + "' has shape " + shape_str(t.shape) + ", expected [" +
                          std::to_string(n) + "]");
    if (t.type != GGML_F32 && t.type != GGML_F16 && t.type != GGML_BF16)
        throw UnsupportedError("tensor '" + name + "' is a vector of type " + std::string(dtype_name(t.type)) +
                               " (expected F32, F16 or BF16)");
    Buffer b = device_.allocate(n * sizeof(float));
    owned_.push_back(b);
    std::vector<float> tmp(n);
    blocks::dequantize_row(t.type, t.data, tmp.data(), (int64_t)n);
    device_.write_buffer(b, tmp.data(), n * sizeof(float));
    return keep(Weight{b, GGML_F32, t.shape});
}

}  // namespace akunu

namespace akunu {

std::vector<float> WeightProvider::read_f32(const std::string& name, const std::vector<uint64_t>& shape) const {
    const GGUFTensorInfo& t = require(name);
    if (t.shape != shape)
        throw FormatError("tensor '" + name + "' has shape " + shape_str(t.shape) + ", expected " + shape_str(shape));
    if (t.type != GGML_F32 && t.type != GGML_F16 && t.type != GGML_BF16)
        throw UnsupportedError("tensor '" + name + "' has type " + std::string(dtype_name(t.type)) +
                               " (expected F32, F16 or BF16)");
    uint64_t n = 1;
    for (uint64_t s : shape) n *= s;
    std::vector<float> out((size_t)n);
    blocks::dequantize_row(t.type, t.data, out.data(), (int64_t)n);
    return out;
}

Weight WeightProvider::upload_f32(const std::vector<float>& values, const std::vector<uint64_t>& shape) {
    Buffer b = device_.allocate(values.data(), values.size() * sizeof(float));
    owned_.push_back(b);
    return keep(Weight{b, GGML_F32, shape});
}

}  // namespace akunu
