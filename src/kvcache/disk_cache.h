// The disk KV cache (PRODUCT.md §5): model-state snapshots keyed by the rendered prompt text they
// hold, in one directory, within a byte budget, safe against crashes at any moment.
//
// * Files are `<32 hex of XXH3-128(text)>.kv` (format: kvcache/file_format.h,
//   docs/KV_CACHE_FORMAT.md).
// * An in-memory index (built by scanning the headers at construction, kept up to date by
//   store/load/eviction) answers lookup() without reading any file of its own.
// * Several processes may share the directory (replicas of one model): lookup() and eviction
//   first re-read the directory when its mtime changed (new files of others are indexed by
//   their headers, vanished ones forgotten, so the budget counts every process's files);
//   eviction and the final rename of a store hold an exclusive flock on the directory, and an
//   evictor unlinks only the inode it indexed, so nobody deletes a file another process has
//   just written. Reads need no lock: files appear whole (rename), an unlinked file stays
//   readable through an open descriptor, and a name gone before its open is a miss.
// * store() writes `<name>.tmp.<pid>.<n>.<host>`, fsyncs it, renames it over the final name and fsyncs
//   the directory, so a crash leaves the old file or the new one, never a torn one. The bytes of
//   the .kv files plus the temporaries being written never exceed the budget: lowest-score files
//   are evicted first (score below). A full disk (ENOSPC, EDQUOT, EFBIG) disables saving.
// * At construction, a temporary whose writer is gone is removed: a dead pid of this host, or,
//   for another host sharing the directory (NFS), no change for an hour.
// * A file that turns out damaged (scan or load) is removed with one warning line on stderr,
//   "ds4: kv cache: removed <path>: <why>", and counted by cause. Files are opened with
//   O_NOFOLLOW and must be regular: a symlink or FIFO put in place of one counts as damaged
//   (the link itself is removed, never what it points to).
// * A directory that refuses writes (read-only mount, permissions) is used for loading only:
//   one warning at startup; nothing is saved, evicted or removed, and a damaged file is reported
//   as "ignoring <path>: ... (left in place ...)".
// * Thread-safe: one mutex guards the index and the counters; file I/O runs outside it.
//
// Eviction score (§5.4): (effective_hits + 1) * tokens / file_bytes, where effective_hits =
// hits * 2^(-age / 6 h) with age since last use, taken as 0 below 0.01. Lowest first; ties go
// to the older last use.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <sys/stat.h>

#include "kvcache/file_format.h"

namespace ds4::kvcache {

struct Options {
    std::string dir;            // created (mkdir -p) when missing
    uint64_t budget_bytes = 0;  // the directory's .kv files and temporaries stay within this
    ModelId model_id{};         // files of other models are removed at scan
    uint32_t payload_version = 0;
};

// An index entry lookup() chose; load() reads it.
struct Hit {
    std::string file;  // the file name inside the directory
    TextHash text_hash{};
    int64_t text_bytes = 0;
    int64_t tokens = 0;
    int64_t ctx = 0;
    uint64_t file_bytes = 0;
    uint32_t hits = 0;
    uint64_t last_used = 0;  // unix seconds
    SaveReason reason = SaveReason::unknown;
};

struct Stats {
    uint64_t hits = 0;           // successful loads
    uint64_t misses = 0;         // lookups that found nothing, loads that failed or found no file
    uint64_t bytes_read = 0;     // by successful loads
    uint64_t bytes_written = 0;  // by successful stores
    uint64_t evictions = 0;      // files removed for the budget
    uint64_t stores = 0;         // files written
    uint64_t store_failures = 0; // writes that failed (I/O error, full disk)
    uint64_t stores_skipped = 0; // not written: too big for the budget, no room, saving disabled,
                                 // or the same text already being written
    uint64_t load_failures_checksum = 0;
    uint64_t load_failures_truncated = 0;
    uint64_t load_failures_foreign = 0;
    uint64_t load_failures_io = 0;
    uint64_t files = 0;          // .kv files in the index
    uint64_t total_bytes = 0;    // their bytes
};

class DiskCache {
public:
    // Creates the directory, removes temporaries left by dead processes, scans the .kv files
    // (removing foreign, damaged and misnamed ones) and evicts until within the budget. Throws
    // ds4::Error when the directory cannot be created or read.
    explicit DiskCache(Options opt);
    ~DiskCache();
    DiskCache(const DiskCache&) = delete;
    DiskCache& operator=(const DiskCache&) = delete;

    // The entry whose text is the longest prefix of `prompt_text` (ties: more tokens) among those
    // with tokens >= min_tokens and a recorded ctx <= `ctx`. Reads no file; counts a miss when
    // none matches.
    std::optional<Hit> lookup(std::string_view prompt_text, int64_t ctx, int64_t min_tokens);

    // Reads hit's file whole and checks it. When `prompt_text` is given, the file's text must be
    // its prefix (else nullopt, the file kept: a hash collision). A damaged file is removed with
    // one warning and counted by cause; a file gone since lookup is a miss. On success the file's
    // hit count and last use are updated in place.
    std::optional<Entry> load(const Hit& hit, std::string_view prompt_text = {});

    // Removes hit's file after the caller found its payload unusable (the model refused the
    // state it holds), with one warning, counted by `cause` like a damaged file.
    void discard(const Hit& hit, Cause cause, const std::string& why);

    // Stores a snapshot of `text` (see the class comment). Returns true when the cache holds it
    // afterwards (an identical snapshot already there counts), false when it was not written.
    // A same-text file is replaced unless it is the identical snapshot (same tokens, ctx, size
    // and tool map).
    bool store(std::string_view text, std::span<const uint8_t> payload, const StoreMeta& meta,
               const ToolMap& tools);

    // The DSML blocks of those tool ids that any cached file maps, in the order of `ids`
    // (ids no file knows are left out).
    std::vector<std::pair<std::string, std::string>> tool_blocks(std::span<const std::string> ids) const;

    // Every indexed file, as a Hit (for inspection and tests).
    std::vector<Hit> entries() const;

    bool saving_enabled() const;
    Stats stats() const;
    const std::string& dir() const { return opt_.dir; }

private:
    struct Item {
        Hit hit;
        std::map<std::string, std::string> tools;
        uint64_t ino = 0;  // the file's inode when indexed: a replaced file has another
    };
    Item read_item(int fd, const struct stat& st, const std::string& name, const Expect& expect) const;
    int64_t dir_stamp() const;  // the directory's mtime in ns (-1: cannot stat)
    // Brings the index in line with the directory when its mtime changed (files other
    // processes added, replaced or removed). Needs mu_.
    void refresh_locked();
    std::string path_of(const std::string& file) const { return opt_.dir + "/" + file; }
    void scan();
    void probe_writable();  // sets read_only_ (and saving_ off) when the directory refuses writes
    // Removes lowest-score files (never `keep`, never one being written) until the index plus
    // reservations plus `need` fit the budget; `same` (a file about to be replaced) goes last.
    // Returns false, evicting nothing, when that is impossible. Needs mu_.
    bool make_room_locked(uint64_t need, const std::string& same);
    void remove_locked(const std::string& file);  // unlinks and forgets
    void forget_locked(const std::string& file);  // drops the index entry only
    // Removes a damaged file and says so in one line, truthfully: "removed <path>: <why>", or
    // "ignoring <path>: <why> (left in place: ...)" when the directory is read-only or the
    // unlink fails.
    void warn_removed(const std::string& file, const std::string& why) const;
    void count_failure_locked(Cause c);
    void sync_dir() const;

    Options opt_;
    mutable std::mutex mu_;
    std::map<std::string, Item> index_;   // by file name
    std::set<std::string> writing_;        // names being written now
    uint64_t total_ = 0;                   // bytes of the indexed files
    uint64_t reserved_ = 0;                // bytes of the temporaries being written
    bool saving_ = true;
    bool read_only_ = false;  // the directory refused a write at startup
    int lock_fd_ = -1;        // the directory, for flock: eviction and renames, across processes
    int64_t stamp_ = -1;      // dir_stamp() when the index last matched the directory
    Stats stats_;
};

// The eviction score of a file (see the class comment); `now` in unix seconds.
double eviction_score(uint32_t hits, uint64_t last_used, int64_t tokens, uint64_t file_bytes, uint64_t now);

}  // namespace ds4::kvcache
