#include "model/model.h"

#include <algorithm>

#include "common/error.h"
#include "model/deepseek4/model.h"
#include "model/glm/model.h"

namespace ds4::model {

int64_t batch_rows(Batch b) {
    int64_t n = 0;
    for (const BatchItem& it : b) n += int64_t(it.tokens.size());
    return n;
}

int64_t Sequence::common_prefix(std::span<const int32_t> tokens) const {
    const size_t m = std::min(tokens.size(), tokens_.size());
    size_t i = 0;
    while (i < m && tokens[i] == tokens_[i]) ++i;
    return int64_t(i);
}

std::unique_ptr<Model> open(const std::string& path, const OpenOptions& opt) {
    std::string arch;
    {
        const auto f = gguf::File::open(path, gguf::File::Load::Map);
        const gguf::Value* v = f->find("general.architecture");
        if (!v || !v->as_string()) fail("{}: metadata key 'general.architecture' missing", path);
        arch = *v->as_string();
    }
    if (arch == deepseek4::kArchitecture) return deepseek4::Model::load(path, opt);
    if (arch == glm::kArchitecture) return glm::Model::load(path, opt);
    fail("{}: architecture '{}' is not supported (this build runs: {}, {})", path, arch, deepseek4::kArchitecture,
         glm::kArchitecture);
}

std::string describe(const gguf::File& f) {
    const gguf::Value* v = f.find("general.architecture");
    const std::string arch = v && v->as_string() ? *v->as_string() : "";
    if (arch == deepseek4::kArchitecture) return deepseek4::describe(f);
    if (arch == glm::kArchitecture) return glm::describe(f);
    fail("{}: architecture '{}' is not supported (this build runs: {}, {})", f.path(), arch, deepseek4::kArchitecture,
         glm::kArchitecture);
}

}  // namespace ds4::model
