#!/usr/bin/env bash
# Open MPI's remote shell for the test cluster (cluster.sh): instead of ssh
# to HOST, run the command inside that host's namespaces. Open MPI calls it
# as `rsh_agent.sh [options] HOST COMMAND...` and, as with ssh, the command
# is a shell command line.
while [ $# -gt 0 ] && [ "${1#-}" != "$1" ]; do shift; done
host=$1; shift
i=$(( ${host##*.} - 1 ))  # 10.231.ID.(i+1) is host i
pid=$(cat "$CLUSTER_DIR/host$i.pid") || { echo "rsh_agent: unknown host $host" >&2; exit 255; }
exec nsenter -t "$pid" --uts --mount --net -- sh -c "$*"
