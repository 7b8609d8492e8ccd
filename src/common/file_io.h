// Whole files in and out, with every failure reported.
//
// read_file() is for text the user names (--prompt-file, /read): a directory is an error (an
// ifstream reads it as an empty prompt), as is any failed read. FIFOs and terminals are read
// to their end, so `--prompt-file <(cmd)` works.
//
// AtomicFile and write_file() replace a file so that nobody ever sees it half written (a full
// disk once cut ~/.ds4_history mid-entry, and --dump-logits-f32 left a partial file): the bytes
// go to a new file in the same directory, created with O_EXCL under a random name (so a
// symlink planted at a predictable name is never followed), synced, then rename()d over the
// target. On any failure the temporary is removed and the old file is left as it was. The
// rename replaces the name given: a symlink there is replaced, not written through. A
// replaced file keeps its permission bits; a new one gets 0666 less the umask.
//
// open_regular() and read_regular_file() are for files that must be files (a saved state, a
// key, a profile): the type is checked before and after an open() that cannot block, so a FIFO
// is refused instead of waited on, and a device is never read without bound.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace ds4 {

// The bytes of `path`. Throws ds4::Error "<path>: is a directory", "<path>: cannot open: ..."
// or "<path>: read failed: ...". The open never blocks: a FIFO that nobody is writing to is an
// error ("<path>: is a FIFO (named pipe) that nobody writes to") rather than a wait.
std::string read_file(const std::string& path);

// What a file of this st_mode is, for messages: "a directory", "a FIFO (named pipe)",
// "a character device", "a block device", "a socket", "a symbolic link", "a regular file".
const char* file_kind(mode_t mode);

// Opens `path` with `flags` (O_RDONLY, or O_RDWR to update in place), requiring a regular
// file, without ever blocking on a FIFO or acting on a device: the descriptor is returned in
// blocking mode, close-on-exec. `follow_links` false adds O_NOFOLLOW: a symlink is refused.
// Throws ds4::Error "<path>: is a FIFO (named pipe), not a regular file", "<path>: is a
// symbolic link, not a regular file" or "<path>: cannot open: <why>".
int open_regular(const std::string& path, int flags, bool follow_links = true);

// The bytes of a regular file (open_regular), at most `max_bytes` of them: a larger file is
// an error "<path>: is N bytes, more than the M allowed", never read.
std::string read_regular_file(const std::string& path, uint64_t max_bytes);

class AtomicFile {
public:
    // Creates the temporary next to `path`. Throws ds4::Error when `path` exists and is not a
    // regular file (a device or FIFO cannot be replaced by rename) or the file cannot be made.
    explicit AtomicFile(std::string path);
    ~AtomicFile();  // without commit(): the temporary is closed and removed
    AtomicFile(const AtomicFile&) = delete;
    AtomicFile& operator=(const AtomicFile&) = delete;

    const std::string& path() const { return path_; }
    const std::string& temp_path() const { return temp_; }
    // The temporary's descriptor, for seeks, ftruncate or stdio (dup it before fdopen).
    int fd() const { return fd_; }
    // Writes all `n` bytes at the current offset; throws ds4::Error naming path() on failure.
    void write(const void* p, size_t n);
    // fsync, close and rename over path(). Throws ds4::Error (and removes the temporary) when
    // any step fails.
    void commit();

private:
    std::string path_, temp_;
    int fd_ = -1;
    bool committed_ = false;
};

// Replaces `path` with `bytes` through an AtomicFile. A target that exists and is not a
// regular file (/dev/stdout, a FIFO, a terminal) is written in place instead. Throws
// ds4::Error naming `path` when anything fails.
void write_file(const std::string& path, std::string_view bytes);

}  // namespace ds4
