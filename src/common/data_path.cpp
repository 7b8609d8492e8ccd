#include "data_path.h"

#include <filesystem>
#include <system_error>
#include <vector>

namespace ds4 {

std::string resolve_data_path(const std::string& listing, const std::string& name) {
    namespace fs = std::filesystem;
    const fs::path p(name);
    if (p.is_absolute()) return name;
    const fs::path dir = fs::path(listing).parent_path();
    std::error_code ec;
    if (fs::exists(dir / p, ec)) return (dir / p).string();
    if (fs::exists(p, ec)) return name;
    const std::vector<fs::path> parts(p.begin(), p.end());
    for (size_t k = 1; k < parts.size(); ++k) {  // "a/b/prompts/x.txt" -> "b/prompts/x.txt" -> ...
        fs::path rest;
        for (size_t i = k; i < parts.size(); ++i) rest /= parts[i];
        if (fs::exists(dir / rest, ec)) return (dir / rest).string();
    }
    return (dir / p).string();
}

}  // namespace ds4
