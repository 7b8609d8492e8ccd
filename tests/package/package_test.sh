#!/usr/bin/env bash
# The Debian package, tested as a user meets it (issue 37): cpack builds it from the build
# folder; its control fields and file list are checked; it is unpacked into an empty root and
# the installed files alone (no build tree, no repository, no environment help) must run: every
# tool's --version and --help, the man pages, and the default model made by the installed
# ds4-gguf-gen from the packaged tokenizer, then one short reply from the installed ds4.
# With DS4_TEST_DPKG_INSTALL=1 as root (CI sets it: a throwaway machine) the package is also
# installed with dpkg -i, used from /usr/bin and purged.
#
#   package_test.sh BUILD_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
version=$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$build/CMakeCache.txt")
tmp=$(mktemp -d /tmp/ds4-package-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

for tool in cpack dpkg-deb dpkg-shlibdeps help2man; do
  command -v "$tool" >/dev/null || { echo "SKIP: $tool not installed (scripts/setup.sh installs it)"; exit 77; }
done

# 1. Build the package into its own folder (cpack installs the project into a staging root).
(cd "$tmp" && cpack -G DEB --config "$build/CPackConfig.cmake" -B "$tmp/out" >"$tmp/cpack.log" 2>&1) ||
  { cat "$tmp/cpack.log"; fail "cpack failed"; }
deb=$(ls "$tmp"/out/dwarfstar_"$version"_*.deb 2>/dev/null | head -1)
[ -f "$deb" ] || fail "no dwarfstar_${version}_*.deb in $tmp/out: $(ls "$tmp/out")"

# 2. Control fields: name, version, and a Depends computed from the linked libraries, every one
#    of them a Debian package installed on this machine.
field() { dpkg-deb -f "$deb" "$1"; }
[ "$(field Package)" = dwarfstar ] || fail "Package is '$(field Package)'"
[ "$(field Version)" = "$version" ] || fail "Version is '$(field Version)', CMake says $version"
depends=$(field Depends)
for lib in libc6 libstdc++6 libfmt libpcre2-8 libxxhash libedit libssl; do
  grep -q "$lib" <<<"$depends" || fail "Depends lacks $lib: $depends"
done
while read -r pkg; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' ||
    fail "dependency $pkg is not a package installed here"
done < <(tr ',' '\n' <<<"$depends" | sed 's/(.*//; s/|.*//; s/ //g' | grep .)

# 3. The files: tools, man pages, docs, tokenizer; nothing from the tests or benchmarks.
dpkg-deb -c "$deb" | awk '{print $6}' | sed 's|^\./||' >"$tmp/files"
tools="ds4 ds4-server ds4-bench ds4-gguf-gen ds4-gguf-split ds4-quantize ds4-splice ds4-score ds4-agent ds4-steer-build ds4-eval"
for t in $tools; do
  grep -qx "usr/bin/$t" "$tmp/files" || fail "usr/bin/$t missing"
  grep -qx "usr/share/man/man1/$t.1.gz" "$tmp/files" || fail "man page of $t missing"
done
grep -qx "usr/bin/deepseek4-quantize" "$tmp/files" || fail "usr/bin/deepseek4-quantize missing"
for f in usr/share/doc/dwarfstar/README.md usr/share/doc/dwarfstar/SERVER.md \
         usr/share/dwarfstar/tokenizer.json usr/lib/systemd/system/ds4-server@.service \
         usr/share/doc/dwarfstar/examples/ds4-server.conf usr/share/doc/dwarfstar/examples/haproxy.cfg; do
  grep -qx "$f" "$tmp/files" || fail "$f missing"
done
if grep -E 'usr/bin/.*(_test|_bench|oracle|membw)' "$tmp/files"; then fail "test or bench binaries packaged"; fi

# 4. Unpacked into an empty root and run from there, away from the build tree.
root="$tmp/root"
dpkg-deb -x "$deb" "$root"
cd "$tmp"
unset DS4_TOKENIZER_JSON
for t in $(ls "$root/usr/bin"); do
  if [ -L "$root/usr/bin/$t" ]; then  # upstream's names for ours (deepseek4-quantize)
    [ -x "$root/usr/bin/$(readlink "$root/usr/bin/$t")" ] || fail "$t links to a missing tool"
    continue
  fi
  out=$("$root/usr/bin/$t" --version) || fail "$t --version exited $?"
  [ "$out" = "$t $version (DwarfStar C++)" ] || fail "$t --version printed '$out'"
  "$root/usr/bin/$t" --help >/dev/null || fail "$t --help exited $?"
  page=$(gzip -dc "$root/usr/share/man/man1/$t.1.gz") || fail "man page of $t is not gzip"
  grep -q "^\.TH ${t^^} \"1\"" <<<"$page" || fail "man page of $t has no .TH header"
  grep -q 'Print the version and exit' <<<"$page" || fail "man page of $t does not list its flags"
done
"$root/usr/bin/ds4-gguf-gen" -q --preset tiny --real-vocab --type embd=q8_0 --type output=q8_0 \
  --seed 1 -o "$tmp/default.gguf" || fail "installed ds4-gguf-gen could not make the default model"
reply=$("$root/usr/bin/ds4" -m "$tmp/default.gguf" -p "Hello! Who are you?" --nothink -n 8 --temp 0 2>"$tmp/ds4.err") ||
  { cat "$tmp/ds4.err"; fail "installed ds4 failed on the default model"; }
[ -n "$reply" ] || fail "installed ds4 printed no reply"
# The unit as packaged, pointed at the unpacked binary: systemd-analyze finds no error (it only
# warns on bad values, so any output fails) and rates its exposure 2.0 or better ("OK").
if command -v systemd-analyze >/dev/null; then
  unit="$tmp/ds4-server@test.service"
  sed "s|/usr/bin/ds4-server|$root/usr/bin/ds4-server|" "$root/usr/lib/systemd/system/ds4-server@.service" >"$unit"
  out=$(systemd-analyze verify --man=no "$unit" 2>&1) || fail "systemd-analyze verify: $out"
  [ -z "$out" ] || fail "systemd-analyze verify complained: $out"
  systemd-analyze security --offline=true --threshold=20 "$unit" >"$tmp/security.txt" 2>&1 ||
    { tail -3 "$tmp/security.txt"; fail "the unit's exposure is above 2.0"; }
  echo "unit: $(grep -o 'Overall exposure level.*' "$tmp/security.txt")"
fi
echo "unpacked package: $(wc -l <"$tmp/files") entries, tools ran, reply: ${reply:0:60}"

# 5. A real install on a throwaway machine.
if [ "${DS4_TEST_DPKG_INSTALL:-0}" = 1 ] && [ "$(id -u)" = 0 ]; then
  dpkg -i "$deb" >"$tmp/dpkg.log" 2>&1 || { cat "$tmp/dpkg.log"; fail "dpkg -i failed"; }
  trap 'dpkg -P dwarfstar >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
  [ "$(/usr/bin/ds4 --version)" = "ds4 $version (DwarfStar C++)" ] || fail "installed /usr/bin/ds4 --version"
  /usr/bin/ds4-gguf-gen -q --preset tiny --real-vocab --seed 2 -o "$tmp/d2.gguf" || fail "/usr/bin/ds4-gguf-gen"
  /usr/bin/ds4 -m "$tmp/d2.gguf" -p hi --nothink -n 4 --temp 0 >/dev/null 2>&1 || fail "/usr/bin/ds4"
  dpkg -P dwarfstar >/dev/null || fail "dpkg -P failed"
  [ ! -e /usr/bin/ds4 ] || fail "/usr/bin/ds4 left after purge"
  echo "dpkg -i, run from /usr/bin, dpkg -P: ok"
fi
echo "package test passed: $(basename "$deb")"
