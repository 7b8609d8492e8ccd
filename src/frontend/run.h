// The end of every tool's main(): runs its body and turns an escaping exception into one line
// on stderr and exit code 1 (a ds4::Error as "<tool>: <message>", anything else as
// "<tool>: internal error: <what>").
#pragma once

#include <cstdio>
#include <exception>

#include "common/error.h"

namespace ds4::frontend {

template <class Body>
int run_main(const char* tool, Body&& body) {
    try {
        return body();
    } catch (const Error& e) {
        std::fprintf(stderr, "%s: %s\n", tool, e.what());
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s: internal error: %s\n", tool, e.what());
    }
    return 1;
}

}  // namespace ds4::frontend
