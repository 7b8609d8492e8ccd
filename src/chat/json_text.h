// JSON text in the two spellings the chat format uses.
//   * python_style: what the V4 jinja template's `tojson` writes (llama.cpp's jinja engine,
//     Python json.dumps defaults without ensure_ascii): ", " and ": " separators, object keys in
//     their original order, non-ASCII kept raw, only '"', '\\' and control bytes escaped.
//   * quote: one JSON string literal with the same escaping.
// Floats use the shortest round-trip spelling ({fmt} "{}"), which is what JS engines print;
// llama.cpp's engine prints 6 significant digits, Python prints "1.0" for 1.0. Tool schemas and
// arguments rarely carry such floats; the oracle test documents the difference.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace ds4::chat {

std::string json_quote(std::string_view s);
std::string python_style(const nlohmann::ordered_json& v);

}  // namespace ds4::chat
