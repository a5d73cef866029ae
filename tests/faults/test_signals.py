"""SIGTERM and SIGINT between any two file-system steps of a command, then the same
command again: it finishes what was asked, and trains nothing more where the work
was committed.

The signal lands at an exact step without a knob in :mod:`lsdask.io.faults`: the
command's step log (``LSDASK_FS_LOG``) is a FIFO, which the command opens for
each step (:func:`lsdask.io.faults.fs_point`) and blocks in until this test opens
it to read. While the command waits there (its ``wchan`` reads
``wait_for_partner``) the steps before have been done and the next has not begun;
the signal is sent then, with ``k`` steps done (``k`` from 0 to n - 1; after the
last step nothing waits, so "after it" is not reached this way).

The signalled command ends with status 0, or as a stopped command does (143 or
130, or killed by the signal); the rerun must then end with status 0 and its
outputs must equal an undisturbed run's (the same model, the laps asked for and
no more; every document once; the same patches), with no temporary left. CI
sends SIGTERM after the step that commits each command's output and one signal of
each kind between earlier steps; ``LSDASK_FAULTS_FULL=1`` sends both signals at
every step.
"""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from lsdask.io.corpus import Corpus
from lsdask.persist import load_model
from tests.faults.test_kill_points import _corpus_docs, _jsonl, _leftovers, _steps
from tests.lsdask_processes import lsdask_env, run_lsdask

FULL = os.environ.get("LSDASK_FAULTS_FULL") == "1"
DEADLINE = 300  # seconds for one signalled command


def _waiting(pid: int) -> bool:
    """Whether a thread of ``pid`` is blocked opening a FIFO no reader has opened."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return False
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/wchan") as f:
                if f.read().strip() == "wait_for_partner":
                    return True
        except FileNotFoundError:
            continue
    return False


def _wait_blocked_or_ended(proc: subprocess.Popen, deadline: float) -> bool:
    """Wait until ``proc`` waits at the FIFO (True) or has ended (False)."""
    while proc.poll() is None:
        if _waiting(proc.pid):
            return True
        assert time.monotonic() < deadline, "the command neither ended nor reached a step"
        time.sleep(0.005)
    return False


def _read_step(fifo: Path, deadline: float) -> int:
    """Open the FIFO (the waiting command goes on), read its step line and close the FIFO
    at once, so that the command waits at its next step; the number of that step.

    Should the command have opened the FIFO again before it was closed (it went on
    to its next step faster than this process closed the FIFO), that step's line
    may be lost; the step numbers in the lines say how many were done all the same.
    """
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    data = b""
    try:
        while b"\n" not in data:
            ready, _, _ = select.select([fd], [], [], 1.0)
            assert time.monotonic() < deadline, "the step line never came"
            if ready:
                chunk = os.read(fd, 65536)
                assert chunk, f"the FIFO closed before a whole step line: {data!r}"
                data += chunk
    finally:
        os.close(fd)
    return max(int(line.split()[0]) for line in data.decode().splitlines() if line)


def run_signalled(args: list, tmp: Path, k: int, sig: int) -> tuple[int, int]:
    """Run ``lsdask ARGS`` and send ``sig`` once ``k`` file-system steps are done (or, where
    the command went on past a step before it could wait, the first step after); its
    status and the steps done when the signal was sent."""
    fifo = tmp / f"steps-{k}-{sig}.fifo"
    os.mkfifo(fifo)
    proc = subprocess.Popen(
        [sys.executable, "-m", "lsdask", *map(str, args)],
        env=lsdask_env(LSDASK_FS_LOG=str(fifo)), stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + DEADLINE
    done, sent_at = 0, None
    try:
        while _wait_blocked_or_ended(proc, deadline):
            if done >= k and sent_at is None:
                proc.send_signal(sig)
                sent_at = done
                continue  # it may stop, or wait at this step again
            done = _read_step(fifo, deadline)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        fifo.unlink()
    assert sent_at is not None, f"the command ended after {done} steps, before step {k}"
    stopped = {0, 128 + sig, -sig}
    assert proc.returncode in stopped, (k, proc.returncode, err[-2000:])
    return proc.returncode, sent_at


def _points(lines: list[str], commit: str) -> list[int]:
    """Where signals are sent: after the committing step, and one before it (CI); every
    step (full run)."""
    n = len(lines)
    if FULL:
        return list(range(n))
    after = [i + 1 for i, line in enumerate(lines) if re.search(commit, line)]
    assert after, f"no step matches {commit!r}: {lines}"
    k = min(after[-1], n - 1)
    return sorted({k, max(k // 2, 0)})


def _check_signals(
    tmp: Path,
    args_of: Callable[[Path], list],
    compare: Callable[[Path, Path], None],
    commit: str,
    prepare: Callable[[Path], None] | None = None,
) -> list[str]:
    reference = tmp / "reference"
    reference.mkdir()
    if prepare:
        prepare(reference)
    log = tmp / "steps.log"
    _steps(args_of(reference), log)
    lines = log.read_text().splitlines()
    compare(reference, reference)
    seen: list[str] = []
    points = _points(lines, commit)
    for sig in (signal.SIGTERM, signal.SIGINT):
        # CI: SIGTERM at every chosen point, SIGINT at the first
        for k in points if (FULL or sig == signal.SIGTERM) else points[:1]:
            folder = tmp / f"{sig.name}-{k}"
            folder.mkdir()
            if prepare:
                prepare(folder)
            status, at = run_signalled(args_of(folder), tmp, k, sig)
            again = run_lsdask(*args_of(folder))
            assert again.returncode == 0, (sig.name, k, status, again.stderr[-2000:])
            compare(folder, reference)
            assert _leftovers(folder) == [], (sig.name, k, _leftovers(folder))
            seen.append(f"{sig.name} after {at}/{len(lines)}: status {status}")
    print("; ".join(seen))
    return seen


def test_fit_signalled_at_any_step_then_rerun_trains_no_lap_more(tmp_path: Path) -> None:
    source = _jsonl(tmp_path / "docs.jsonl", 300, 1)
    corpus = tmp_path / "corpus"
    assert run_lsdask("ingest", "jsonl", source, "--out", corpus,
                      "--docs-per-row-group", "100").returncode == 0  # fmt: skip

    def args(folder: Path) -> list:
        return ["fit", corpus, "--topics", "3", "--sparsity", "2", "--laps", "2", "--sync",
                "--seed", "0", "--resume", folder / "ckpt", "--out", folder / "m",
                "--overwrite"]  # fmt: skip

    def compare(folder: Path, reference: Path) -> None:
        got, want = load_model(folder / "m"), load_model(reference / "m")
        assert got.n_laps_ == want.n_laps_ == 2
        np.testing.assert_allclose(got.components_, want.components_, rtol=1e-10)

    _check_signals(tmp_path, args, compare, commit=r" rename m$")


def test_append_signalled_at_any_step_keeps_every_document_once(tmp_path: Path) -> None:
    first, more = _jsonl(tmp_path / "a.jsonl", 200, 1), _jsonl(tmp_path / "b.jsonl", 150, 2)

    def prepare(folder: Path) -> None:
        run = run_lsdask("ingest", "jsonl", first, "--out", folder / "c",
                         "--docs-per-row-group", "100")  # fmt: skip
        assert run.returncode == 0, run.stderr

    def args(folder: Path) -> list:
        # no --id: a rerun is told from a new append by what the corpus recorded
        return ["ingest", "jsonl", more, "--append-to", folder / "c"]

    def compare(folder: Path, reference: Path) -> None:
        assert Corpus.open(folder / "c").n_docs == 350
        assert _corpus_docs(folder / "c") == _corpus_docs(reference / "c")

    _check_signals(tmp_path, args, compare, commit=r" replace parts/part-\d+\.parquet$",
                   prepare=prepare)  # fmt: skip


def test_transform_signalled_at_any_step_then_rerun_equals_undisturbed(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    source = _jsonl(tmp_path / "docs.jsonl", 200, 1)
    corpus, model = tmp_path / "corpus", tmp_path / "model"
    assert run_lsdask("ingest", "jsonl", source, "--out", corpus).returncode == 0
    assert run_lsdask("fit", corpus, "--topics", "3", "--laps", "1", "--sync", "--out",
                      model).returncode == 0  # fmt: skip

    def args(folder: Path) -> list:
        return ["transform", model, corpus, "--out", folder / "w.parquet", "--overwrite",
                "--sync"]  # fmt: skip

    def compare(folder: Path, reference: Path) -> None:
        got = pq.read_table(folder / "w.parquet").to_pylist()
        assert got == pq.read_table(reference / "w.parquet").to_pylist()

    _check_signals(tmp_path, args, compare, commit=r"w\.parquet$")


def test_ingest_signalled_at_any_step_then_rerun_equals_undisturbed(tmp_path: Path) -> None:
    from tests.faults.test_kill_points import _manifest

    source = _jsonl(tmp_path / "docs.jsonl", 300, 1)

    def args(folder: Path) -> list:
        return ["ingest", "jsonl", source, "--id", "id", "--out", folder / "c", "--overwrite",
                "--docs-per-row-group", "100"]  # fmt: skip

    def compare(folder: Path, reference: Path) -> None:
        assert _manifest(folder / "c") == _manifest(reference / "c")
        assert _corpus_docs(folder / "c") == _corpus_docs(reference / "c")

    _check_signals(tmp_path, args, compare, commit=r" rename c$")


def test_patches_signalled_at_any_step_then_rerun_equals_undisturbed(tmp_path: Path) -> None:
    import zarr
    from PIL import Image

    images = tmp_path / "images"
    images.mkdir()
    rng = np.random.default_rng(0)
    for i in range(4):
        Image.fromarray((rng.random((40, 48)) * 255).astype(np.uint8)).save(images / f"{i}.png")

    def args(folder: Path) -> list:
        return ["patches", images, "--out", folder / "p", "--patch-size", "8", "--seed", "0"]

    def compare(folder: Path, reference: Path) -> None:
        for part in ("train.zarr", "heldout.zarr"):
            got = zarr.open(str(folder / "p" / part), mode="r")[:]
            np.testing.assert_array_equal(got, zarr.open(str(reference / "p" / part), mode="r")[:])

    _check_signals(tmp_path, args, compare, commit=r" rename p$")
