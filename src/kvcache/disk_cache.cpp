#include "kvcache/disk_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <unordered_map>

#include "common/file_io.h"
#include "common/log.h"

namespace ds4::kvcache {
namespace {

uint64_t now_s() { return uint64_t(time(nullptr)); }

struct Fd {
    int fd = -1;
    ~Fd() {
        if (fd >= 0) ::close(fd);
    }
};

bool ends_with(std::string_view s, std::string_view tail) {
    return s.size() >= tail.size() && s.substr(s.size() - tail.size()) == tail;
}

// This machine's name as it appears in temporaries' names: [A-Za-z0-9-] only, at most 32.
const std::string& host_tag() {
    static const std::string tag = [] {
        char buf[256] = {};
        std::string t;
        if (::gethostname(buf, sizeof buf - 1) == 0)
            for (const char* c = buf; *c && t.size() < 32; ++c)
                if (std::isalnum(static_cast<unsigned char>(*c)) || *c == '-') t += *c;
        return t.empty() ? std::string("host") : t;
    }();
    return tag;
}

// A temporary's writer, from "<name>.tmp.<pid>.<n>.<host>" (or "<name>.tmp.<pid>.<n>", written
// before the host was recorded: taken as this machine's).
struct TempOwner {
    long pid = -1;  // -1: not one of our temporaries
    std::string host;
};

TempOwner temp_owner(const std::string& name) {
    TempOwner o;
    const size_t t = name.find(".kv.tmp.");
    if (t == std::string::npos) return o;
    const char* p = name.c_str() + t + 8;
    char* end = nullptr;
    const long pid = std::strtol(p, &end, 10);
    if (end == p || *end != '.' || pid <= 0) return o;
    const char* n = end + 1;
    std::strtoull(n, &end, 10);
    if (end == n) return o;
    o.pid = pid;
    o.host = *end == '.' ? std::string(end + 1) : host_tag();
    return o;
}

// Whether nobody will ever rename this temporary: its writer on this machine is gone (or is
// this process, from before), or, written on another machine sharing the directory (whose
// processes cannot be asked), it has not changed for an hour.
bool temp_abandoned(const TempOwner& o, const std::string& path) {
    if (o.host == host_tag()) return o.pid == long(getpid()) || (::kill(pid_t(o.pid), 0) != 0 && errno == ESRCH);
    struct stat st {};
    return ::lstat(path.c_str(), &st) == 0 && time(nullptr) - st.st_mtime > 3600;
}

void mkdir_p(const std::string& dir) {
    std::string at;
    size_t i = 0;
    while (i <= dir.size()) {
        const size_t j = dir.find('/', i);
        const size_t end = j == std::string::npos ? dir.size() : j;
        at = dir.substr(0, end);
        if (!at.empty() && ::mkdir(at.c_str(), 0700) != 0 && errno != EEXIST)
            fail("kv cache: cannot create {}: {}", at, std::strerror(errno));
        if (j == std::string::npos) break;
        i = j + 1;
    }
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) fail("kv cache: {} is not a directory", dir);
}

bool disk_full(int e) { return e == ENOSPC || e == EDQUOT || e == EFBIG; }

// flock(LOCK_EX) on the directory's lock file for a scope (nothing without one).
struct DirLock {
    int fd;
    explicit DirLock(int f) : fd(f) {
        while (fd >= 0 && ::flock(fd, LOCK_EX) != 0 && errno == EINTR) {}
    }
    ~DirLock() {
        if (fd >= 0) ::flock(fd, LOCK_UN);
    }
};

}  // namespace

double eviction_score(uint32_t hits, uint64_t last_used, int64_t tokens, uint64_t file_bytes, uint64_t now) {
    const double age = now > last_used ? double(now - last_used) : 0.0;
    double eff = double(hits) * std::exp2(-age / (6.0 * 3600.0));
    if (eff < 0.01) eff = 0.0;
    return (eff + 1.0) * double(std::max<int64_t>(tokens, 0)) / double(std::max<uint64_t>(file_bytes, 1));
}

DiskCache::DiskCache(Options opt) : opt_(std::move(opt)) {
    if (opt_.dir.empty()) fail("kv cache: no directory given");
    while (opt_.dir.size() > 1 && opt_.dir.back() == '/') opt_.dir.pop_back();
    mkdir_p(opt_.dir);
    probe_writable();
    if (!read_only_) {
        // Shared by every process on the directory: eviction and the final rename of a store
        // hold it, so no process deletes a file another has just written under the same name.
        // The directory itself is locked (no lock file among the checkpoints).
        lock_fd_ = ::open(opt_.dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (lock_fd_ >= 0 && ::flock(lock_fd_, LOCK_SH | LOCK_NB) != 0 && errno != EWOULDBLOCK) {
            log::warn("ds4: kv cache: {} cannot be locked ({}): replicas sharing it do not coordinate evictions",
                      opt_.dir, std::strerror(errno));
            ::close(lock_fd_);
            lock_fd_ = -1;
        } else if (lock_fd_ >= 0) {
            ::flock(lock_fd_, LOCK_UN);
        }
    }
    stamp_ = dir_stamp();
    scan();
    std::lock_guard lock(mu_);
    if (!read_only_) {
        DirLock dl(lock_fd_);
        make_room_locked(0, {});
    }
}

DiskCache::~DiskCache() {
    if (lock_fd_ >= 0) ::close(lock_fd_);
}

void DiskCache::probe_writable() {
    // Root ignores permission bits, so try: a read-only mount or a directory we may not write
    // is used for loading only, and nothing in it is reported removed that was not.
    const std::string probe = path_of(".ds4-write-test." + std::to_string(getpid()));
    const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd >= 0) {
        ::close(fd);
        ::unlink(probe.c_str());
        return;
    }
    if (errno != EACCES && errno != EPERM && errno != EROFS) return;  // EEXIST etc.: not our concern
    read_only_ = true;
    saving_ = false;
    log::warn("ds4: kv cache: {} is not writable ({}): loading only; nothing will be saved, evicted or removed",
              opt_.dir, std::strerror(errno));
}

void DiskCache::warn_removed(const std::string& file, const std::string& why) const {
    const std::string path = path_of(file);
    if (read_only_) {
        log::warn("ds4: kv cache: ignoring {}: {} (left in place: the directory is read-only)", path, why);
    } else if (::unlink(path.c_str()) == 0 || errno == ENOENT) {
        log::warn("ds4: kv cache: removed {}: {}", path, why);
    } else {
        log::warn("ds4: kv cache: ignoring {}: {} (cannot remove it: {})", path, why, std::strerror(errno));
    }
}

void DiskCache::sync_dir() const {
    Fd d{::open(opt_.dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
    if (d.fd >= 0) ::fsync(d.fd);
}

DiskCache::Item DiskCache::read_item(int fd, const struct stat& st, const std::string& name, const Expect& expect) const {
    const std::string path = path_of(name);
    FdSource src(fd, uint64_t(st.st_size), path);
    const Header h = read_header(src, expect, path);
    if (hex(h.text_hash) + ".kv" != name) throw FormatError(Cause::checksum, path + ": name does not match its text hash");
    Item it;
    for (auto& [id, dsml] : read_tools(src, h, path)) it.tools.emplace(std::move(id), std::move(dsml));
    const FileStats s = read_stats(src, h);
    it.hit = Hit{name, h.text_hash, int64_t(h.text_bytes), int64_t(h.tokens), int64_t(h.ctx),
                 h.file_bytes(), s.hits, s.last_used, h.reason};
    it.ino = st.st_ino;
    return it;
}

int64_t DiskCache::dir_stamp() const {
    struct stat st {};
    if (::stat(opt_.dir.c_str(), &st) != 0) return -1;
    return int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

void DiskCache::refresh_locked() {
    // Other processes sharing the directory add, replace and evict files: when the directory
    // changed since the last look, the index is brought in line with it. Files are only ever
    // renamed in whole, so every name seen holds a complete file (or is gone by the time it
    // is opened, which is skipped).
    const int64_t stamp = dir_stamp();
    if (stamp == stamp_ && stamp >= 0) return;
    DIR* d = ::opendir(opt_.dir.c_str());
    if (!d) return;
    std::set<std::string> seen;
    while (const dirent* e = ::readdir(d)) {
        const std::string name = e->d_name;
        if (ends_with(name, ".kv")) seen.insert(name);
    }
    ::closedir(d);
    const Expect expect{opt_.model_id, opt_.payload_version};
    for (auto it = index_.begin(); it != index_.end();) {
        struct stat st {};
        const bool there = seen.count(it->first) && ::lstat(path_of(it->first).c_str(), &st) == 0;
        if (writing_.count(it->first) || (there && st.st_ino == it->second.ino)) {
            ++it;
            continue;
        }
        total_ -= it->second.hit.file_bytes;  // gone, or replaced: read again below
        it = index_.erase(it);
    }
    for (const std::string& name : seen) {
        if (index_.count(name) || writing_.count(name)) continue;
        const std::string path = path_of(name);
        Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)};
        struct stat st {};
        if (f.fd < 0 || fstat(f.fd, &st) != 0 || !S_ISREG(st.st_mode)) continue;
        try {
            Item it = read_item(f.fd, st, name, expect);
            total_ += it.hit.file_bytes;
            index_.emplace(name, std::move(it));
        } catch (const FormatError&) {
            // Another model's, or damaged: load() never sees it; the next scan deals with it.
        }
    }
    // Timestamps tick coarsely (a few ms): a change within the same tick would keep the stamp,
    // so a stamp that recent is not trusted.
    const int64_t now_ns = int64_t(time(nullptr)) * 1000000000;
    stamp_ = stamp >= 0 && now_ns - stamp > 2000000000 ? stamp : -2;
}

void DiskCache::scan() {
    DIR* d = ::opendir(opt_.dir.c_str());
    if (!d) fail("kv cache: cannot read {}: {}", opt_.dir, std::strerror(errno));
    std::vector<std::string> names;
    while (const dirent* e = ::readdir(d)) names.emplace_back(e->d_name);
    ::closedir(d);
    std::sort(names.begin(), names.end());
    const Expect expect{opt_.model_id, opt_.payload_version};
    std::lock_guard lock(mu_);
    for (const std::string& name : names) {
        const std::string path = path_of(name);
        if (const TempOwner o = temp_owner(name); o.pid > 0) {
            if (!read_only_ && temp_abandoned(o, path)) ::unlink(path.c_str());
            continue;
        }
        if (!ends_with(name, ".kv")) continue;
        struct stat st {};
        if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
        // Never through a symlink put there since the lstat(), never blocking on a FIFO.
        Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)};
        if (f.fd < 0 || fstat(f.fd, &st) != 0 || !S_ISREG(st.st_mode)) continue;
        try {
            Item it = read_item(f.fd, st, name, expect);
            total_ += it.hit.file_bytes;
            index_.emplace(name, std::move(it));
        } catch (const FormatError& e) {
            const std::string what = e.what();
            warn_removed(name, what.substr(std::min(what.size(), path.size() + 2)));
        }
    }
}

void DiskCache::discard(const Hit& hit, Cause cause, const std::string& why) {
    std::lock_guard lock(mu_);
    forget_locked(hit.file);
    warn_removed(hit.file, why);
    count_failure_locked(cause);
    if (stats_.hits > 0) --stats_.hits;  // load() counted it
    ++stats_.misses;
}

void DiskCache::forget_locked(const std::string& file) {
    auto it = index_.find(file);
    if (it == index_.end()) return;
    total_ -= it->second.hit.file_bytes;
    index_.erase(it);
}

void DiskCache::remove_locked(const std::string& file) {
    if (!index_.count(file)) return;
    ::unlink(path_of(file).c_str());
    forget_locked(file);
}

bool DiskCache::make_room_locked(uint64_t need, const std::string& same) {
    const uint64_t budget = opt_.budget_bytes;
    if (need > budget) return false;
    refresh_locked();  // the budget counts every process's files (the caller holds the dir lock)
    auto over = [&] { return total_ + reserved_ + need > budget; };
    if (!over()) return true;
    const uint64_t now = now_s();
    struct Cand {
        double score;
        uint64_t last_used;
        const std::string* file;
        uint64_t bytes;
    };
    std::vector<Cand> cands;
    uint64_t freeable = 0;
    const Item* same_item = nullptr;
    for (const auto& [name, it] : index_) {
        if (writing_.count(name)) continue;
        if (name == same) {
            same_item = &it;
            continue;
        }
        const Hit& h = it.hit;
        cands.push_back({eviction_score(h.hits, h.last_used, h.tokens, h.file_bytes, now), h.last_used, &name, h.file_bytes});
        freeable += h.file_bytes;
    }
    if (same_item) freeable += same_item->hit.file_bytes;
    if (total_ - freeable + reserved_ + need > budget) return false;
    std::sort(cands.begin(), cands.end(), [](const Cand& a, const Cand& b) {
        if (a.score != b.score) return a.score < b.score;
        if (a.last_used != b.last_used) return a.last_used < b.last_used;
        return *a.file < *b.file;
    });
    std::vector<std::string> victims;
    uint64_t freed = 0;
    for (const Cand& c : cands) {
        if (total_ - freed + reserved_ + need <= budget) break;
        victims.push_back(*c.file);
        freed += c.bytes;
    }
    // Only when the others cannot make room does the file being replaced go first: then a
    // failed write loses both, which the budget leaves no way around.
    if (total_ - freed + reserved_ + need > budget && same_item) victims.push_back(same);
    for (const std::string& v : victims) {
        // Only the file we indexed: another process may have replaced it since (not under
        // the dir lock we hold now, as its rename takes that lock too).
        struct stat st {};
        if (::lstat(path_of(v).c_str(), &st) == 0 && st.st_ino != index_.at(v).ino) {
            forget_locked(v);
            stamp_ = -2;  // read it again at the next look
            continue;
        }
        remove_locked(v);
        ++stats_.evictions;
    }
    return true;
}

void DiskCache::count_failure_locked(Cause c) {
    switch (c) {
        case Cause::checksum: ++stats_.load_failures_checksum; break;
        case Cause::truncated: ++stats_.load_failures_truncated; break;
        case Cause::foreign: ++stats_.load_failures_foreign; break;
        case Cause::io: ++stats_.load_failures_io; break;
    }
}

std::optional<Hit> DiskCache::lookup(std::string_view prompt_text, int64_t ctx, int64_t min_tokens) {
    std::lock_guard lock(mu_);
    refresh_locked();
    std::unordered_map<int64_t, TextHash> prefix_hash;  // one hash per prefix length
    const Hit* best = nullptr;
    for (const auto& [name, it] : index_) {
        const Hit& h = it.hit;
        if (h.text_bytes > int64_t(prompt_text.size()) || h.tokens < min_tokens || h.ctx > ctx) continue;
        if (best && (h.text_bytes < best->text_bytes ||
                     (h.text_bytes == best->text_bytes && h.tokens <= best->tokens)))
            continue;
        auto ph = prefix_hash.find(h.text_bytes);
        if (ph == prefix_hash.end())
            ph = prefix_hash.emplace(h.text_bytes, text_hash(prompt_text.substr(0, size_t(h.text_bytes)))).first;
        if (ph->second == h.text_hash) best = &h;
    }
    if (!best) {
        ++stats_.misses;
        return std::nullopt;
    }
    return *best;
}

std::optional<Entry> DiskCache::load(const Hit& hit, std::string_view prompt_text) {
    const std::string path = path_of(hit.file);
    {
        std::lock_guard lock(mu_);
        if (!index_.count(hit.file)) {
            ++stats_.misses;
            return std::nullopt;
        }
    }
    // O_NOFOLLOW: a file swapped for a symlink since the scan would be read outside the
    // directory and its stats written through the link. O_NONBLOCK: a FIFO does not hang us.
    Fd f{::open(path.c_str(), (read_only_ ? O_RDONLY : O_RDWR) | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)};
    struct stat st {};
    std::optional<FormatError> defect;
    Entry e;
    if (f.fd < 0 && errno == ELOOP) {
        defect.emplace(Cause::io, path + ": is a symbolic link, not a regular file");
    } else if (f.fd < 0) {
        if (errno == ENOENT) {  // gone behind our back: forget it
            std::lock_guard lock(mu_);
            if (auto it = index_.find(hit.file); it != index_.end()) {
                total_ -= it->second.hit.file_bytes;
                index_.erase(it);
            }
            ++stats_.misses;
            return std::nullopt;
        }
        defect.emplace(Cause::io, path + ": cannot open: " + std::strerror(errno));
    } else if (fstat(f.fd, &st) != 0) {
        defect.emplace(Cause::io, path + ": cannot stat: " + std::strerror(errno));
    } else if (!S_ISREG(st.st_mode)) {
        defect.emplace(Cause::io, path + ": is " + file_kind(st.st_mode) + ", not a regular file");
    } else {
        try {
            FdSource src(f.fd, uint64_t(st.st_size), path);
            e = read_entry(src, {opt_.model_id, opt_.payload_version}, path);
            if (hex(e.header.text_hash) + ".kv" != hit.file)
                throw FormatError(Cause::checksum, path + ": name does not match its text hash");
        } catch (const FormatError& err) {
            defect.emplace(err);
        } catch (const std::bad_alloc&) {
            defect.emplace(Cause::io, path + ": out of memory reading it");
        }
    }
    std::lock_guard lock(mu_);
    if (defect) {
        // Remove it only if the name still holds the file we read (a store may have replaced it).
        struct stat now {};
        const bool same = f.fd >= 0 && ::stat(path.c_str(), &now) == 0 && now.st_ino == st.st_ino &&
                          now.st_dev == st.st_dev;
        const std::string what = defect->what();
        const std::string why = what.substr(std::min(what.size(), path.size() + 2));
        if (same || f.fd < 0) {
            forget_locked(hit.file);
            warn_removed(hit.file, why);  // unlink() removes a symlink itself, not its target
        } else {
            log::warn("ds4: kv cache: skipped {}: {} (replaced meanwhile)", path, why);
        }
        count_failure_locked(defect->cause());
        ++stats_.misses;
        return std::nullopt;
    }
    if (!prompt_text.empty() && !prompt_text.starts_with(e.text)) {
        ++stats_.misses;
        return std::nullopt;
    }
    e.stats.hits = e.stats.hits == UINT32_MAX ? e.stats.hits : e.stats.hits + 1;
    e.stats.last_used = now_s();
    const auto rec = encode_stats(e.stats);
    // In place: a torn record only resets the stats (file_format.h).
    if (!read_only_) (void)!::pwrite(f.fd, rec.data(), rec.size(), off_t(e.header.file_bytes() - kStatsBytes));
    if (auto it = index_.find(hit.file); it != index_.end()) {
        it->second.hit.hits = e.stats.hits;
        it->second.hit.last_used = e.stats.last_used;
    }
    ++stats_.hits;
    stats_.bytes_read += uint64_t(st.st_size);
    return e;
}

bool DiskCache::store(std::string_view text, std::span<const uint8_t> payload, const StoreMeta& meta,
                      const ToolMap& tools) {
    const std::string name = file_name(text);
    const uint64_t bytes = file_bytes(text.size(), payload.size(), tool_section_bytes(tools));
    {
        std::lock_guard lock(mu_);
        if (!saving_ || writing_.count(name)) {
            ++stats_.stores_skipped;
            return false;
        }
        if (auto it = index_.find(name); it != index_.end()) {
            const Hit& h = it->second.hit;
            bool same_tools = it->second.tools.size() == tools.size();
            for (size_t i = 0; same_tools && i < tools.size(); ++i) {
                auto t = it->second.tools.find(tools[i].first);
                same_tools = t != it->second.tools.end() && t->second == tools[i].second;
            }
            if (h.tokens == meta.tokens && h.ctx == meta.ctx && h.file_bytes == bytes && same_tools) return true;
        }
        DirLock dl(lock_fd_);
        if (!make_room_locked(bytes, name)) {
            ++stats_.stores_skipped;
            return false;
        }
        reserved_ += bytes;
        writing_.insert(name);
    }

    static std::atomic<uint64_t> counter{0};
    const std::string final_path = path_of(name);
    const std::string tmp = final_path + ".tmp." + std::to_string(getpid()) + "." + std::to_string(counter++) +
                            "." + host_tag();
    const uint64_t created = now_s();
    int err = 0;
    const char* step = "create";
    {
        Fd f{::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)};
        if (f.fd < 0) {
            err = errno;
        } else {
            step = "write";
            err = write_contents(f.fd, text, payload, meta, tools, {opt_.model_id, opt_.payload_version}, created);
            if (!err && ::fsync(f.fd) != 0) step = "fsync", err = errno;
            const int fd = f.fd;
            f.fd = -1;
            if (::close(fd) != 0 && !err) step = "close", err = errno;
        }
    }
    struct stat done {};
    if (!err) {
        DirLock dl(lock_fd_);
        if (::rename(tmp.c_str(), final_path.c_str()) != 0) step = "rename", err = errno;
        else ::lstat(final_path.c_str(), &done);
    }
    if (err) {
        ::unlink(tmp.c_str());
        std::lock_guard lock(mu_);
        reserved_ -= bytes;
        writing_.erase(name);
        ++stats_.store_failures;
        if (disk_full(err) && saving_) {
            saving_ = false;
            log::warn("ds4: kv cache: {} of {} failed: {}; saving disabled", step, tmp, std::strerror(err));
        } else if (!disk_full(err)) {
            log::warn("ds4: kv cache: {} of {} failed: {}", step, tmp, std::strerror(err));
        }
        return false;
    }
    sync_dir();

    Item item;
    item.hit = Hit{name, text_hash(text), int64_t(text.size()), meta.tokens, meta.ctx, bytes, 0, created, meta.reason};
    item.ino = done.st_ino;
    for (const auto& [id, dsml] : tools) item.tools.emplace(id, dsml);
    std::lock_guard lock(mu_);
    if (auto it = index_.find(name); it != index_.end()) {
        total_ -= it->second.hit.file_bytes;  // replaced by the rename, not evicted
        index_.erase(it);
    }
    total_ += bytes;
    reserved_ -= bytes;
    writing_.erase(name);
    index_.emplace(name, std::move(item));
    ++stats_.stores;
    stats_.bytes_written += bytes;
    return true;
}

std::vector<std::pair<std::string, std::string>> DiskCache::tool_blocks(std::span<const std::string> ids) const {
    std::lock_guard lock(mu_);
    std::vector<std::pair<std::string, std::string>> out;
    for (const std::string& id : ids) {
        for (const auto& [name, it] : index_) {
            if (auto t = it.tools.find(id); t != it.tools.end()) {
                out.emplace_back(id, t->second);
                break;
            }
        }
    }
    return out;
}

std::vector<Hit> DiskCache::entries() const {
    std::lock_guard lock(mu_);
    std::vector<Hit> out;
    for (const auto& [name, it] : index_) out.push_back(it.hit);
    return out;
}

bool DiskCache::saving_enabled() const {
    std::lock_guard lock(mu_);
    return saving_;
}

Stats DiskCache::stats() const {
    std::lock_guard lock(mu_);
    Stats s = stats_;
    s.files = index_.size();
    s.total_bytes = total_;
    return s;
}

}  // namespace ds4::kvcache
