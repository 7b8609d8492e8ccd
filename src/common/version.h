// The release version of DwarfStar, set once in the top-level CMakeLists.txt (project VERSION)
// and shared by every tool's --version, the man pages and the Debian package.
#pragma once

#include <CLI/CLI.hpp>

namespace ds4 {

// "0.9.0": the project's version, as CMake knows it.
const char* version();

// Adds --version to a tool: prints "NAME VERSION (DwarfStar C++)" and exits 0.
void add_version_flag(CLI::App& app, const char* tool_name);

}  // namespace ds4
