#!/usr/bin/env bash
# The conformance sweep across a socket, on every machine: ranks are
# processes that each claim a host of their own (RINGO_HOSTID), so every
# ring edge and point-to-point pair goes over TCP on loopback through the
# proxy, as between hosts. Every collective x datatype x op x count (0, 1,
# odd, chunk-1, chunk, chunk+1, several chunks, with 64-byte slots) x in
# and out of place x roots, checked against the reference, then the
# point-to-point rounds, an all-to-all and a split: 2 and 3 ranks; and the
# collectives at 3 ranks with RINGO_ALGO=doubling (recursive doubling,
# Bruck's all-gather, recursive halving).
#
# Then, where this runs as root: two processes of one host (the same host
# name and network namespace) that each mount their own /dev/shm (unshare
# -m), as two containers of one machine: they cannot open each other's
# shared memory, connect over the network instead, and say so at INFO.
# Usage: socket_conformance_test.sh MULTIHOST_BINARY
set -u
BIN=$(readlink -f "$1")
HERE=$(dirname "$(readlink -f "$0")")
source "$HERE/../testlib/junit.sh"
junit_init socket_conformance
LOGS=$(mktemp -d /tmp/ringo-socket.XXXXXX)
export RINGO_TIMEOUT_MS=30000
export RINGO_SOCKET_IFNAME=lo

# run NAME N MODE [WRAP...]: N ranks of the multihost program, waited for.
run() {
  local name=$1 n=$2 mode=$3; shift 3
  # A port the kernel just gave out and nothing holds (a random one was
  # sometimes taken by another test: "Address already in use").
  local port r pids=() status=0
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  for ((r = 0; r < n; r++)); do
    env RANK=$r WORLD_SIZE=$n RINGO_COMM_ID="127.0.0.1:$port" ${RANK_ENV:-RINGO_HOSTID=socket-host$r} \
      RINGO_SLOT_BYTES=64 RINGO_DEBUG=INFO "$@" "$BIN" "$mode" > "$LOGS/$name.rank$r.log" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || status=1; done
  if [ $status -eq 0 ] && ! grep -q "takes socket" "$LOGS/$name.rank0.log"; then
    status=1
    echo "  $name: rank 0 never connected over the network"
  fi
  local want
  for want in "${EXPECT:-}" "${EXPECT2:-}" "${EXPECT3:-}"; do
    if [ $status -eq 0 ] && [ -n "$want" ] && ! grep -q "$want" "$LOGS/$name.rank0.log"; then
      status=1
      echo "  $name: rank 0's log does not say '$want'"
    fi
  done
  if [ $status -eq 0 ]; then
    junit_case "$name" pass
  else
    junit_case "$name" fail "see the ranks' logs below"
  fi
  for ((r = 0; r < n; r++)); do grep -v " INFO " "$LOGS/$name.rank$r.log" | sed "s/^/  $name rank $r: /" | tail -n 4; done
}

for n in 2 3; do
  run "collectives_${n}_ranks" $n collectives
  run "point_to_point_${n}_ranks" $n p2p
done
# The log-step algorithms for every all-reduce, all-gather and
# reduce-scatter they take (up to 256 KiB), against the same reference: 3
# ranks, so recursive doubling and halving fold a rank in and Bruck's
# all-gather sends a partial last step.
EXPECT="by recursive doubling" EXPECT2="by Bruck's algorithm" EXPECT3="by recursive halving" \
  run collectives_3_ranks_log_steps 3 collectives env RINGO_ALGO=doubling

# Two processes of one host, each with its own /dev/shm.
name=separate_dev_shm_2_ranks
if [ "$(id -u)" -ne 0 ]; then
  junit_case $name skip "mounting a private /dev/shm needs root"
elif ! command -v unshare >/dev/null; then
  junit_case $name skip "unshare is not installed"
elif ! unshare -m --propagation private sh -c 'mount -t tmpfs tmpfs /dev/shm' 2>/dev/null; then
  junit_case $name skip "this machine refuses a private mount namespace"
else
  RANK_ENV="RINGO_HOSTID=" EXPECT="shares this host but not its shared memory" \
    run $name 2 sweep unshare -m --propagation private sh -c 'mount -t tmpfs tmpfs /dev/shm && exec "$@"' sh
fi

junit_failed && { echo "logs in $LOGS"; exit 1; }
rm -rf "$LOGS"
exit 0
