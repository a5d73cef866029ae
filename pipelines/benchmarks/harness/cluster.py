"""Where a measurement runs: the LocalCluster lsdask starts, or a fresh process.

A measurement of peak memory must own its process (and its workers), so it
runs in a fresh Python process: the benchmark script starts itself again with
child options, the child prints its measurements as one tagged JSON line
(:func:`emit`), and :func:`run_fresh` reads them back, optionally killing the
whole process tree once it holds more memory than a limit (the machine is
shared).
"""

from __future__ import annotations

import json
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import REPO
from harness.memory import tree_rss_bytes

#: the prefix of the one line a child prints its measurements on
TAG = "BENCH_JSON "


def local_cluster(n_workers: int) -> tuple[Any, Any]:
    """The LocalCluster lsdask starts itself for a fit (processes, one thread each,
    loopback only, the workers' profiler off:
    :func:`lsdask.engine.dask_executor.start_local_cluster`) and its client.

    The scheduler lives in this process, where a peer (tomotopy) may hold the GIL
    for minutes: its workers' heartbeats then go unread, and past the scheduler's
    ``worker-ttl`` it would kill the idle workers. The check is off for the
    benchmark's cluster."""
    import dask
    from distributed import Client

    from lsdask.engine.dask_executor import start_local_cluster

    with dask.config.set({"distributed.scheduler.worker-ttl": None}):
        cluster = start_local_cluster(n_workers)
    return cluster, Client(cluster)


def emit(result: dict[str, Any]) -> None:
    """Print a child's measurements as the tagged JSON line :func:`run_fresh` reads."""
    print(TAG + json.dumps(result), flush=True)


@dataclass
class Fresh:
    """What came back from a fresh process."""

    result: dict[str, Any] | None  # the child's measurements; None when it failed
    failed: str | None  # why it failed
    stderr: str
    tree_peak_bytes: int  # the largest memory of its tree seen while polling (0: not polled)


def kill_tree(proc: Any) -> None:
    """Kill a process started here and its descendants, by process id."""
    import psutil

    procs = [*proc.children(recursive=True), proc]
    for p in procs:
        try:
            p.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(procs, timeout=10)


def run_fresh(cmd: list[str], max_tree_gib: float | None = None) -> Fresh:
    """Run ``cmd`` (a child of a benchmark script) in a fresh process from the
    repository's root; return its tagged JSON line.

    With ``max_tree_gib`` the memory of the child and its Dask workers is
    polled every half second and the whole tree is killed above the limit.
    """
    import psutil

    limit = None if max_tree_gib is None else max_tree_gib * 2**30
    peak, killed = 0, False
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-child-") as tmp:
        out_path, err_path = Path(tmp) / "out", Path(tmp) / "err"
        with open(out_path, "w") as out, open(err_path, "w") as err:
            proc = psutil.Popen(cmd, stdout=out, stderr=err, text=True, cwd=REPO)
            try:
                while limit is not None and proc.poll() is None:
                    peak = max(peak, tree_rss_bytes(proc))
                    if peak > limit:
                        killed = True
                        kill_tree(proc)
                        break
                    time.sleep(0.5)
            except BaseException:
                kill_tree(proc)
                raise
            returncode = proc.wait()
        stdout, stderr = out_path.read_text(), err_path.read_text()
    lines = [ln for ln in stdout.splitlines() if ln.startswith(TAG)]
    if killed:
        failed = (
            f"killed: driver + workers RSS {peak / 2**30:.1f} GiB passed the "
            f"{max_tree_gib:.1f} GiB limit after {time.perf_counter() - t0:.0f} s"
        )
    elif returncode != 0 or not lines:
        failed = f"exit status {returncode}"
    else:
        return Fresh(json.loads(lines[-1][len(TAG) :]), None, stderr, peak)
    return Fresh(None, failed, stderr, peak)
