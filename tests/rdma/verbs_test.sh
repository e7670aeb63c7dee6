#!/usr/bin/env bash
# The verbs transport against a real RDMA stack: SoftRoCE in a QEMU guest
# (rxe_vm.sh), running guest_run.sh over the test programs given: the net
# conformance suite and the fault cases over verbs, a reduced collective
# sweep on 2 and 3 ranks, ringo-perf verified over verbs (uncompressed, and
# with the bf16 and e4m3 wires), ring channels over two verbs devices split
# by measured rate, and a killed peer.
# Needs the packages of scripts/setup.sh (and Debian's kernel package, which
# it fetches); skips (exit 0, "SKIPPED") where a tool is missing unless
# RINGO_TEST_REQUIRE_IB=1.
# Usage: verbs_test.sh NET_CONFORMANCE_TEST IB_NET_TEST MULTIHOST RINGO_PERF
set -u
here=$(dirname "$(readlink -f "$0")")
source "$here/../testlib/junit.sh"
junit_init verbs
# guest_run.sh's verdicts, in its order.
CASES=(net_conformance_ib ib_faults reduced_sweep_2_ranks reduced_sweep_3_ranks ringo_perf_over_verbs
       wire_over_verbs two_devices_over_verbs killed_peer_named)
for t in qemu-system-x86_64 busybox rdma cpio; do
  if ! command -v $t >/dev/null 2>&1; then
    [ "${RINGO_TEST_REQUIRE_IB:-0}" = 1 ] && { junit_skip_all "$t is not installed" "${CASES[@]}"; exit 1; }
    junit_skip_all "$t is not installed (scripts/setup.sh installs the verbs test's packages)" "${CASES[@]}"
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
# rxe_vm.sh could not make or boot the guest on this machine (its kernel
# package, QEMU): nothing ran, so every case is skipped, with why.
if [ $rc -eq 125 ] && [ "${RINGO_TEST_REQUIRE_IB:-0}" != 1 ]; then
  junit_skip_all "$(grep -m1 '^rxe_vm:' "$payload/console.log" || echo "the guest could not be started")" "${CASES[@]}"
  exit 0
fi
# Each verdict the guest printed; one it never reached failed (the guest
# stopped first).
for name in "${CASES[@]}"; do
  if grep -q "@@PASS $name" "$payload/console.log"; then
    junit_case "$name" pass
  elif grep -q "@@FAIL $name" "$payload/console.log"; then
    junit_case "$name" fail "$(grep -m1 "@@FAIL $name" "$payload/console.log")"
  else
    junit_case "$name" fail "the guest never reached it (status $rc)"
  fi
done
if [ $rc -ne 0 ] && ! junit_failed; then junit_case guest_exit fail "the guest exited with status $rc"; fi
junit_failed && exit 1
exit 0
