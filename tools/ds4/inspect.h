// ds4 --inspect: a readable summary of a GGUF file (header, metadata, tensor table, totals).
#pragma once

#include <cstdio>
#include <string>

namespace ds4::gguf { class File; }

namespace ds4::cli {

// Prints the summary of an opened file to `out`.
void print_inspect(const gguf::File& f, std::FILE* out);
// Opens `path` (throws ds4::Error on a bad file) and prints its summary; returns the exit code.
int run_inspect(const std::string& path);

}  // namespace ds4::cli
