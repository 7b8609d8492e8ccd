// A conversation to start from (spec/PRODUCT.md §3.1 "Prefix pre-seed", `--prefix-file FILE`):
// alternating turns, each opened by a marker at the start of a line,
//
//   USER: first question            (the text may go on over several lines)
//   ASSISTANT: first answer
//   USER: ...
//   ASSISTANT: ...                  (the last turn is the assistant's)
//
// The text of a turn runs from after its marker (one space after the colon dropped) to the line
// before the next marker, its trailing newlines dropped. The turns become chat messages that the
// chat format renders before the first prompt, as if that conversation had happened.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "chat/message.h"

namespace ds4::chat {

// Parses `text`; throws ds4::Error naming `name` and the line for: text before the first marker
// (blank lines aside), a first turn that is not USER, two turns of one role in a row, a last turn
// that is not ASSISTANT, no turn at all.
std::vector<Message> parse_prefix(std::string_view text, const std::string& name);

// Reads `path` (a regular file of at most 64 MiB) and parses it; errors name the file.
std::vector<Message> read_prefix_file(const std::string& path);

}  // namespace ds4::chat
