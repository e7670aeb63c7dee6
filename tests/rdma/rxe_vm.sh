#!/usr/bin/env bash
# Runs a command inside a QEMU guest that has a real RDMA stack: Debian's own
# kernel (its package unpacked, not installed) with SoftRoCE (rdma_rxe) over
# the guest's loopback (rxe0) and over a dummy interface (rxe1), busybox, rdma-core's tools and libraries, and a
# payload folder. The guest runs PAYLOAD/run.sh and its exit status comes
# back through QEMU's isa-debug-exit device.
#
# Usage: rxe_vm.sh PAYLOAD_DIR [TIMEOUT_S]
#   PAYLOAD_DIR holds run.sh and the programs it runs; the shared libraries
#   they link (ldd) are copied in, with libibverbs and the rxe provider,
#   which the programs load themselves.
# Environment: RINGO_RXE_CACHE (default /var/cache/ringo-rxe) holds Debian's
#   kernel package (scripts/setup.sh fetches it; fetched here if missing).
# Exit status: the guest's run.sh status; 124 when the guest ran out of time;
#   125 when the guest could not be built or booted. Prints the console.
set -uo pipefail
export PATH="$PATH:/usr/sbin:/sbin"  # depmod and modinfo
payload=$(readlink -f "${1:?usage: rxe_vm.sh PAYLOAD_DIR [TIMEOUT_S]}")
limit=${2:-600}
cache=${RINGO_RXE_CACHE:-/var/cache/ringo-rxe}
fail() { echo "rxe_vm: $*" >&2; exit 125; }
for t in qemu-system-x86_64 busybox rdma cpio gzip depmod modinfo; do
  command -v "$t" >/dev/null 2>&1 || fail "$t is not installed (scripts/setup.sh installs it)"
done
[ -x "$payload/run.sh" ] || fail "$payload/run.sh is missing"

# ---- the kernel: Debian's package, unpacked once into the cache ----
kpkg_name=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
[ -n "$kpkg_name" ] || fail "apt-cache does not know linux-image-amd64"
mkdir -p "$cache" || fail "cannot make $cache"
deb=$(ls "$cache/${kpkg_name}"_*.deb 2>/dev/null | head -1)
if [ -z "$deb" ]; then
  (cd "$cache" && chmod 777 . && timeout 600 apt-get download -q "$kpkg_name" >/dev/null) ||
    fail "cannot download $kpkg_name"
  deb=$(ls "$cache/${kpkg_name}"_*.deb | head -1)
fi
kdir="$cache/unpacked-$(basename "$deb" .deb)"
if [ ! -d "$kdir/boot" ]; then
  rm -rf "$kdir.tmp" && mkdir -p "$kdir.tmp" && dpkg -x "$deb" "$kdir.tmp" && mv "$kdir.tmp" "$kdir" ||
    fail "cannot unpack $deb"
fi
kver=$(ls "$kdir/lib/modules" | head -1)
[ -f "$kdir/lib/modules/$kver/modules.dep" ] || depmod -b "$kdir" "$kver" || fail "depmod failed"

# ---- the initramfs ----
work=$(mktemp -d "${TMPDIR:-/tmp}/ringo-rxe.XXXXXX")
trap 'rm -rf "$work"' EXIT
root="$work/root"
mkdir -p "$root"/{bin,dev,proc,sys,tmp,etc/libibverbs.d,lib/modules,dev/shm}
cp /bin/busybox "$root/bin/"
for a in $(busybox --list); do [ -e "$root/bin/$a" ] || ln -s busybox "$root/bin/$a"; done
: >"$root/modlist"
for m in crc32_generic udp_tunnel ip6_udp_tunnel ib_core ib_uverbs rdma_rxe dummy; do
  f=$(modinfo -b "$kdir" -k "$kver" -n "$m" 2>/dev/null) || fail "module $m is not in $kver"
  cp "$f" "$root/lib/modules/" && basename "$f" >>"$root/modlist"
done
copy_with_libs() {  # FILE...: each file at its own path, with what ldd names
  local f l
  for f in "$@"; do
    mkdir -p "$root$(dirname "$f")" && cp -L "$f" "$root$f"
    for l in $(ldd "$f" 2>/dev/null | awk '/=> \// {print $3} /^\t\// {print $1}'); do
      [ -e "$root$l" ] || { mkdir -p "$root$(dirname "$l")" && cp -L "$l" "$root$l"; }
    done
  done
}
libdir=/usr/lib/x86_64-linux-gnu
copy_with_libs /usr/bin/rdma /usr/bin/ibv_devinfo /usr/bin/ip "$libdir/libibverbs.so.1" "$libdir/libibverbs/librxe-rdmav34.so"
for p in ib_write_bw; do command -v $p >/dev/null && copy_with_libs "$(command -v $p)"; done
cp /etc/libibverbs.d/rxe.driver "$root/etc/libibverbs.d/"
cp -aL "$payload" "$root/payload"
for f in "$root"/payload/*; do
  [ -f "$f" ] && [ -x "$f" ] && ldd "$f" >/dev/null 2>&1 || continue
  for l in $(ldd "$f" | awk '/=> \// {print $3} /^\t\// {print $1}'); do
    [ -e "$root$l" ] || { mkdir -p "$root$(dirname "$l")" && cp -L "$l" "$root$l"; }
  done
done
cat >"$root/init" <<'INIT'
#!/bin/sh
export PATH=/usr/bin:/bin HOME=/tmp
mount -t proc proc /proc; mount -t sysfs sysfs /sys; mount -t devtmpfs dev /dev
mkdir -p /dev/shm; mount -t tmpfs tmpfs /dev/shm; mount -t tmpfs tmpfs /tmp
for m in $(cat /modlist); do insmod /lib/modules/$m || echo "@@INSMOD_FAIL $m"; done
/usr/bin/ip link set lo up 2>/dev/null || ip link set lo up
rdma link add rxe0 type rxe netdev lo && echo "@@RXE_UP"
# A second device (rxe1 over a dummy interface of its own subnet), for ring
# channels spread over two verbs devices; the tests name the devices they use.
ip link add rxedummy0 type dummy && ip addr add 10.231.255.1/24 dev rxedummy0 && ip link set rxedummy0 up &&
  rdma link add rxe1 type rxe netdev rxedummy0 && echo "@@RXE1_UP"
cd /payload && timeout -s KILL 3000 ./run.sh
rc=$?
echo "@@GUEST_EXIT rc=$rc"
[ $rc -gt 100 ] && rc=100
printf "\\$(printf %o $rc)" | dd of=/dev/port bs=1 seek=244 count=1 2>/dev/null
poweroff -f
INIT
chmod +x "$root/init"
(cd "$root" && find . | cpio -o -H newc --quiet) | gzip -1 >"$work/initrd.gz" || fail "cpio failed"

# ---- boot ----
cpus=$(nproc)
[ "$cpus" -gt 4 ] && cpus=4
timeout -s KILL "$limit" qemu-system-x86_64 -accel tcg -cpu max -m 3G -smp "$cpus" -nographic -no-reboot \
  -device isa-debug-exit,iobase=0xf4,iosize=0x04 -kernel "$kdir/boot/vmlinuz-$kver" -initrd "$work/initrd.gz" \
  -append "console=ttyS0 loglevel=3 panic=-1" </dev/null 2>&1 | tr -d '\r'
qrc=${PIPESTATUS[0]}
if [ "$qrc" -eq 137 ]; then echo "rxe_vm: the guest ran past ${limit}s"; exit 124; fi
if [ $((qrc % 2)) -eq 1 ]; then exit $(((qrc - 1) / 2)); fi
echo "rxe_vm: qemu exited with $qrc without the guest's status"
exit 125
