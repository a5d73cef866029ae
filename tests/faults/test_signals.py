"""SIGTERM and SIGINT between any two file-system steps of a command, then the same
command again: it finishes what was asked, and trains nothing more where the work
was committed.

The signal lands at a known step without a knob in :mod:`lsdask.io.faults`: the
command's step log (``LSDASK_FS_LOG``) is a FIFO that this test keeps full
(:class:`StepPipe`), so the command blocks writing each step's line in
:func:`lsdask.io.faults.fs_point`, which runs before the step. While it waits there
(its ``wchan`` says it waits on a pipe) the steps logged are done and the next has
not begun; the signal is sent at the first such wait with at least ``k`` steps
done (a command may pass a step or two without waiting where it is quicker than
this test's refill of the pipe; the step actually reached is reported). After the
last step nothing waits, so "after it" is not reached this way; each command's
commit is followed by clean-up steps, which are. An exact knob,
``LSDASK_SIGNAL_AT_FS=N:TERM`` in :func:`lsdask.io.faults.fs_point`, would make
every step reachable.

The signalled command ends with status 0, or as a stopped command does (143 or
130, or killed by the signal); the rerun must then end with status 0 and its
outputs must equal an undisturbed run's (the same model, the laps asked for and
no more; every document once; the same patches), with no temporary left. CI
sends SIGTERM after the step that commits each command's output and SIGINT halfway
to it; ``LSDASK_FAULTS_FULL=1`` sends both signals at every step.
"""

from __future__ import annotations

import array
import contextlib
import fcntl
import os
import re
import select
import signal
import subprocess
import sys
import termios
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


#: what /proc/PID/wchan says of a thread blocked writing to a full pipe (by kernel version)
PIPE_WAITS = ("pipe_write", "anon_pipe_write", "pipe_wait_writable", "pipe_wait")


def _waiting(pid: int) -> bool:
    """Whether a thread of ``pid`` is blocked writing to a full pipe (the step FIFO: the
    command's other output goes to files)."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return False
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/wchan") as f:
                if f.read().strip() in PIPE_WAITS:
                    return True
        except (FileNotFoundError, ProcessLookupError):
            continue
    return False


class StepPipe:
    """The command's step log: a FIFO kept full, so that the command blocks writing each
    step's line (:func:`lsdask.io.faults.fs_point` runs before its step) until this
    process makes room.

    This process holds both ends open the whole time, so the command's ``open`` never
    blocks and its write never meets a closed pipe. To let one step go, the pipe is
    emptied, the line awaited and the pipe filled again at once; a command quicker than
    that refill may pass a step or two without waiting (the step numbers in the lines
    still count right, and the signal then lands at the next wait).
    """

    def __init__(self, path: Path):
        os.mkfifo(path)
        self.path = path
        self.r = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        self.w = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        with contextlib.suppress(OSError):  # the smallest pipe: a page
            fcntl.fcntl(self.w, fcntl.F_SETPIPE_SZ, 4096)
        self.size = fcntl.fcntl(self.w, fcntl.F_GETPIPE_SZ)
        self.text = b""
        self.fill()

    def queued(self) -> int:
        buf = array.array("i", [0])
        fcntl.ioctl(self.r, termios.FIONREAD, buf)
        return buf[0]

    def fill(self) -> None:
        """Fill the pipe, in one write where it can."""
        while (room := self.size - self.queued()) > 0:
            try:
                os.write(self.w, b"\0" * room)
            except BlockingIOError:
                return

    def drain(self) -> None:
        with contextlib.suppress(BlockingIOError):
            while data := os.read(self.r, 65536):
                self.text += data.replace(b"\0", b"")

    def done(self) -> int:
        """The steps logged (every one before the step the command waits at is done)."""
        lines = [line for line in self.text.decode().split("\n")[:-1] if line]
        return max((int(line.split()[0]) for line in lines), default=0)

    def let_go(self, proc: subprocess.Popen, deadline: float) -> None:
        """Empty the pipe, wait for the waiting line (or the command's end), read it and
        fill the pipe again."""
        self.drain()
        spin = time.monotonic() + 0.02  # a step's line usually comes at once: look hard
        while not self.queued() and time.monotonic() < spin:
            pass
        while proc.poll() is None and not self.queued():
            select.select([self.r], [], [], 0.05)
            assert time.monotonic() < deadline, "the command did not go on"
        self.drain()
        self.fill()

    def close(self) -> None:
        self.drain()
        os.close(self.r)
        os.close(self.w)
        self.path.unlink()


def run_signalled(args: list, tmp: Path, k: int, sig: int) -> tuple[int, int | None]:
    """Run ``lsdask ARGS`` and send ``sig`` at its first wait with at least ``k`` steps
    done; its status and the steps done when the signal was sent (None: the command
    ended first)."""
    pipe = StepPipe(tmp / f"steps-{k}-{sig}.fifo")
    err_file = tmp / f"stderr-{k}-{sig}.txt"
    with open(err_file, "w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "lsdask", *map(str, args)],
            env=lsdask_env(LSDASK_FS_LOG=str(pipe.path)), stdout=subprocess.DEVNULL,
            stderr=err, preexec_fn=lambda: os.nice(19),  # this test refills first
        )  # fmt: skip
    deadline = time.monotonic() + DEADLINE
    sent_at = None
    try:
        while True:
            while proc.poll() is None and not _waiting(proc.pid):
                assert time.monotonic() < deadline, "the command neither ended nor logged"
                time.sleep(0.002)
            if proc.poll() is not None:
                break
            if pipe.done() >= k and sent_at is None:
                proc.send_signal(sig)
                sent_at = pipe.done()
                time.sleep(0.05)  # let it take the signal (it may then wait again)
                continue
            pipe.let_go(proc, deadline)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        pipe.close()
    stderr = err_file.read_text()
    stopped = {0, 128 + sig, -sig}
    assert proc.returncode in stopped, (k, proc.returncode, stderr[-2000:])
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
        # CI: SIGTERM after the commit (the last point), SIGINT before it (the first)
        chosen = points if FULL else points[-1:] if sig == signal.SIGTERM else points[:1]
        for k in chosen:
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
    assert any(" after None/" not in line for line in seen), f"no signal was sent: {seen}"
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

    _check_signals(tmp_path, args, compare, commit=r" rename (.*/)?m$")


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

    _check_signals(tmp_path, args, compare, commit=r" replace (.*/)?parts/part-\d+\.parquet$",
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

    _check_signals(tmp_path, args, compare, commit=r" rename (.*/)?c$")


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

    _check_signals(tmp_path, args, compare, commit=r" rename (.*/)?p$")
