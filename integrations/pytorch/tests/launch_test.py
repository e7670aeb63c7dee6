#!/usr/bin/python3
"""examples/ddp_train.py, an ordinary DDP script, launched as users launch
it: torchrun --nproc_per_node 2 (with the --redirects 1 --tee 1 --log_dir
DIR that Debian's torchrun on Python 3.11 needs), and Open MPI's mpirun -np 2
(the ranks' RANK/WORLD_SIZE taken from OMPI_COMM_WORLD_*). Each run must
exit 0 with both ranks on backend "ringo", every step's loss printed, and
equal parameter checksums; under torchrun the checksum must equal the one
the same script gets with --backend gloo (2 ranks: bit for bit).

Usage: launch_test.py <path to examples/ddp_train.py>
"""

import os
import re
import shutil
import socket
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

STEPS = 5


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(cmd, env, timeout=180):
    print("+ " + " ".join(cmd), flush=True)
    try:
        p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
        return p.returncode, p.stdout.decode(errors="replace")
    except subprocess.TimeoutExpired as e:
        return None, (e.stdout or b"").decode(errors="replace")


def check(output, backend, code):
    """Problems with one launch's output, and the checksum both ranks agree on."""
    problems = []
    if code != 0:
        problems.append("exit status %s" % code)
    sums = {}
    for rank in (0, 1):
        # torchrun --tee prefixes each line with the rank's name ("[default0]:").
        steps = re.findall(r"^(?:\[\w+\]:)?rank %d/2 step (\d+) loss ([0-9.e+-]+)$" % rank, output, re.M)
        if len(steps) != STEPS:
            problems.append("rank %d printed %d of %d steps" % (rank, len(steps), STEPS))
        m = re.search(r"^(?:\[\w+\]:)?rank %d/2 backend (\S+) params-checksum (\S+)$" % rank, output, re.M)
        if not m:
            problems.append("rank %d printed no checksum" % rank)
            continue
        if m.group(1).lower() != backend:
            problems.append("rank %d ran on backend %s" % (rank, m.group(1)))
        sums[rank] = m.group(2)
    if len(set(sums.values())) > 1:
        problems.append("checksums differ between ranks: %s" % sums)
    return problems, sums.get(0)


def main():
    script = os.path.abspath(sys.argv[1])
    report = harness.Report("launch")
    env = harness.child_env()
    torchrun = shutil.which("torchrun") or "/usr/bin/torchrun"
    sums = {}
    for backend in ("ringo", "gloo"):
        logs = harness.scratch_dir()
        cmd = [torchrun, "--nproc_per_node", "2", "--redirects", "1", "--tee", "1", "--log_dir", logs,
               "--master_addr", "127.0.0.1", "--master_port", str(free_port()),
               script, "--steps", str(STEPS), "--backend", backend]
        code, out = run(cmd, env)
        print(out)
        problems, sums[backend] = check(out, backend, code)
        report.add("torchrun_2ranks.%s" % backend, "failed" if problems else "passed",
                   "; ".join(problems) + ("" if not problems else "; output ends: " + harness.tail(out)))
    if sums.get("ringo") and sums.get("gloo"):
        same = sums["ringo"] == sums["gloo"]
        report.add("torchrun_2ranks.ringo_equals_gloo", "passed" if same else "failed",
                   "" if same else "checksum %s with ringo, %s with gloo" % (sums["ringo"], sums["gloo"]))

    # Open MPI derives its prefix from the path it was started by: /bin/mpirun
    # (the first on Bazel's PATH on a merged-/usr system) gives "/", refused.
    mpirun = "/usr/bin/mpirun" if os.path.exists("/usr/bin/mpirun") else shutil.which("mpirun")
    if not mpirun:
        report.add("mpirun_2ranks.ringo", "skipped", "mpirun not installed")
    else:
        # Open MPI refuses root without these; the isolated launcher starts
        # the ranks locally. Ringo does not use MPI: mpirun only starts them.
        env.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                    "OMPI_MCA_plm": "isolated", "OMPI_MCA_btl": "self,vader",
                    "OMPI_MCA_btl_vader_single_copy_mechanism": "none",
                    "OMPI_MCA_rmaps_base_oversubscribe": "1",
                    "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port())})
        ranks_from_mpi = ('RANK=$OMPI_COMM_WORLD_RANK WORLD_SIZE=$OMPI_COMM_WORLD_SIZE '
                          'LOCAL_RANK=$OMPI_COMM_WORLD_LOCAL_RANK exec "$0" "$@"')
        # Each rank's output in a file of its own: mpirun's merged stream may
        # split a line of one rank around another's.
        outdir = harness.scratch_dir()
        cmd = [mpirun, "--allow-run-as-root", "--oversubscribe", "--output-filename", outdir, "-np", "2", "-x", "MASTER_ADDR", "-x",
               "MASTER_PORT", "-x", "PYTHONPATH", "-x", "OMP_NUM_THREADS", "-x", "RINGO_SOCKET_IFNAME",
               "/bin/sh", "-c", ranks_from_mpi, harness.PYTHON, script, "--steps", str(STEPS)]
        code, merged = run(cmd, env)
        print(merged)
        out = ""  # (mpirun also echoes every rank, merged: parse the files)
        for rank in (0, 1):
            for stream in ("stdout", "stderr"):
                path = os.path.join(outdir, "1", "rank.%d" % rank, stream)
                if os.path.exists(path):
                    with open(path, errors="replace") as f:
                        out += f.read()
        problems, _ = check(out, "ringo", code)
        report.add("mpirun_2ranks.ringo", "failed" if problems else "passed",
                   "; ".join(problems) + ("" if not problems else "; output ends: " + harness.tail(out)))
    sys.exit(report.finish())


if __name__ == "__main__":
    main()
