#include "common/version.h"

#include <string>

#ifndef DS4_VERSION
#error "DS4_VERSION is defined for this file by src/CMakeLists.txt"
#endif

namespace ds4 {

const char* version() { return DS4_VERSION; }

void add_version_flag(CLI::App& app, const char* tool_name) {
    app.set_version_flag("--version", std::string(tool_name) + " " + DS4_VERSION + " (DwarfStar C++)",
                         "Print the version and exit");
}

}  // namespace ds4
