#!/usr/bin/env bash
# A small cluster inside this machine, for tests and benchmarks that cross
# hosts (sourced, not run). Each host is a network namespace with its own
# host name (UTS namespace) and its own /dev/shm (a mount namespace), so
# nothing but the network joins the hosts; the hosts meet on a bridge in a
# namespace of its own, through veth pairs. Root only. Everything is removed
# by cluster_down, which cluster_up arranges to run on exit.
#
#   cluster_up N          make hosts 0..N-1 (10.231.X.1.. and fd31:X::1..)
#   host_run I CMD...     run CMD on host I (in its namespaces), wait for it
#   host_spawn I CMD...   the same in the background; prints nothing, sets SPAWNED_PID
#   host_addr I           host I's IPv4 address
#   host_ifname I         host I's interface name (inside its namespace)
#   host_shape I RATE     limit host I's egress to RATE (tc tbf, e.g. 1gbit)
#   cluster_second_link   a second link for every host: its own bridge, its
#                         own subnet (10.232.X.1.., interface host_ifname2 I)
#   host_shape2 I RATE    limit host I's egress on the second link
#   cluster_down          remove everything (idempotent)
#
# Run as a command it keeps a cluster across calls (bench/ scripts):
#   cluster.sh up N ID | run ID I CMD... | shape ID I RATE | addr ID I | down ID
#   cluster.sh link2 ID | shape2 ID I RATE | addr2 ID I

# tc lives in sbin, which a test's PATH may lack.
case ":$PATH:" in *:/usr/sbin:*) ;; *) PATH="$PATH:/usr/sbin:/sbin" ;; esac

CLUSTER_ID=${CLUSTER_ID:-$(( ($$ % 200) + 20 ))}
CLUSTER_PREFIX="rg${CLUSTER_ID}"
CLUSTER_DIR=""
CLUSTER_N=0

cluster_require() {
  if [ "$(id -u)" -ne 0 ]; then
    echo "SKIPPED: network namespaces need root" >&2
    return 1
  fi
  for t in ip unshare nsenter; do
    command -v "$t" >/dev/null 2>&1 || { echo "SKIPPED: $t is not installed" >&2; return 1; }
  done
  return 0
}

host_ns() { echo "${CLUSTER_PREFIX}h$1"; }
host_ifname() { echo "${CLUSTER_PREFIX}e$1"; }
host_addr() { echo "10.231.${CLUSTER_ID}.$(( $1 + 1 ))"; }
host_ifname2() { echo "${CLUSTER_PREFIX}f$1"; }
host_addr2() { echo "10.232.${CLUSTER_ID}.$(( $1 + 1 ))"; }
host_addr6() { echo "fd31:${CLUSTER_ID}::$(( $1 + 1 ))"; }
host_pid() { cat "$CLUSTER_DIR/host$1.pid"; }

cluster_up() {
  local n=$1 i
  cluster_require || return 1
  if [ -n "${CLUSTER_KEEP:-}" ]; then  # the command form: a known folder, no teardown on exit
    CLUSTER_DIR="/tmp/ringo-cluster-${CLUSTER_PREFIX}"
    mkdir -p "$CLUSTER_DIR" && echo "$n" > "$CLUSTER_DIR/n"
  else
    CLUSTER_DIR=$(mktemp -d "/tmp/ringo-cluster-${CLUSTER_PREFIX}.XXXXXX")
    # Down first, then whatever the caller runs at exit (its test report).
    local previous
    previous=$(trap -p EXIT | sed -E "s/^trap -- '(.*)' EXIT\$/\1/")
    trap "cluster_down; ${previous}" EXIT
  fi
  CLUSTER_N=$n
  ip netns add "${CLUSTER_PREFIX}sw" || return 1
  ip -n "${CLUSTER_PREFIX}sw" link add br0 type bridge || return 1
  ip -n "${CLUSTER_PREFIX}sw" link set br0 up
  ip -n "${CLUSTER_PREFIX}sw" link set lo up
  for ((i = 0; i < n; i++)); do
    local ns; ns=$(host_ns "$i")
    ip netns add "$ns" || return 1
    ip link add "$(host_ifname "$i")" netns "$ns" type veth peer name "p$i" netns "${CLUSTER_PREFIX}sw" || return 1
    ip -n "${CLUSTER_PREFIX}sw" link set "p$i" master br0 up
    ip -n "$ns" link set lo up
    ip -n "$ns" addr add "$(host_addr "$i")/24" dev "$(host_ifname "$i")"
    ip -n "$ns" addr add "$(host_addr6 "$i")/64" dev "$(host_ifname "$i")" nodad
    ip -n "$ns" link set "$(host_ifname "$i")" up
    # A holder process per host keeps its UTS and mount namespaces: its own
    # host name and a private /dev/shm.
    ip netns exec "$ns" unshare --uts --mount --propagation private \
      sh -c "hostname ${CLUSTER_PREFIX}-host$i && mount -t tmpfs -o size=2g tmpfs /dev/shm && echo \$\$ > '$CLUSTER_DIR/host$i.pid' && exec sleep 100000" \
      </dev/null >/dev/null 2>&1 &
  done
  for ((i = 0; i < n; i++)); do
    local tries=0
    while [ ! -s "$CLUSTER_DIR/host$i.pid" ] && [ $tries -lt 100 ]; do sleep 0.05; tries=$((tries + 1)); done
    [ -s "$CLUSTER_DIR/host$i.pid" ] || { echo "host $i did not start" >&2; return 1; }
  done
  # Bridge ports forward at once (no STP); the ranks' connects retry anyway.
  return 0
}

host_run() {
  local i=$1; shift
  nsenter -t "$(host_pid "$i")" --uts --mount --net -- "$@"
}

host_spawn() {
  local i=$1; shift
  nsenter -t "$(host_pid "$i")" --uts --mount --net -- "$@" &
  SPAWNED_PID=$!
}

host_shape() {
  local i=$1 rate=$2
  # tbf: the rate, a burst of a few packets at that rate, 10 ms of queue.
  ip netns exec "$(host_ns "$i")" tc qdisc replace dev "$(host_ifname "$i")" root tbf rate "$rate" burst 256kb latency 10ms
}

cluster_second_link() {
  local i
  ip -n "${CLUSTER_PREFIX}sw" link add br1 type bridge || return 1
  ip -n "${CLUSTER_PREFIX}sw" link set br1 up
  for ((i = 0; i < CLUSTER_N; i++)); do
    local ns; ns=$(host_ns "$i")
    ip link add "$(host_ifname2 "$i")" netns "$ns" type veth peer name "q$i" netns "${CLUSTER_PREFIX}sw" || return 1
    ip -n "${CLUSTER_PREFIX}sw" link set "q$i" master br1 up
    ip -n "$ns" addr add "$(host_addr2 "$i")/24" dev "$(host_ifname2 "$i")"
    ip -n "$ns" link set "$(host_ifname2 "$i")" up
  done
}

host_shape2() {
  local i=$1 rate=$2
  ip netns exec "$(host_ns "$i")" tc qdisc replace dev "$(host_ifname2 "$i")" root tbf rate "$rate" burst 256kb latency 10ms
}

cluster_down() {
  local i
  [ -n "$CLUSTER_DIR" ] || return 0
  for ((i = 0; i < CLUSTER_N; i++)); do
    [ -s "$CLUSTER_DIR/host$i.pid" ] && kill "$(cat "$CLUSTER_DIR/host$i.pid")" 2>/dev/null
    ip netns pids "$(host_ns "$i")" 2>/dev/null | xargs -r kill -9 2>/dev/null
    ip netns del "$(host_ns "$i")" 2>/dev/null
  done
  ip netns del "${CLUSTER_PREFIX}sw" 2>/dev/null
  rm -rf "$CLUSTER_DIR"
  CLUSTER_DIR=""
}

# The command form.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  usage() { echo "usage: $0 up N ID | run ID I CMD... | shape ID I RATE | addr ID I | link2 ID | shape2 ID I RATE | addr2 ID I | down ID" >&2; exit 2; }
  cmd=${1:-}
  if [ "$cmd" = up ]; then n=${2:-}; CLUSTER_ID=${3:-}; else CLUSTER_ID=${2:-}; fi
  shift 2 2>/dev/null || usage
  [ -n "$cmd" ] && [[ $CLUSTER_ID =~ ^[0-9]+$ ]] && [ "$CLUSTER_ID" -le 255 ] || usage
  CLUSTER_PREFIX="rg${CLUSTER_ID}"
  CLUSTER_KEEP=1
  CLUSTER_DIR="/tmp/ringo-cluster-${CLUSTER_PREFIX}"
  [ -f "$CLUSTER_DIR/n" ] && CLUSTER_N=$(cat "$CLUSTER_DIR/n")
  case "$cmd" in
    up) [[ $n =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 8 ] || usage
        cluster_up "$n" || { cluster_down; exit 1; } ;;
    run) i=$1; shift; host_run "$i" "$@" ;;
    shape) host_shape "$1" "$2" ;;
    addr) host_addr "$1" ;;
    link2) cluster_second_link ;;
    shape2) host_shape2 "$1" "$2" ;;
    addr2) host_addr2 "$1" ;;
    down) cluster_down ;;
    *) echo "unknown command $cmd" >&2; exit 2 ;;
  esac
fi
