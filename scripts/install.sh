#!/usr/bin/env bash
# Installs Ringo into a prefix, from what the build made (it compiles
# nothing new: run after scripts/test.sh, or it builds the targets first):
#
#   PREFIX/include/ringo/ringo.h
#   PREFIX/LIBDIR/libringo.so.M.m.p, its soname libringo.so.0.m (0.x) or
#       libringo.so.M, and libringo.so (for -lringo)
#   PREFIX/LIBDIR/ringo/nccl/libnccl.so.2 (and libnccl.so): the NCCL shim,
#       in a folder of its own so that only a path that names it picks it
#   PREFIX/bin/ringo-perf, ringo-topo, ringo-train, ringo-doctor
#   PREFIX/LIBDIR/pkgconfig/ringo.pc
#   PREFIX/LIBDIR/cmake/Ringo/RingoConfig.cmake, RingoConfigVersion.cmake
#   PREFIX/share/doc/ringo/ (README, CHANGELOG, docs/)
#   PREFIX/share/ringo/install_manifest.txt: every file and link installed
#
# Usage:
#   scripts/install.sh --prefix DIR [--libdir lib] [--destdir STAGE]
#                      [--bin BUILT] [--src SOURCES]
#   scripts/install.sh --uninstall --prefix DIR [--destdir STAGE]
# --destdir stages the files under STAGE/PREFIX (packages: scripts/make_debs.sh).
# --bin: where the built files are (default: the build's bazel-bin, built
# here with scripts/bazel_flags.sh's flags and RINGO_INSTALL_BAZEL_FLAGS);
# --src: the source tree (default: this checkout).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
prefix="" libdir=lib destdir="" bin="" src="$here" uninstall=0
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) prefix=$2; shift 2 ;;
    --libdir) libdir=$2; shift 2 ;;
    --destdir) destdir=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    --src) src=$2; shift 2 ;;
    --uninstall) uninstall=1; shift ;;
    *) echo "install.sh: unknown argument $1 (see the comment at its top)" >&2; exit 2 ;;
  esac
done
[ -n "$prefix" ] || { echo "install.sh: --prefix DIR is required" >&2; exit 2; }
case "$prefix" in /*) ;; *) prefix="$(pwd)/$prefix" ;; esac
root="$destdir$prefix"
manifest="$root/share/ringo/install_manifest.txt"

if [ $uninstall -eq 1 ]; then
  [ -f "$manifest" ] || { echo "install.sh: no Ringo installed in $prefix ($manifest is missing)" >&2; exit 1; }
  mapfile -t files < "$manifest"
  mapfile -t dirs < <(cat "$manifest.dirs" 2>/dev/null; echo "$prefix/share/ringo")
  for f in "${files[@]}"; do rm -f "$destdir$f"; done
  rm -f "$manifest" "$manifest.dirs"
  # The folders left empty, deepest first, each climbing to the prefix.
  while IFS= read -r d; do
    p="$destdir$d"
    while [ "$p" != "$root" ] && [ "${p#"$root"/}" != "$p" ] && rmdir "$p" 2>/dev/null; do p=$(dirname "$p"); done
  done < <(printf '%s\n' "${dirs[@]}" | awk '{ print gsub("/", "/"), $0 }' | sort -rn | cut -d' ' -f2-)
  echo "uninstalled Ringo from $prefix (${#files[@]} files and links)"
  exit 0
fi

# The version: the public header is its one place.
version_part() { sed -n "s/^#define RINGO_$1 \\([0-9][0-9]*\\)\$/\\1/p" "$src/include/ringo/ringo.h"; }
major=$(version_part MAJOR) minor=$(version_part MINOR) patch=$(version_part PATCH)
[ -n "$major" ] && [ -n "$minor" ] && [ -n "$patch" ] || { echo "install.sh: no version in $src/include/ringo/ringo.h" >&2; exit 1; }
version="$major.$minor.$patch"
if [ "$major" = 0 ]; then soname="libringo.so.0.$minor"; else soname="libringo.so.$major"; fi

if [ -z "$bin" ]; then
  cd "$here"
  source scripts/bazel_flags.sh
  # shellcheck disable=SC2206
  extra=(${RINGO_INSTALL_BAZEL_FLAGS:-})
  targets=(//:libringo.so //:libnccl.so.2 //tools:ringo-perf //tools/topo:ringo-topo //trainer:ringo-train)
  bazel build "${RINGO_BAZEL_FLAGS[@]}" "${extra[@]}" "${targets[@]}" >&2
  bin=$(bazel info "${RINGO_BAZEL_FLAGS[@]}" "${extra[@]}" bazel-bin 2>/dev/null)
fi
for f in libringo.so libnccl.so.2 tools/ringo-perf tools/topo/ringo-topo trainer/ringo-train; do
  [ -f "$bin/$f" ] || { echo "install.sh: $bin/$f is missing (build it first)" >&2; exit 1; }
done
have_soname=$(objdump -p "$bin/libringo.so" 2>/dev/null | awk '/SONAME/ {print $2}')
[ "$have_soname" = "$soname" ] || { echo "install.sh: $bin/libringo.so has soname '$have_soname', the header says $soname" >&2; exit 1; }

mkdir -p "$root/share/ringo"
: > "$manifest"
: > "$manifest.dirs"
put() {  # put MODE SOURCE DEST: installs a file and lists it
  install -D -m "$1" "$2" "$root/$3"
  echo "$prefix/$3" >> "$manifest"
  dirname "$prefix/$3" >> "$manifest.dirs"
}
link() {  # link TARGET DEST: a relative symbolic link, listed
  mkdir -p "$(dirname "$root/$2")"
  ln -sfn "$1" "$root/$2"
  echo "$prefix/$2" >> "$manifest"
}
fill() {  # fill TEMPLATE DEST: a template with the install's values, listed
  local up
  up=$(echo "$libdir/cmake/Ringo" | sed 's|[^/][^/]*|..|g')
  mkdir -p "$(dirname "$root/$2")"
  sed -e "s|@PREFIX@|$prefix|g" -e "s|@LIBDIR@|$libdir|g" -e "s|@VERSION@|$version|g" -e "s|@SONAME@|$soname|g" \
      -e "s|@MAJOR@|$major|g" -e "s|@MINOR@|$minor|g" -e "s|@UP@|$up|g" "$1" > "$root/$2"
  chmod 0644 "$root/$2"
  echo "$prefix/$2" >> "$manifest"
  dirname "$prefix/$2" >> "$manifest.dirs"
}

put 0644 "$src/include/ringo/ringo.h" include/ringo/ringo.h
put 0755 "$bin/libringo.so" "$libdir/libringo.so.$version"
link "libringo.so.$version" "$libdir/$soname"
link "$soname" "$libdir/libringo.so"
put 0755 "$bin/libnccl.so.2" "$libdir/ringo/nccl/libnccl.so.2"
link libnccl.so.2 "$libdir/ringo/nccl/libnccl.so"
put 0755 "$bin/tools/ringo-perf" bin/ringo-perf
put 0755 "$bin/tools/topo/ringo-topo" bin/ringo-topo
put 0755 "$bin/trainer/ringo-train" bin/ringo-train
put 0755 "$src/tools/doctor/ringo-doctor" bin/ringo-doctor
fill "$src/scripts/install/ringo.pc.in" "$libdir/pkgconfig/ringo.pc"
fill "$src/scripts/install/RingoConfig.cmake.in" "$libdir/cmake/Ringo/RingoConfig.cmake"
fill "$src/scripts/install/RingoConfigVersion.cmake.in" "$libdir/cmake/Ringo/RingoConfigVersion.cmake"
put 0644 "$src/README.md" share/doc/ringo/README.md
put 0644 "$src/CHANGELOG.md" share/doc/ringo/CHANGELOG.md
for d in "$src"/docs/*.md; do put 0644 "$d" "share/doc/ringo/docs/$(basename "$d")"; done
sort -u -o "$manifest.dirs" "$manifest.dirs"
echo "installed Ringo $version in $prefix${destdir:+ (staged under $destdir)}: $(wc -l < "$manifest") files and links"
