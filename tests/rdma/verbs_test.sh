#!/usr/bin/env bash
# The verbs transport against a real RDMA stack: SoftRoCE in a QEMU guest
# (rxe_vm.sh), running guest_run.sh over the test programs given: the net
# conformance suite and the fault cases over verbs, a reduced collective
# sweep on 2 and 3 ranks, ringo-perf verified over verbs, and a killed peer.
# Needs the packages of scripts/setup.sh (and Debian's kernel package, which
# it fetches); skips (exit 0, "SKIPPED") where a tool is missing unless
# RINGO_TEST_REQUIRE_IB=1.
# Usage: verbs_test.sh NET_CONFORMANCE_TEST IB_NET_TEST MULTIHOST RINGO_PERF
set -u
here=$(dirname "$(readlink -f "$0")")
for t in qemu-system-x86_64 busybox rdma cpio; do
  if ! command -v $t >/dev/null 2>&1; then
    [ "${RINGO_TEST_REQUIRE_IB:-0}" = 1 ] && { echo "FAIL: $t is not installed"; exit 1; }
    echo "SKIPPED: $t is not installed (scripts/setup.sh installs the verbs test's packages)"
    exit 0
  fi
done
payload=$(mktemp -d "${TMPDIR:-/tmp}/ringo-verbs.XXXXXX")
trap 'rm -rf "$payload"' EXIT
cp -L "$1" "$payload/net_conformance_test"
cp -L "$2" "$payload/ib_net_test"
cp -L "$3" "$payload/multihost"
cp -L "$4" "$payload/ringo-perf"
cp "$here/guest_run.sh" "$payload/run.sh"
chmod +x "$payload"/*
start=$(date +%s)
"$here/rxe_vm.sh" "$payload" "${RINGO_RXE_TIMEOUT_S:-420}" >"$payload/console.log" 2>&1
rc=$?
grep -vE '^\s*$' "$payload/console.log" | grep -vE '^\[ *[0-9.]+\] ' | tail -n 120
echo "guest status $rc after $(($(date +%s) - start)) s"
if [ $rc -eq 0 ] && ! grep -q "@@FAIL" "$payload/console.log" && grep -q "@@PASS killed_peer_named" "$payload/console.log"; then
  echo "PASS"
  exit 0
fi
echo "FAIL"
exit 1
