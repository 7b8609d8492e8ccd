// ds4-eval's strict answer extractors and grading (docs/EVAL.md, "Grading"). The answer is
// read only from the reply's final non-blank line after the reasoning: it must be
// "Answer: X" (any case, optionally in **bold**, X optionally in $...$ or \boxed{...}); an
// answer anywhere else, a reply whose reasoning never closed, or an X that is not in the
// case kind's syntax gives "?" (graded as failed). Being strict keeps a model that rambles
// and names several candidates from passing by luck, and makes grading reproducible from a
// trace (--regrade-trace).
#pragma once

#include <string>
#include <string_view>

#include "eval/cases.h"

namespace ds4::eval {

// The answer `output` gives for case `c`, normalised ("?" when none). `output` is the whole
// generated text; with `thinking`, only what follows the last "</think>" counts (none: "?").
std::string extract(const Case& c, std::string_view output, bool thinking);

// Whether the normalised answer `got` is right for `c` ("?" never is).
bool matches(const Case& c, std::string_view got);

// Runs the built-in extractor and grading cases; prints each failure on stderr and returns
// how many failed (0: all passed).
int self_test();

}  // namespace ds4::eval
