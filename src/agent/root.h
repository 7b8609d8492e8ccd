// The directory the agent's tools work in (--chdir, default the current directory) and the
// rule that keeps them there: a path a tool names is resolved against the root, every
// symbolic link on the way is followed (realpath of the longest existing prefix), and the
// result must be the root or lie below it. So "../x", "/etc/passwd" and a link inside the tree
// that points out of it are all refused, whether the target exists yet or not. With
// allow_outside (--allow-outside) paths are only resolved, never refused.
//
// This confines the file tools (read, more, write, edit, search, list); `bash` starts in the
// root but a command can go anywhere, which is why it asks for permission (agent/tools.h).
#pragma once

#include <string>

namespace ds4::agent {

class Root {
public:
    // Throws ds4::Error when `dir` does not exist or is not a directory.
    explicit Root(const std::string& dir, bool allow_outside = false);
    const std::string& path() const { return root_; }  // canonical, no trailing slash

    // The canonical absolute path `p` names (relative paths start at the root). Throws
    // ds4::Error "<p>: outside the working directory <root>" when it escapes, or for an empty
    // path or one with a NUL byte.
    std::string resolve(const std::string& p) const;
    // `abs` relative to the root for display ("." for the root itself); abs unchanged when
    // outside.
    std::string relative(const std::string& abs) const;

private:
    std::string root_;
    bool allow_outside_;
};

}  // namespace ds4::agent
