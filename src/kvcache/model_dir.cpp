#include "kvcache/model_dir.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <vector>

#include "common/error.h"

namespace ds4::kvcache {
namespace {

bool checkpoint_name(const std::string& name) {
    if (name.size() != 35 || name.compare(32, 3, ".kv") != 0) return false;
    for (size_t i = 0; i < 32; ++i)
        if (!std::isxdigit(static_cast<unsigned char>(name[i]))) return false;
    return true;
}

// True when the file at `path` is a regular file whose header is `expect`'s model's.
bool is_ours(const std::string& path, const Expect& expect) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) return false;
    struct stat st {};
    bool ours = false;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
        try {
            FdSource src(fd, uint64_t(st.st_size), path);
            read_header(src, expect, path);
            ours = true;
        } catch (const FormatError&) {
        }
    }
    ::close(fd);
    return ours;
}

}  // namespace

std::string model_dir(const std::string& root, const ModelId& key) {
    std::string r = root;
    while (r.size() > 1 && r.back() == '/') r.pop_back();
    return r + "/" + hex(key);
}

Adopted adopt_root_files(const std::string& root, const Expect& expect, const std::string& sub) {
    Adopted a;
    DIR* d = ::opendir(root.c_str());
    if (!d) return a;
    std::vector<std::string> names;
    while (const dirent* e = ::readdir(d))
        if (checkpoint_name(e->d_name)) names.emplace_back(e->d_name);
    ::closedir(d);
    for (const std::string& name : names) {
        const std::string from = root + "/" + name;
        if (!is_ours(from, expect)) {
            ++a.left;
            continue;
        }
        if (::mkdir(sub.c_str(), 0700) != 0 && errno != EEXIST)
            fail("kv cache: cannot create {}: {}", sub, std::strerror(errno));
        // link + unlink rather than rename: rename would replace a newer file of the same name
        // (then the old copy in the root is dropped). A file system without hard links gets a
        // rename when the name is free.
        const std::string to = sub + "/" + name;
        if (::link(from.c_str(), to.c_str()) == 0) {
            ::unlink(from.c_str());
            ++a.moved;
        } else if (errno == EEXIST) {
            ::unlink(from.c_str());
        } else {
            struct stat st {};
            if (::lstat(to.c_str(), &st) != 0 && errno == ENOENT && ::rename(from.c_str(), to.c_str()) == 0)
                ++a.moved;
            else
                ++a.left;
        }
    }
    return a;
}

}  // namespace ds4::kvcache
