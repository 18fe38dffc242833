#include "weight/model_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/error.h"
#include "weight/ct2_directory.h"
#include "weight/gguf_file.h"
#include "weight/hf_directory.h"

namespace akunu {

MappedFile::MappedFile(const std::string& path) {
    int fd = ::open(path.c_str(), O_RDONLY);
    if (fd < 0) throw Error("cannot open model file '" + path + "': " + std::strerror(errno));
    struct stat st;
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        throw Error("'" + path + "' is not a regular file");
    }
    size_ = (size_t)st.st_size;
    if (size_ == 0) {
        ::close(fd);
        throw FormatError("'" + path + "' is empty");
    }
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    ::close(fd);
    if (p == MAP_FAILED) throw Error("cannot mmap '" + path + "': " + std::strerror(errno));
    data_ = (const uint8_t*)p;
}

MappedFile::~MappedFile() {
    if (data_) ::munmap((void*)data_, size_);
}

void ModelFile::add_tensor(GGUFTensorInfo ti) {
    if (tensor_index_.count(ti.name)) throw FormatError("tensor '" + ti.name + "' appears twice");
    tensor_index_[ti.name] = tensors_.size();
    tensors_.push_back(std::move(ti));
}

void ModelFile::check_no_overlap(std::vector<const GGUFTensorInfo*> ts) {
    std::sort(ts.begin(), ts.end(),
              [](const GGUFTensorInfo* a, const GGUFTensorInfo* b) { return a->offset < b->offset; });
    for (size_t i = 1; i < ts.size(); i++) {
        const GGUFTensorInfo* a = ts[i - 1];
        const GGUFTensorInfo* b = ts[i];
        if (a->offset + a->n_bytes > b->offset)  // no overflow: both ranges were checked against the file
            throw FormatError("tensors '" + a->name + "' and '" + b->name + "' overlap in the file");
    }
}

const GGUFValue* ModelFile::find(const std::string& key) const {
    auto it = kv_.find(key);
    return it == kv_.end() ? nullptr : &it->second;
}

const GGUFTensorInfo* ModelFile::tensor(const std::string& name) const {
    auto it = tensor_index_.find(name);
    return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

std::string ModelFile::get_string(const std::string& key, const std::string& def) const {
    const GGUFValue* v = find(key);
    if (!v) return def;
    if (v->type != GGUFType::STRING) throw FormatError("metadata '" + key + "' is not a string");
    return v->s;
}

int64_t ModelFile::get_int(const std::string& key, int64_t def) const {
    const GGUFValue* v = find(key);
    if (!v) return def;
    switch (v->type) {
        case GGUFType::STRING: case GGUFType::ARRAY: case GGUFType::FLOAT32: case GGUFType::FLOAT64:
            throw FormatError("metadata '" + key + "' is not an integer");
        default: return v->i;
    }
}

double ModelFile::get_float(const std::string& key, double def) const {
    const GGUFValue* v = find(key);
    if (!v) return def;
    if (v->type == GGUFType::STRING || v->type == GGUFType::ARRAY)
        throw FormatError("metadata '" + key + "' is not a number");
    return (v->type == GGUFType::FLOAT32 || v->type == GGUFType::FLOAT64) ? v->f : (double)v->i;
}

bool ModelFile::get_bool(const std::string& key, bool def) const {
    const GGUFValue* v = find(key);
    if (!v) return def;
    if (v->type != GGUFType::BOOL) throw FormatError("metadata '" + key + "' is not a boolean");
    return v->b;
}

GGUFValue gguf_int(int64_t v) {
    GGUFValue g;
    g.type = GGUFType::INT64;
    g.i = v;
    g.u = (uint64_t)v;
    g.f = (double)v;
    return g;
}
GGUFValue gguf_float(double v) {
    GGUFValue g;
    g.type = GGUFType::FLOAT64;
    g.f = v;
    return g;
}
GGUFValue gguf_string(const std::string& s) {
    GGUFValue g;
    g.type = GGUFType::STRING;
    g.s = s;
    return g;
}
GGUFValue gguf_bool(bool b) {
    GGUFValue g;
    g.type = GGUFType::BOOL;
    g.b = b;
    g.i = b;
    g.u = b;
    return g;
}
GGUFValue gguf_int_array(const std::vector<int64_t>& v) {
    GGUFValue g;
    g.type = GGUFType::ARRAY;
    g.elem_type = GGUFType::INT32;
    g.ints = v;
    g.array_len = v.size();
    return g;
}

std::shared_ptr<ModelFile> open_model_file(const std::string& path) {
    struct stat st;
    if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
        if (CT2Directory::is_ct2_directory(path)) return std::make_shared<CT2Directory>(path);
        return std::make_shared<HFDirectory>(path);
    }
    return std::make_shared<GGUFFile>(path);
}

}  // namespace akunu
