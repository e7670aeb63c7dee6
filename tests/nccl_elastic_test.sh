#!/bin/bash
# Runs nccl_elastic_test.c, a program built for NCCL's shrink and grow
# calls, on Ringo's libnccl.so.2 found through LD_LIBRARY_PATH.
set -euo pipefail
program=$1
library=$2
work=$(mktemp -d "${TEST_TMPDIR:-/tmp}/nccl_elastic.XXXXXX")
trap 'rm -rf "$work"' EXIT
cp "$library" "$work/libnccl.so.2"
LD_LIBRARY_PATH="$work" "$program"
echo "nccl_elastic_test: PASS"
