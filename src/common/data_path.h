// Files named inside a data file (a manifest, a vector file). Ours name them relative to the
// data file's folder; upstream's name them relative to upstream's repository root
// (`gguf-tools/quality-testing/data/flash/prompts/case_000.txt`,
// `tests/test-vectors/prompts/x.txt`), which is not where the files live once the set is
// copied into another tree. Both forms are read as they are, without rewriting the file.
#pragma once

#include <string>

namespace ds4 {

// Where `name`, written in the file `listing`, is. In order: `name` when absolute; the
// listing's folder / name when that exists; `name` from the working directory when that
// exists; the listing's folder / `name` less its first 1, 2, ... folders, the first that
// exists (upstream's repository-root paths); else the listing's folder / name, so that the
// caller's "cannot read" names the natural place.
std::string resolve_data_path(const std::string& listing, const std::string& name);

}  // namespace ds4
