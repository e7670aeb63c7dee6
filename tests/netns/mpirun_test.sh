#!/usr/bin/env bash
# ringo-perf across hosts under the launchers people use, on the test
# cluster (cluster.sh): Open MPI's mpirun (its remote shell enters the host
# namespaces, rsh_agent.sh), a Slurm-like environment (SLURM_PROCID,
# SLURM_NTASKS) and torchrun's (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT),
# 2 and 3 hosts, every result verified.
# Usage: mpirun_test.sh RINGO_PERF [ringo-perf arguments]
set -u
PERF=$(readlink -f "$1"); shift
ARGS=("$@")
[ ${#ARGS[@]} -gt 0 ] || ARGS=(-b 8 -e 64M -f 8 -n 5 -w 1 -c 1)
HERE=$(dirname "$(readlink -f "$0")")
source "$HERE/cluster.sh"
source "$HERE/../testlib/junit.sh"
junit_init launchers
CASES=("ringo-perf under mpirun, 2 hosts" "ringo-perf under mpirun, 3 hosts"
       "ringo-perf with Slurm's environment, 2 hosts" "ringo-perf with torchrun's environment, 3 hosts")
# Each host's own interface, not the loopback the single-host tests use.
unset RINGO_SOCKET_IFNAME
export RINGO_TIMEOUT_MS=${RINGO_TIMEOUT_MS:-60000}
if ! why=$(cluster_require 2>&1); then
  junit_skip_all "${why#SKIPPED: }" "${CASES[@]}"
  exit 0
fi
command -v mpirun >/dev/null || { junit_skip_all "mpirun is not installed" "${CASES[@]}"; exit 0; }
LOGS=$(mktemp -d /tmp/ringo-launchers.XXXXXX)
cluster_up 3 || { junit_skip_all "could not build the cluster" "${CASES[@]}"; exit 1; }
export CLUSTER_DIR CLUSTER_PREFIX CLUSTER_ID
NET="10.231.${CLUSTER_ID}.0/24"

verdict() {  # NAME STATUS LOG...
  local name=$1 status=$2; shift 2
  if [ "$status" -eq 0 ] && ! grep -q "FAILED\|#wrong.*[1-9]" "$@" && grep -q "Out of bounds values : 0 OK" "$@"; then
    junit_case "$name" pass
  else
    junit_case "$name" fail "status $status"
    tail -n 20 "$@"
  fi
}

for n in 2 3; do
  hosts=""
  for ((i = 0; i < n; i++)); do hosts+="${hosts:+,}$(host_addr $i):1"; done
  port=$(( 20000 + RANDOM % 30000 ))
  timeout 300 nsenter -t "$(host_pid 0)" --uts --mount --net -- \
    mpirun --allow-run-as-root --oversubscribe -np "$n" -H "$hosts" \
      --mca plm_rsh_agent "$HERE/rsh_agent.sh" --mca plm_rsh_no_tree_spawn 1 \
      --mca btl self,tcp --mca btl_tcp_if_include "$NET" --mca oob_tcp_if_include "$NET" \
      -x RINGO_COMM_ID="$(host_addr 0):$port" -x RINGO_TIMEOUT_MS -x PATH \
      "$PERF" allreduce "${ARGS[@]}" > "$LOGS/mpirun$n.log" 2>&1
  verdict "ringo-perf under mpirun, $n hosts" $? "$LOGS/mpirun$n.log"
done

# Slurm-like: every task gets SLURM_PROCID/SLURM_NTASKS; RINGO_COMM_ID names rank 0.
port=$(( 20000 + RANDOM % 30000 ))
pids=()
for ((r = 0; r < 2; r++)); do
  host_spawn $r env SLURM_PROCID=$r SLURM_NTASKS=2 SLURM_NNODES=2 SLURM_JOB_ID=7 SLURM_STEP_ID=0 \
    RINGO_COMM_ID="$(host_addr 0):$port" "$PERF" allreduce "${ARGS[@]}" > "$LOGS/slurm$r.log" 2>&1
  pids+=($SPAWNED_PID)
done
st=0; for p in "${pids[@]}"; do wait "$p" || st=1; done
verdict "ringo-perf with Slurm's environment, 2 hosts" $st "$LOGS/slurm0.log"

# torchrun-like: the rendezvous from MASTER_ADDR (Ringo listens on MASTER_PORT + 1).
port=$(( 20000 + RANDOM % 30000 ))
pids=()
for ((r = 0; r < 3; r++)); do
  host_spawn $r env RANK=$r WORLD_SIZE=3 LOCAL_RANK=0 MASTER_ADDR="$(host_addr 0)" MASTER_PORT=$port \
    "$PERF" allreduce "${ARGS[@]}" > "$LOGS/torchrun$r.log" 2>&1
  pids+=($SPAWNED_PID)
done
st=0; for p in "${pids[@]}"; do wait "$p" || st=1; done
verdict "ringo-perf with torchrun's environment, 3 hosts" $st "$LOGS/torchrun0.log"

echo "logs in $LOGS"
junit_failed && exit 1
rm -rf "$LOGS"
exit 0
