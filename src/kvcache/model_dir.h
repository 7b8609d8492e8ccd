// Where one model's checkpoints live in a cache directory shared by several models.
//
// `--kv-disk-dir ROOT` is a root: each model keeps its files in ROOT/<32 hex of a key>/, one
// DiskCache per subfolder with its own budget. The key is the caller's: the server uses
// model::weights_identity (the layout and a sample of the weights), so two files of one layout
// whose weights differ get two subfolders. Two models sharing a root therefore never
// see (and never evict or remove as foreign) each other's files, while replicas of one model
// share one subfolder. Servers before this layout kept every file directly in ROOT;
// adopt_root_files() moves the ones of the current model into its subfolder and leaves the
// others where they are, for their own model to adopt.
#pragma once

#include <string>

#include "kvcache/file_format.h"

namespace ds4::kvcache {

// ROOT/<32 lowercase hex digits of key>. Creates nothing.
std::string model_dir(const std::string& root, const ModelId& key);

struct Adopted {
    int moved = 0;  // checkpoints of this model moved from ROOT into its subfolder
    int left = 0;   // .kv files in ROOT that are not this model's (or do not read): untouched
};

// Moves the regular `<32 hex>.kv` files directly in `root` whose header names `expect`'s model
// and payload version into `dir` (its model_dir; created 0700 when missing),
// never replacing a file already there and never following a symlink. A root that does not
// exist yet adopts nothing. Safe when several processes adopt at once: a file renamed by
// another is skipped.
Adopted adopt_root_files(const std::string& root, const Expect& expect, const std::string& dir);

}  // namespace ds4::kvcache
