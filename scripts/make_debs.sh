#!/usr/bin/env bash
# Debian packages from scripts/install.sh's install (dpkg-deb; nothing is
# compiled): for Debian 12 on amd64, in --out DIR:
#
#   libringo0.M   the library (/usr/lib/x86_64-linux-gnu/libringo.so.*)
#   libringo-dev  the header, libringo.so, pkg-config and CMake files, docs
#   ringo-nccl-shim  libnccl.so.2 in /usr/lib/x86_64-linux-gnu/ringo/nccl
#   ringo-tools   ringo-perf, ringo-topo, ringo-train, ringo-doctor
#
# (M: the soname's version, 0.MINOR while the major version is 0.)
# Usage: scripts/make_debs.sh --out DIR [--bin BUILT] [--src SOURCES]
# (RINGO_DEB_COMPRESSION: dpkg-deb's -Z, default xz; the tests use none.)
# (--bin, --src: as for install.sh.) Install with
#   apt install ./libringo0.*.deb ./libringo-dev_*.deb ./ringo-*.deb
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
out="" pass=()
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out=$2; shift 2 ;;
    --bin|--src) pass+=("$1" "$2"); shift 2 ;;
    *) echo "make_debs.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -n "$out" ] || { echo "make_debs.sh: --out DIR is required" >&2; exit 2; }
mkdir -p "$out"
out=$(cd "$out" && pwd)
stage=$(mktemp -d /tmp/ringo-debs.XXXXXX)
trap 'rm -rf "$stage"' EXIT
multiarch=lib/x86_64-linux-gnu
"$here/scripts/install.sh" --prefix /usr --libdir "$multiarch" --destdir "$stage/all" "${pass[@]}" >&2
root="$stage/all/usr"
version=$(sed -n 's/^Version: //p' "$root/$multiarch/pkgconfig/ringo.pc")
soname=$(cd "$root/$multiarch" && ls libringo.so.[0-9]* | awk 'length < min || min == "" { min = length; s = $0 } END { print s }')
abi=${soname#libringo.so.}
runtime="libringo$abi"

# package NAME: moves the listed paths (relative to /usr) into NAME's tree.
package() {
  local name=$1; shift
  local tree="$stage/$name"
  for p in "$@"; do
    mkdir -p "$tree/usr/$(dirname "$p")"
    mv "$root/$p" "$tree/usr/$p"
  done
}
package "$runtime" "$multiarch/libringo.so.$version" "$multiarch/$soname"
package libringo-dev include "$multiarch/libringo.so" "$multiarch/pkgconfig" "$multiarch/cmake" share/doc/ringo
package ringo-nccl-shim "$multiarch/ringo"
package ringo-tools bin
mv "$stage/libringo-dev/usr/share/doc/ringo" "$stage/libringo-dev/usr/share/doc/libringo-dev"

# control NAME DEPENDS RECOMMENDS DESCRIPTION...
control() {
  local name=$1 depends=$2 recommends=$3 summary=$4; shift 4
  mkdir -p "$stage/$name/DEBIAN"
  {
    echo "Package: $name"
    echo "Version: $version"
    echo "Architecture: amd64"
    echo "Maintainer: Ringo developers <ringo@localhost>"
    echo "Installed-Size: $(du -sk "$stage/$name/usr" | cut -f1)"
    echo "Depends: $depends"
    [ -n "$recommends" ] && echo "Recommends: $recommends"
    echo "Section: libs"
    echo "Priority: optional"
    echo "Description: $summary"
    for line in "$@"; do echo " $line"; done
  } > "$stage/$name/DEBIAN/control"
}
control "$runtime" "libc6 (>= 2.34), libgcc-s1, libstdc++6, libhwloc15" "libibverbs1, ibverbs-providers" \
  "Ringo collective communication library (runtime)" \
  "Ring all-reduce and every NCCL collective and point-to-point call, on GPUs" \
  "(CUDA kernels for sm_90 built in) and on host memory, over NVLink/PCIe," \
  "shared memory, TCP and InfiniBand verbs (libibverbs loaded when present)." \
  "Works on host memory where no GPU or driver is present."
echo "libringo $abi $runtime (>= $version)" > "$stage/$runtime/DEBIAN/shlibs"
echo "activate-noawait ldconfig" > "$stage/$runtime/DEBIAN/triggers"
control libringo-dev "$runtime (= $version)" "pkgconf | pkg-config, cmake" \
  "Ringo collective communication library (development files)" \
  "The public C header (ringo/ringo.h), libringo.so for linking, the" \
  "pkg-config file (ringo.pc), the CMake package (find_package(Ringo):" \
  "Ringo::ringo) and the documentation."
control ringo-nccl-shim "libc6 (>= 2.34), libgcc-s1, libstdc++6, libhwloc15" "libibverbs1" \
  "NCCL's C ABI on Ringo (libnccl.so.2)" \
  "Programs built for NCCL run on Ringo when this folder is first on their" \
  "library path: LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/ringo/nccl."
echo "activate-noawait ldconfig" > "$stage/ringo-nccl-shim/DEBIAN/triggers"
control ringo-tools "libc6 (>= 2.34), libgcc-s1, libstdc++6, libhwloc15, libopenblas0 | libblas3, zlib1g, python3" \
  "libibverbs1, dataset-fashion-mnist" \
  "Ringo's tools: ringo-perf, ringo-topo, ringo-train, ringo-doctor" \
  "ringo-perf measures collectives with nccl-tests' flags and columns;" \
  "ringo-topo shows the machine's topology and rings; ringo-train is the" \
  "reference data-parallel trainer; ringo-doctor reads flight records."
sed -i 's/^Section: libs/Section: utils/' "$stage/ringo-tools/DEBIAN/control"
sed -i 's/^Section: libs/Section: libdevel/' "$stage/libringo-dev/DEBIAN/control"

for name in "$runtime" libringo-dev ringo-nccl-shim ringo-tools; do
  dpkg-deb --root-owner-group -Z"${RINGO_DEB_COMPRESSION:-xz}" --build "$stage/$name" "$out/${name}_${version}_amd64.deb" >&2
done
rm -rf "$root/share/ringo"  # the install's own list: dpkg keeps each package's
left=$(find "$root" -type f -o -type l)
[ -z "$left" ] || { echo "make_debs.sh: files in no package: $left" >&2; exit 1; }
ls "$out"/*_"$version"_amd64.deb
