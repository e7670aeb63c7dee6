#!/usr/bin/env bash
# Ringo installed as a library and used as an outside project would:
# scripts/install.sh into a temporary prefix (the files, the soname and its
# links, the symbols' version node, the NCCL shim in its own folder, the
# tools running from bin/), examples/allreduce.c built once with pkg-config
# and once with CMake's find_package(Ringo), each run on 2 ranks; then the
# uninstall list removes everything, leaving the prefix empty.
set -uo pipefail
R="${TEST_SRCDIR:?run by bazel test}/${TEST_WORKSPACE:-ringo}"
source "$R/tests/testlib/junit.sh"
junit_init install
work="${TEST_TMPDIR:-$(mktemp -d)}"
prefix="$work/prefix"

install_files() {
"$R/scripts/install.sh" --prefix "$prefix" --bin "$R" --src "$R"
version=$(sed -n 's/^Version: //p' "$prefix/lib/pkgconfig/ringo.pc")
major=${version%%.*} rest=${version#*.} minor=${rest%%.*}
soname="libringo.so.$major"; [ "$major" = 0 ] && soname="libringo.so.0.$minor"
for f in include/ringo/ringo.h "lib/libringo.so.$version" lib/ringo/nccl/libnccl.so.2 bin/ringo-perf bin/ringo-topo \
         bin/ringo-train bin/ringo-doctor lib/pkgconfig/ringo.pc lib/cmake/Ringo/RingoConfig.cmake \
         lib/cmake/Ringo/RingoConfigVersion.cmake share/doc/ringo/README.md share/doc/ringo/CHANGELOG.md \
         share/doc/ringo/docs/architecture.md share/ringo/install_manifest.txt; do
  [ -f "$prefix/$f" ] || junit_fail "$f was not installed"
done
}

soname_and_symbol_versions() {
version=$(sed -n 's/^Version: //p' "$prefix/lib/pkgconfig/ringo.pc")
major=${version%%.*} rest=${version#*.} minor=${rest%%.*}
soname="libringo.so.$major"; [ "$major" = 0 ] && soname="libringo.so.0.$minor"
[ "$(readlink "$prefix/lib/$soname")" = "libringo.so.$version" ] || junit_fail "$soname does not point at the library"
[ "$(readlink "$prefix/lib/libringo.so")" = "$soname" ] || junit_fail "libringo.so does not point at $soname"
got=$(objdump -p "$prefix/lib/libringo.so.$version" | awk '/SONAME/ {print $2}')
[ "$got" = "$soname" ] || junit_fail "the library's soname is '$got', not $soname"
node="RINGO_$major.$minor"
objdump -T "$prefix/lib/libringo.so.$version" | grep -q " $node  *ringoAllReduce$" ||
  junit_fail "ringoAllReduce is not in the version node $node"
unversioned=$(objdump -T "$prefix/lib/libringo.so.$version" | awk '$NF ~ /^ringo/ && $(NF-1) !~ /^RINGO_/' | wc -l)
[ "$unversioned" -eq 0 ] || junit_fail "$unversioned ringo* symbols carry no version node"
[ "$(objdump -p "$prefix/lib/ringo/nccl/libnccl.so.2" | awk '/SONAME/ {print $2}')" = libnccl.so.2 ] ||
  junit_fail "the shim's soname is not libnccl.so.2"
[ ! -e "$prefix/lib/libnccl.so.2" ] || junit_fail "the shim is beside libringo.so, where any program would pick it"
}

tools_run_from_bin() {
"$prefix/bin/ringo-topo" --env > /dev/null || junit_fail "ringo-topo from bin/ does not run"
"$prefix/bin/ringo-perf" allreduce -np 2 --host -b 8 -e 64K -f 4 -n 2 -w 1 -c 1 > "$work/perf.txt" ||
  junit_fail "ringo-perf from bin/ failed: $(tail -5 "$work/perf.txt")"
grep -q "Out of bounds values : 0 OK" "$work/perf.txt" || junit_fail "ringo-perf from bin/ found wrong values"
}

# run2 PROGRAM: two ranks meeting at a free loopback port; each must print its result.
run2() {
  local port pids=() r
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  for r in 0 1; do
    RINGO_COMM_ID="127.0.0.1:$port" "$1" "$r" 2 > "$work/out.$r" 2>&1 &
    pids+=($!)
  done
  for r in 0 1; do wait "${pids[$r]}" || junit_fail "$1 rank $r failed: $(cat "$work/out.$r")"; done
  for r in 0 1; do grep -q "rank $r of 2: every element is 1" "$work/out.$r" || junit_fail "$1 rank $r: $(cat "$work/out.$r")"; done
}

# pkg-config, as the README says.
pkg_config_build_and_run() {
version=$(sed -n 's/^Version: //p' "$prefix/lib/pkgconfig/ringo.pc")
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
[ "$(pkg-config --modversion ringo)" = "$version" ] || junit_fail "pkg-config reports another version"
# shellcheck disable=SC2046
cc -std=c11 -O2 "$R/examples/allreduce.c" -o "$work/allreduce_pc" $(pkg-config --cflags --libs ringo) \
  -Wl,-rpath,"$prefix/lib"
run2 "$work/allreduce_pc"
}

# CMake's find_package(Ringo).
cmake_build_and_run() {
cmake -S "$R/examples" -B "$work/build" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_RPATH="$prefix/lib" > "$work/cmake.txt" 2>&1 ||
  junit_fail "cmake could not configure the examples: $(tail -20 "$work/cmake.txt")"
cmake --build "$work/build" > "$work/build.txt" 2>&1 || junit_fail "cmake could not build the examples: $(tail -20 "$work/build.txt")"
run2 "$work/build/allreduce"
}

cmake_version_file() {
version=$(sed -n 's/^Version: //p' "$prefix/lib/pkgconfig/ringo.pc")
major=${version%%.*} rest=${version#*.} minor=${rest%%.*}
cat > "$work/VersionProbe.cmake" <<PROBE
cmake_minimum_required(VERSION 3.16)
project(probe NONE)
find_package(Ringo $major.$((minor + 1)) QUIET)
if(Ringo_FOUND)
  message(FATAL_ERROR "a newer minor version was accepted")
endif()
find_package(Ringo $major.$minor REQUIRED)
PROBE
mkdir -p "$work/probe" && cp "$work/VersionProbe.cmake" "$work/probe/CMakeLists.txt"
cmake -S "$work/probe" -B "$work/probe/build" -DCMAKE_PREFIX_PATH="$prefix" > "$work/probe.txt" 2>&1 ||
  junit_fail "the version file: $(tail -10 "$work/probe.txt")"
}

uninstall_leaves_nothing() {
"$R/scripts/install.sh" --uninstall --prefix "$prefix"
left=$(find "$prefix" -mindepth 1 2>/dev/null || true)
[ -z "$left" ] || junit_fail "the uninstall left: $left"
}

junit_run install_files install_files
junit_run soname_and_symbol_versions soname_and_symbol_versions
junit_run tools_run_from_bin tools_run_from_bin
junit_run pkg_config_build_and_run pkg_config_build_and_run
junit_run cmake_build_and_run cmake_build_and_run
junit_run cmake_version_file cmake_version_file
junit_run uninstall_leaves_nothing uninstall_leaves_nothing
junit_failed && exit 1
exit 0
