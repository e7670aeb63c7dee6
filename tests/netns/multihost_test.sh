#!/usr/bin/env bash
# Communicators across hosts, for real: a cluster of network namespaces
# (cluster.sh), ranks started on them as a launcher would (RANK, WORLD_SIZE,
# RINGO_COMM_ID), TCP between hosts and shared memory within one.
#   - the conformance sweep on 2 hosts x 1 rank, 2 x 2, 3 x 1, 2 x 3, and 2 x 1
#     over IPv6;
#   - faults: a rank killed on the other host, a host's link taken down
#     mid-collective, a peer that writes garbage on its data connections:
#     every survivor fails within RINGO_TIMEOUT_MS naming the rank;
#   - hangs: a rank on another host that sleeps before a collective is named
#     by every other rank's diagnosis (over the control connections, long
#     before the timeout), and one that is stopped is reported silent, on
#     another host, in the error RINGO_STALL_ABORT gives.
# Usage: multihost_test.sh MULTIHOST_BINARY
set -u
BIN=$(readlink -f "$1")
HERE=$(dirname "$(readlink -f "$0")")
source "$HERE/cluster.sh"
source "$HERE/../testlib/junit.sh"
junit_init multihost
CASES=(sweep_2x1 sweep_2x2 sweep_3x1 sweep_2x3 sweep_2x1_ipv6 kill_remote_rank link_down garbage_on_data_port
       hang_sleep_remote hang_stopped_remote)
# Each host's own interface, not the loopback the single-host tests use.
unset RINGO_SOCKET_IFNAME
if ! why=$(cluster_require 2>&1); then
  junit_skip_all "${why#SKIPPED: }" "${CASES[@]}"
  exit 0
fi
LOGS=$(mktemp -d /tmp/ringo-multihost.XXXXXX)

cluster_up 3 || { junit_skip_all "could not build the cluster" "${CASES[@]}"; exit 1; }

# await_ready NAME N: waits (30 s at most) until each of the case's N ranks
# has logged "ready" (its first all-reduce done), so that DURING strikes
# mid-stream and never during init.
await_ready() {
  local name=$1 n=$2 r tries
  for ((r = 0; r < n; r++)); do
    for ((tries = 0; tries < 600; tries++)); do
      grep -q "rank $r: ready" "$LOGS/$name.rank$r.log" 2>/dev/null && break
      sleep 0.05
    done
  done
}

# launch NAME "HOSTS" ARGS... : rank r runs on host HOSTS[r]; waits for all.
# Each rank's own arguments may differ: RANK_ARGS_<r> overrides ARGS.
launch() {
  local name=$1 hosts=($2); shift 2
  local n=${#hosts[@]} port=$(( 20000 + RANDOM % 30000 )) r pids=()
  local comm_id="$(host_addr "${hosts[0]}"):$port"
  [ -n "${IPV6:-}" ] && comm_id="[$(host_addr6 "${hosts[0]}")]:$port"
  for ((r = 0; r < n; r++)); do
    local args_var="RANK_ARGS_$r"
    local args=("$@")
    [ -n "${!args_var:-}" ] && read -r -a args <<< "${!args_var}"
    host_spawn "${hosts[$r]}" env RANK=$r WORLD_SIZE=$n RINGO_COMM_ID="$comm_id" \
      ${EXTRA_ENV:-} "$BIN" "${args[@]}" > "$LOGS/$name.rank$r.log" 2>&1
    pids+=($SPAWNED_PID)
    RANK_PIDS[$r]=$SPAWNED_PID
  done
  [ -n "${DURING:-}" ] && eval "$DURING"
  local status=0
  for ((r = 0; r < n; r++)); do
    [ -n "${VICTIM:-}" ] && [ "$r" = "$VICTIM" ] && continue
    wait "${pids[$r]}" || status=1
  done
  if [ -n "${VICTIM:-}" ]; then  # it never ends by itself
    kill -9 "${pids[$VICTIM]}" 2>/dev/null
    wait "${pids[$VICTIM]}" 2>/dev/null
  fi
  if [ -n "${POSTCHECK:-}" ] && ! eval "$POSTCHECK"; then
    echo "  $name: $POSTCHECK failed"
    status=1
  fi
  if [ $status -eq 0 ]; then junit_case "$name" pass; else junit_case "$name" fail "see its ranks' logs"; fi
  for ((r = 0; r < n; r++)); do sed "s/^/  $name rank $r: /" "$LOGS/$name.rank$r.log" | tail -n 4; done
}

export RINGO_TIMEOUT_MS=20000
# The sweep's counts take the multi-chunk paths with 64-byte slots.
EXTRA_ENV="RINGO_SLOT_BYTES=64"
launch sweep_2x1 "0 1" sweep
launch sweep_2x2 "0 0 1 1" sweep
launch sweep_3x1 "0 1 2" sweep
launch sweep_2x3 "0 0 0 1 1 1" sweep
IPV6=1 EXTRA_ENV="RINGO_SLOT_BYTES=64 RINGO_SOCKET_FAMILY=ipv6" launch sweep_2x1_ipv6 "0 1" sweep
EXTRA_ENV=""

export RINGO_TIMEOUT_MS=3000
# A rank on the other host killed mid-stream (ranks 0, 1 on host 0; 2, 3 on host 1).
VICTIM=2 RANK_ARGS_2="victim" DURING='await_ready $name $n; kill -9 ${RANK_PIDS[2]}' \
  launch kill_remote_rank "0 0 1 1" survive 2
# Host 1's link down mid-collective: each side names the other.
RANK_ARGS_1="survive 0" DURING="await_ready \$name \$n; ip -n $(host_ns 1) link set $(host_ifname 1) down" \
  launch link_down "0 1" survive 1
ip -n "$(host_ns 1)" link set "$(host_ifname 1)" up
# A peer that writes garbage on its data connections.
VICTIM=1 RANK_ARGS_1="garbage" POSTCHECK='grep -q "not a Ringo frame" "$LOGS/garbage_on_data_port.rank0.log"' \
  launch garbage_on_data_port "0 1" survive 1

# Hangs. Ranks 0, 1 on host 0, 2 on host 1, 3 on host 2; rank 3 sleeps 5 s
# before its 6th all-reduce; the stall threshold is 1.5 s.
export RINGO_TIMEOUT_MS=30000
EXTRA_ENV="RINGO_STALL_MS=1500" \
  POSTCHECK='(for r in 0 1 2; do grep -q "rank 3 has not entered AllReduce #" "$LOGS/hang_sleep_remote.rank$r.log" && grep -q "outside Ringo" "$LOGS/hang_sleep_remote.rank$r.log" || exit 1; done)' \
  launch hang_sleep_remote "0 0 1 2" hang_sleep 3 5
# Rank 1 (host 1) stopped with SIGSTOP mid-loop; rank 0 aborts at the
# diagnosis, which must report rank 1 silent and on another host.
EXTRA_ENV="RINGO_STALL_MS=1000 RINGO_STALL_ABORT=1 RINGO_CONTROL_TIMEOUT_MS=300" VICTIM=1 RANK_ARGS_1="victim" \
  DURING='await_ready $name $n; kill -STOP ${RANK_PIDS[1]}' \
  launch hang_stopped_remote "0 1" hang_stopped 1

echo "logs in $LOGS"
junit_failed && exit 1
rm -rf "$LOGS"
exit 0
