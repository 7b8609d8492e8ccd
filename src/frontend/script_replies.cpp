#include "frontend/script_replies.h"

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/file_io.h"

namespace ds4::frontend {

std::vector<std::string> read_script_replies(const std::string& path) {
    const nlohmann::json j = nlohmann::json::parse(read_file(path), nullptr, false);
    if (!j.is_array()) fail("--script-replies {}: must hold a JSON array of strings", path);
    std::vector<std::string> out;
    for (const auto& e : j) {
        if (!e.is_string()) fail("--script-replies {}: every entry must be a string", path);
        out.push_back(e.get<std::string>());
    }
    return out;
}

}  // namespace ds4::frontend
