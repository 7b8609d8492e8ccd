#include "chat/json_text.h"

#include <fmt/format.h>

namespace ds4::chat {

std::string json_quote(std::string_view s) {
    std::string out;
    out.reserve(s.size() + 2);
    out += '"';
    for (char c : s) {
        switch (c) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\b': out += "\\b"; break;
            case '\f': out += "\\f"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            default:
                if (static_cast<unsigned char>(c) < 0x20) {
                    out += fmt::format("\\u{:04x}", static_cast<unsigned char>(c));
                } else {
                    out += c;
                }
        }
    }
    out += '"';
    return out;
}

static void write_python_style(std::string& out, const nlohmann::ordered_json& v) {
    using T = nlohmann::ordered_json::value_t;
    switch (v.type()) {
        case T::null: out += "null"; break;
        case T::boolean: out += v.get<bool>() ? "true" : "false"; break;
        case T::number_integer: out += fmt::format("{}", v.get<int64_t>()); break;
        case T::number_unsigned: out += fmt::format("{}", v.get<uint64_t>()); break;
        case T::number_float: {
            double d = v.get<double>();
            // -0 prints as 0 in JS and in llama.cpp's engine.
            out += d == 0 ? std::string("0") : fmt::format("{}", d);
            break;
        }
        case T::string: out += json_quote(v.get_ref<const std::string&>()); break;
        case T::array: {
            out += '[';
            bool first = true;
            for (const auto& e : v) {
                if (!first) out += ", ";
                first = false;
                write_python_style(out, e);
            }
            out += ']';
            break;
        }
        case T::object: {
            out += '{';
            bool first = true;
            for (auto it = v.begin(); it != v.end(); ++it) {
                if (!first) out += ", ";
                first = false;
                out += json_quote(it.key());
                out += ": ";
                write_python_style(out, it.value());
            }
            out += '}';
            break;
        }
        default: out += "null"; break;  // binary / discarded: not produced by the JSON parser
    }
}

std::string python_style(const nlohmann::ordered_json& v) {
    std::string out;
    write_python_style(out, v);
    return out;
}

}  // namespace ds4::chat
