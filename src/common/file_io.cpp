#include "common/file_io.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>

#include "common/error.h"

namespace ds4 {
namespace {

// Closes a descriptor on every path out of a scope.
struct Fd {
    int fd;
    ~Fd() {
        if (fd >= 0) ::close(fd);
    }
};

// Writes all of [p, p + n) to fd; errno of the failed write, or 0.
int write_all(int fd, const void* p, size_t n) {
    const auto* b = static_cast<const char*>(p);
    while (n > 0) {
        const ssize_t w = ::write(fd, b, n);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) return errno;
        if (w == 0) return EIO;
        b += w;
        n -= size_t(w);
    }
    return 0;
}

std::string random_suffix() {
    unsigned char r[8];
    if (getrandom(r, sizeof r, 0) != ssize_t(sizeof r)) {
        // No entropy source: the O_EXCL retries below still keep the name unique.
        const uint64_t x = uint64_t(getpid()) * 0x9E3779B97F4A7C15ull ^ uint64_t(time(nullptr));
        std::memcpy(r, &x, sizeof r);
    }
    static const char hex[] = "0123456789abcdef";
    std::string s;
    for (unsigned char c : r) s += {hex[c >> 4], hex[c & 15]};
    return s;
}

// Turns O_NONBLOCK off again: it was only there so that open() could not wait.
void set_blocking(int fd, const std::string& path) {
    const int fl = ::fcntl(fd, F_GETFL);
    if (fl < 0 || ::fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) fail("{}: fcntl failed: {}", path, std::strerror(errno));
}

[[noreturn]] void not_regular(const std::string& path, mode_t m) {
    fail("{}: is {}, not a regular file", path, file_kind(m));
}

}  // namespace

const char* file_kind(mode_t m) {
    if (S_ISREG(m)) return "a regular file";
    if (S_ISDIR(m)) return "a directory";
    if (S_ISFIFO(m)) return "a FIFO (named pipe)";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISSOCK(m)) return "a socket";
    if (S_ISLNK(m)) return "a symbolic link";
    return "not a regular file";
}

int open_regular(const std::string& path, int flags, bool follow_links) {
    // Checked before open() too: opening a device may act on it.
    struct stat st {};
    if ((follow_links ? ::stat(path.c_str(), &st) : ::lstat(path.c_str(), &st)) == 0 && !S_ISREG(st.st_mode))
        not_regular(path, st.st_mode);
    const int extra = O_NONBLOCK | O_CLOEXEC | (follow_links ? 0 : O_NOFOLLOW);
    Fd f{::open(path.c_str(), flags | extra)};
    if (f.fd < 0) {
        if (errno == ELOOP && !follow_links) fail("{}: is a symbolic link, not a regular file", path);
        fail("{}: cannot open: {}", path, std::strerror(errno));
    }
    if (fstat(f.fd, &st) != 0) fail("{}: cannot stat: {}", path, std::strerror(errno));
    if (!S_ISREG(st.st_mode)) not_regular(path, st.st_mode);  // replaced since the stat() above
    set_blocking(f.fd, path);
    const int fd = f.fd;
    f.fd = -1;
    return fd;
}

std::string read_regular_file(const std::string& path, uint64_t max_bytes) {
    Fd f{open_regular(path, O_RDONLY)};
    struct stat st {};
    if (fstat(f.fd, &st) != 0) fail("{}: cannot stat: {}", path, std::strerror(errno));
    if (uint64_t(st.st_size) > max_bytes)
        fail("{}: is {} bytes, more than the {} allowed", path, uint64_t(st.st_size), max_bytes);
    std::string out(size_t(st.st_size), '\0');
    size_t got = 0;
    while (got < out.size()) {
        const ssize_t n = ::read(f.fd, out.data() + got, out.size() - got);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) fail("{}: read failed after {} bytes: {}", path, got, std::strerror(errno));
        if (n == 0) break;  // shrank meanwhile
        got += size_t(n);
    }
    out.resize(got);
    return out;
}

std::string read_file(const std::string& path) {
    // O_NONBLOCK: opening a FIFO for reading would otherwise wait forever for a writer.
    Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)};
    if (f.fd < 0) fail("{}: cannot open: {}", path, std::strerror(errno));
    struct stat st {};
    if (fstat(f.fd, &st) != 0) fail("{}: cannot stat: {}", path, std::strerror(errno));
    if (S_ISDIR(st.st_mode)) fail("{}: is a directory, not a file", path);
    std::string out;
    if (S_ISREG(st.st_mode)) out.reserve(size_t(st.st_size));
    char buf[65536];
    if (S_ISFIFO(st.st_mode)) {
        // A pipe is read (`--prompt-file <(cmd)`), but only one somebody writes to: without a
        // writer, a non-blocking read ends at once; with one, it has data or would wait.
        ssize_t n;
        do n = ::read(f.fd, buf, sizeof buf);
        while (n < 0 && errno == EINTR);
        if (n == 0) fail("{}: is a FIFO (named pipe) that nobody writes to", path);
        if (n < 0 && errno != EAGAIN) fail("{}: read failed: {}", path, std::strerror(errno));
        if (n > 0) out.append(buf, size_t(n));
    }
    set_blocking(f.fd, path);
    for (;;) {
        const ssize_t n = ::read(f.fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) fail("{}: read failed after {} bytes: {}", path, out.size(), std::strerror(errno));
        if (n == 0) break;
        out.append(buf, size_t(n));
    }
    return out;
}

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
    struct stat st {};
    const bool exists = ::stat(path_.c_str(), &st) == 0;
    if (exists && !S_ISREG(st.st_mode)) fail("{}: exists and is not a regular file", path_);
    const size_t slash = path_.rfind('/');
    const std::string dir = slash == std::string::npos ? "" : path_.substr(0, slash + 1);
    const std::string name = slash == std::string::npos ? path_ : path_.substr(slash + 1);
    if (name.empty() || name == "." || name == "..") fail("{}: not a file name", path_);
    for (int attempt = 0; attempt < 100 && fd_ < 0; ++attempt) {
        temp_ = dir + name + "." + random_suffix() + ".tmp";
        // O_EXCL: never an existing file, and never through a symlink (even a dangling one).
        fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd_ < 0 && errno != EEXIST) break;
    }
    if (fd_ < 0) fail("{}: cannot create a temporary file {}: {}", path_, temp_, std::strerror(errno));
    if (exists && fchmod(fd_, st.st_mode & 07777) != 0) {
        const int e = errno;
        ::close(fd_);
        ::unlink(temp_.c_str());
        fd_ = -1;
        fail("{}: cannot set the permissions of {}: {}", path_, temp_, std::strerror(e));
    }
}

AtomicFile::~AtomicFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_ && !temp_.empty()) ::unlink(temp_.c_str());
}

void AtomicFile::write(const void* p, size_t n) {
    if (fd_ < 0) fail("{}: write after commit", path_);
    if (const int e = write_all(fd_, p, n))
        fail("{}: write failed: {}", path_, std::strerror(e));
}

void AtomicFile::commit() {
    if (fd_ < 0) fail("{}: committed twice", path_);
    // On failure the temporary goes at once, not when the object does.
    auto abandon = [this](const char* what, int e) {
        if (fd_ >= 0) ::close(fd_);
        fd_ = -1;
        ::unlink(temp_.c_str());
        temp_.clear();
        fail("{}: {}: {}", path_, what, std::strerror(e));
    };
    if (fsync(fd_) != 0) abandon("fsync failed", errno);
    const int rc = ::close(fd_);
    fd_ = -1;
    if (rc != 0) abandon("close failed", errno);
    if (::rename(temp_.c_str(), path_.c_str()) != 0) abandon("cannot rename the temporary file over it", errno);
    committed_ = true;
}

void write_file(const std::string& path, std::string_view bytes) {
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
        if (S_ISDIR(st.st_mode)) fail("{}: is a directory", path);
        Fd f{::open(path.c_str(), O_WRONLY | O_CLOEXEC)};
        if (f.fd < 0) fail("{}: cannot open for writing: {}", path, std::strerror(errno));
        if (const int e = write_all(f.fd, bytes.data(), bytes.size()))
            fail("{}: write failed: {}", path, std::strerror(e));
        const int rc = ::close(f.fd);
        f.fd = -1;
        if (rc != 0) fail("{}: close failed: {}", path, std::strerror(errno));
        return;
    }
    AtomicFile f(path);
    f.write(bytes.data(), bytes.size());
    f.commit();
}

}  // namespace ds4
