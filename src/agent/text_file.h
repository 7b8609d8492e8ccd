// Reading text files a bounded piece at a time, for the agent's read and search tools: a file
// of any size (a 100 MB log, a 100 MB line) costs at most the bytes up to the last line shown,
// never more memory than the caps.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ds4::agent {

struct LinesRead {
    std::string text;     // "<line number>\t<line>\n" per line shown; long lines cut with a note
    int64_t last = 0;     // the last line shown (start - 1: none); at the end: the line count
    bool at_eof = false;  // nothing follows the last line shown
    bool capped = false;  // stopped by the byte cap before max_lines
    bool binary = false;  // a NUL byte in the first 8 KB: nothing read
};

// Lines start .. start+max_lines-1 of `path` (1-based), each cut at line_bytes, stopping
// before the text passes `cap` bytes (at least one line is shown). Throws ds4::Error when the
// file cannot be opened or is not a regular file.
LinesRead read_lines(const std::string& path, int64_t start, int64_t max_lines, size_t cap, size_t line_bytes);

// Lines in `text` (a last line without a newline counts).
int64_t count_lines(std::string_view text);

}  // namespace ds4::agent
