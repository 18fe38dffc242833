// GGUF reader on mmap (versions 2 and 3). Every count, length and offset read
// from the file is checked against the file before it is used: model files are
// untrusted input.
#pragma once
#include "weight/model_file.h"

namespace akunu {

class GGUFFile : public ModelFile {
public:
    explicit GGUFFile(const std::string& path);

    const char* format() const override { return "gguf"; }
    uint32_t version() const { return version_; }
    size_t alignment() const { return alignment_; }
    size_t file_size() const { return file_->size(); }

private:
    std::shared_ptr<MappedFile> file_;
    uint32_t version_ = 0;
    size_t alignment_ = 32;
};

}  // namespace akunu
