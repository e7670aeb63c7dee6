#!/usr/bin/env bash
# Several NICs per host, each used in proportion to its speed: two
# network-namespace hosts (cluster.sh) joined by two links, each in a subnet
# of its own, both selected by RINGO_SOCKET_IFNAME, shaped with tc.
#   - one_channel_per_device: the ring runs a channel on each link (the INFO
#     lines name both devices), results verified;
#   - split_by_rate: links shaped to 400 and 100 Mbit/s: the split the ranks
#     agree on gives the slow link's channel 10-35% (its rate: 20%), and the
#     all-reduce's bus bandwidth is at least 0.7 of the two links' sum, where
#     equal parts could reach 0.4 of it (twice the slower link);
#   - even_split_when_off: RINGO_NET_BALANCE=0 keeps equal parts (no split is
#     adopted) and so runs at about twice the slower link, at most 0.55 of the sum;
#   - follows_a_slowdown: two 300 Mbit/s links, one shaped down to 75 Mbit/s
#     mid-loop: a new split gives the slowed channel 10-35%, and the last
#     seconds run at 0.7 of the two links' new sum or more.
# Usage: multinic_test.sh RINGO_PERF NIC_TIMELINE
set -u
PERF=$(readlink -f "$1")
TIMELINE=$(readlink -f "$2")
HERE=$(dirname "$(readlink -f "$0")")
source "$HERE/cluster.sh"
source "$HERE/../testlib/junit.sh"
junit_init multinic
CASES=(one_channel_per_device split_by_rate even_split_when_off follows_a_slowdown)
if ! why=$(cluster_require 2>&1); then
  junit_skip_all "${why#SKIPPED: }" "${CASES[@]}"
  exit 0
fi
command -v tc >/dev/null 2>&1 || { junit_skip_all "tc is not installed" "${CASES[@]}"; exit 0; }
LOGS=$(mktemp -d /tmp/ringo-multinic.XXXXXX)
cluster_up 2 || { junit_skip_all "could not build the cluster" "${CASES[@]}"; exit 1; }
cluster_second_link || { junit_skip_all "could not add the second link" "${CASES[@]}"; exit 1; }
export RINGO_TIMEOUT_MS=60000 RINGO_DEBUG=INFO
export RINGO_SOCKET_IFNAME="$(host_ifname 0 | sed 's/0$//'),$(host_ifname2 0 | sed 's/0$//')"

shape_links() {  # RATE_A RATE_B: both hosts' egress on each link
  local i
  for i in 0 1; do host_shape "$i" "$1" && host_shape2 "$i" "$2" || return 1; done
}

# run_pair NAME ENV... -- PROGRAM ARGS...: one rank on each host, waits for both.
run_pair() {
  local name=$1; shift
  local envs=() r pids=() port=$(( 20000 + RANDOM % 30000 )) status=0
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
  for r in 0 1; do
    host_spawn "$r" env RANK=$r WORLD_SIZE=2 RINGO_COMM_ID="$(host_addr 0):$port" "${envs[@]}" "$@" \
      > "$LOGS/$name.rank$r.log" 2>&1
    pids+=($SPAWNED_PID)
  done
  for r in 0 1; do wait "${pids[$r]}" || status=1; done
  return $status
}

# busbw MB/s of the CSV's rows (out of place and in place), their mean.
csv_busbw() {
  awk -F, 'NR > 1 { s += $8 + $12; n += 2 } END { if (n) printf "%.1f", s / n * 1000 }' "$1"
}

# The slow channel's part of 4096 in the last split rank 0 logged ("" if none).
last_slow_part() {
  grep "ring channels' split" "$1" | tail -n 1 | sed -E "s/.*split ([0-9]+)\/([0-9]+) of 4096.*/\2/"
}

check() {  # NAME CONDITION MESSAGE
  if eval "$2"; then junit_case "$1" pass; else junit_case "$1" fail "$3"; fi
}

# 1. A channel on each device.
shape_links 400mbit 100mbit || { junit_skip_all "tc could not shape the links" "${CASES[@]}"; exit 1; }
name=one_channel_per_device
if run_pair $name -- "$PERF" allreduce --host -b 1M -e 4M -f 2 -n 3 -w 1 -c 1; then
  log="$LOGS/$name.rank0.log"
  check $name "grep -q 'channel 0) takes socket.*device $(host_ifname 0)' '$log' &&
               grep -q 'channel 1) takes socket.*device $(host_ifname2 0)' '$log' &&
               grep -q '2 channel(s)' '$log' && ! grep -q 'wrong [1-9]' '$log'" \
    "expected channels 0 and 1 on $(host_ifname 0) and $(host_ifname2 0): $(grep -E 'takes|channel\(s\)' "$log" | head -n 5)"
else
  junit_case $name fail "ringo-perf failed: $(tail -n 3 "$LOGS/$name.rank0.log")"
fi

# 2. The split follows the rates: 400 + 100 Mbit/s = 62.5 MB/s each way.
SUM=62.5
name=split_by_rate
if run_pair $name -- "$PERF" allreduce --host -b 8M -e 8M -n 12 -w 2 -c 1 --csv "$LOGS/$name.csv"; then
  slow=$(last_slow_part "$LOGS/$name.rank0.log")
  bw=$(csv_busbw "$LOGS/$name.csv")
  echo "  $name: slow channel's part ${slow:-none} of 4096, busbw $bw MB/s of $SUM"
  check $name "[ -n '$slow' ] && [ '$slow' -ge 410 ] && [ '$slow' -le 1434 ] &&
               awk 'BEGIN { exit !($bw >= 0.7 * $SUM) }'" \
    "slow channel's part ${slow:-none} of 4096 (want 410-1434), busbw $bw MB/s (want >= 0.7 x $SUM)"
else
  junit_case $name fail "ringo-perf failed: $(tail -n 3 "$LOGS/$name.rank0.log")"
fi

name=even_split_when_off
if run_pair $name RINGO_NET_BALANCE=0 -- "$PERF" allreduce --host -b 8M -e 8M -n 6 -w 1 -c 1 --csv "$LOGS/$name.csv"; then
  bw=$(csv_busbw "$LOGS/$name.csv")
  echo "  $name: busbw $bw MB/s of $SUM"
  check $name "! grep -q \"channels' split\" '$LOGS/$name.rank0.log' && awk 'BEGIN { exit !($bw <= 0.55 * $SUM) }'" \
    "with RINGO_NET_BALANCE=0: busbw $bw MB/s (want <= 0.55 x $SUM), $(grep -c "channels' split" "$LOGS/$name.rank0.log") split(s) adopted"
else
  junit_case $name fail "ringo-perf failed: $(tail -n 3 "$LOGS/$name.rank0.log")"
fi

# 3. Two equal links, one slowed mid-loop (once the loop has run 3 s).
name=follows_a_slowdown
shape_links 300mbit 300mbit
out="$LOGS/$name.rank0.log"
(
  for ((tries = 0; tries < 600; tries++)); do
    awk '$1 ~ /^[0-9.]+$/ && $1 >= 3 { found = 1 } END { exit !found }' "$out" 2>/dev/null && break
    sleep 0.05
  done
  for i in 0 1; do host_shape2 "$i" 75mbit; done
  echo "changed" > "$LOGS/$name.changed"
) &
changer=$!
if run_pair $name -- "$TIMELINE" $((4 << 20)) 14; then
  wait $changer
  slow=$(last_slow_part "$out")
  # The last 3 s: 300 + 75 Mbit/s = 46.9 MB/s each way.
  bw=$(awk '$1 ~ /^[0-9.]+$/ { t[NR] = $1; b[NR] = $2; last = $1 } END { for (k in t) if (t[k] >= last - 3) { s += b[k]; n++ } if (n) printf "%.1f", s / n }' "$out")
  echo "  $name: slow channel's part ${slow:-none} of 4096, last 3 s at ${bw:-?} MB/s of 46.9"
  check $name "[ -s '$LOGS/$name.changed' ] && [ -n '$slow' ] && [ '$slow' -ge 410 ] && [ '$slow' -le 1434 ] &&
               [ -n '$bw' ] && awk 'BEGIN { exit !($bw >= 0.7 * 46.9) }'" \
    "slow channel's part ${slow:-none} of 4096 (want 410-1434), last 3 s ${bw:-?} MB/s (want >= 0.7 x 46.9)"
else
  kill $changer 2>/dev/null
  junit_case $name fail "nic_timeline failed: $(tail -n 3 "$out")"
fi

echo "logs in $LOGS"
junit_failed && exit 1
rm -rf "$LOGS"
exit 0
