#include "agent/root.h"

#include <climits>
#include <cstdlib>
#include <filesystem>
#include <sys/stat.h>

#include "common/error.h"

namespace ds4::agent {
namespace fs = std::filesystem;

namespace {

std::string real(const std::string& p) {
    char buf[PATH_MAX];
    if (!::realpath(p.c_str(), buf)) return {};
    return buf;
}

bool inside(const std::string& root, const std::string& p) {
    if (p == root) return true;
    if (root == "/") return true;
    return p.size() > root.size() && p.compare(0, root.size(), root) == 0 && p[root.size()] == '/';
}

}  // namespace

Root::Root(const std::string& dir, bool allow_outside) : allow_outside_(allow_outside) {
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) fail("{}: not a directory", dir);
    root_ = real(dir);
    if (root_.empty()) fail("{}: cannot resolve", dir);
}

std::string Root::resolve(const std::string& p) const {
    if (p.empty()) fail("empty path");
    if (p.find('\0') != std::string::npos) fail("path with a NUL byte");
    fs::path full = fs::path(p).is_absolute() ? fs::path(p) : fs::path(root_) / p;
    full = full.lexically_normal();
    // The longest prefix that exists, with its links followed; the rest cannot hold ".."
    // after lexical normalisation, nor links (it does not exist yet).
    fs::path head = full, tail;
    std::string resolved;
    for (;;) {
        resolved = real(head.string());
        if (!resolved.empty()) break;
        // A dangling link is a name that exists: refuse rather than guess where it points.
        struct stat st {};
        if (::lstat(head.string().c_str(), &st) == 0 && S_ISLNK(st.st_mode))
            fail("{}: a symbolic link that points nowhere", p);
        if (!head.has_relative_path()) break;
        tail = head.filename() / tail;
        head = head.parent_path();
    }
    fs::path out = fs::path(resolved.empty() ? "/" : resolved);
    if (!tail.empty()) out /= tail;
    std::string s = out.lexically_normal().string();
    while (s.size() > 1 && s.back() == '/') s.pop_back();
    if (!allow_outside_ && !inside(root_, s)) fail("{}: outside the working directory {}", p, root_);
    return s;
}

std::string Root::relative(const std::string& abs) const {
    if (abs == root_) return ".";
    if (!inside(root_, abs)) return abs;
    return root_ == "/" ? abs.substr(1) : abs.substr(root_.size() + 1);
}

}  // namespace ds4::agent
