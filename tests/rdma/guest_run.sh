#!/bin/sh
# Runs inside the SoftRoCE guest (rxe_vm.sh): the verbs suite. Ranks are
# processes with distinct RINGO_HOSTIDs, so every ring edge crosses "hosts"
# and RINGO_NET=ib makes it take verbs over rxe0 (RINGO_IB_HCA), but for
# the case that spreads ring channels over rxe0 and rxe1.
export RINGO_TEST_REQUIRE_IB=1 RINGO_SOCKET_IFNAME=lo RINGO_TIMEOUT_MS=60000 RINGO_NET=ib RINGO_IB_HCA=rxe0
set -o pipefail
fail=0
up() { cut -d' ' -f1 /proc/uptime; }
verdict() {  # NAME STATUS
  if [ "$2" -eq 0 ]; then echo "@@PASS $1 (at $(up) s)"; else echo "@@FAIL $1 (status $2, at $(up) s)"; fail=1; fi
}
# launch NAME N ARGS...: N ranks of ./multihost; waits for all; status 0 if all passed.
launch() {
  name=$1; n=$2; shift 2
  port=$((20000 + ($(date +%s) % 20000)))
  pids=""
  r=0
  while [ $r -lt $n ]; do
    RANK=$r WORLD_SIZE=$n RINGO_COMM_ID=127.0.0.1:$port RINGO_HOSTID=guest-host$r ./multihost "$@" \
      >/tmp/$name.$r.log 2>&1 &
    pids="$pids $!"
    r=$((r + 1))
  done
  st=0
  for p in $pids; do wait $p || st=1; done
  tail -n 3 /tmp/$name.*.log
  return $st
}

ibv_devinfo -d rxe0 | grep -E 'hca_id|state|active_mtu|link_layer'

# Raw RDMA write throughput of this guest, the ceiling of what follows.
if command -v ib_write_bw >/dev/null; then
  ib_write_bw -d rxe0 -x 1 -s 1048576 -n 100 -F --report_gbits >/tmp/bw_server.log 2>&1 &
  sleep 1
  timeout 60 ib_write_bw -d rxe0 -x 1 -s 1048576 -n 100 -F --report_gbits 127.0.0.1 >/tmp/bw.log 2>&1
  echo "@@RAW $(grep -E '^ *1048576' /tmp/bw.log | tail -1)"
  wait
fi

./net_conformance_test --gtest_filter='*/ib' 2>&1 | tail -n 25
verdict net_conformance_ib $?
./ib_net_test 2>&1 | tail -n 12
verdict ib_faults $?

export RINGO_SLOT_BYTES=65536
launch sweep_2 2 reduced
verdict reduced_sweep_2_ranks $?
launch sweep_3 3 reduced
verdict reduced_sweep_3_ranks $?
unset RINGO_SLOT_BYTES

# ringo-perf over verbs, 2 ranks, verified.
port=$((20000 + ($(date +%s) % 20000) + 7))
for r in 0 1; do
  RANK=$r WORLD_SIZE=2 RINGO_COMM_ID=127.0.0.1:$port RINGO_HOSTID=perf-host$r RINGO_DEBUG=INFO \
    ./ringo-perf allreduce --host -b 8 -e 4M -f 4 -n 5 -w 1 -c 1 >/tmp/perf.$r.log 2>&1 &
done
wait
grep -E "takes ib|takes socket" /tmp/perf.0.log | head -2
grep -vE "ringo INFO|^#  Rank" /tmp/perf.0.log | tail -n 12
grep -q "takes ib" /tmp/perf.0.log && grep -q "Out of bounds values : 0 OK" /tmp/perf.0.log &&
  ! grep -qE "FAILED|#wrong.*[1-9]" /tmp/perf.0.log
verdict ringo_perf_over_verbs $?

# The compressed wire over verbs: bf16 and block-scaled e4m3 sums between
# the two "hosts", verified within the wire's roundings.
st=0
for w in bf16 e4m3; do
  port=$((20000 + ($(date +%s) % 20000) + 11))
  for r in 0 1; do
    RANK=$r WORLD_SIZE=2 RINGO_COMM_ID=127.0.0.1:$port RINGO_HOSTID=wire-host$r RINGO_DEBUG=INFO \
      ./ringo-perf allreduce --host --wire $w -b 64K -e 4M -f 4 -n 3 -w 1 -c 1 >/tmp/wire_$w.$r.log 2>&1 &
  done
  wait
  grep -vE "ringo INFO|^#  Rank" /tmp/wire_$w.0.log | tail -n 6
  grep -q "takes ib" /tmp/wire_$w.0.log && grep -q "wire $w: " /tmp/wire_$w.0.log &&
    grep -q "Out of bounds values : 0 OK" /tmp/wire_$w.0.log && ! grep -qE "FAILED|#wrong.*[1-9]" /tmp/wire_$w.0.log ||
    st=1
done
verdict wire_over_verbs $st

# Two verbs devices: a ring channel on each, each collective split by the
# channels' measured rates, results verified.
port=$((20000 + ($(date +%s) % 20000) + 17))
for r in 0 1; do
  RANK=$r WORLD_SIZE=2 RINGO_COMM_ID=127.0.0.1:$port RINGO_HOSTID=nics-host$r RINGO_DEBUG=INFO RINGO_IB_HCA=rxe0,rxe1 \
    ./ringo-perf allreduce --host -b 4M -e 8M -f 2 -n 4 -w 1 -c 1 >/tmp/nics.$r.log 2>&1 &
done
wait
grep -E "takes ib|ring channels|channels' split" /tmp/nics.0.log | sed 's/.*ringo INFO [^ ]* //' | head -6
grep -vE "ringo INFO|^#  Rank" /tmp/nics.0.log | tail -n 5
grep -q "(channel 0) takes ib.*device rxe0" /tmp/nics.0.log && grep -q "(channel 1) takes ib.*device rxe1" /tmp/nics.0.log &&
  grep -q "2 ring channels over 2 network device" /tmp/nics.0.log && grep -q "channels' split" /tmp/nics.0.log &&
  grep -q "Out of bounds values : 0 OK" /tmp/nics.0.log && ! grep -qE "FAILED|#wrong.*[1-9]" /tmp/nics.0.log
verdict two_devices_over_verbs $?

# A killed peer: the survivors fail naming it. The victim dies once every
# rank has logged "ready" (its first all-reduce done): mid-stream, never
# during init (at most 120 s in this emulated machine).
port=$((20000 + ($(date +%s) % 20000) + 13))
for r in 0 1 2; do
  mode="survive 1"
  [ $r -eq 1 ] && mode=victim
  RANK=$r WORLD_SIZE=3 RINGO_COMM_ID=127.0.0.1:$port RINGO_HOSTID=kill-host$r ./multihost $mode \
    >/tmp/kill.$r.log 2>&1 &
  eval "pid$r=$!"
done
for r in 0 1 2; do
  for _ in $(seq 1200); do
    grep -q "rank $r: ready" /tmp/kill.$r.log 2>/dev/null && break
    sleep 0.1
  done
done
kill -9 "$pid1"
st=0
wait "$pid0" || st=1
wait "$pid2" || st=1
cat /tmp/kill.0.log /tmp/kill.2.log | tail -n 4
verdict killed_peer_named $st

exit $fail
