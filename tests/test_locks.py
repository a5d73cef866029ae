"""Locks on corpus and checkpoint folders (lsdask.io.locks): one writer at a
time, the second told who holds the folder or made to wait; two real
processes driven to exact steps by the named pause points of lsdask.io.faults,
not by timings."""

from __future__ import annotations

import errno
import fcntl
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

import lsdask
from lsdask.errors import LockError
from lsdask.io.corpus import Corpus, read_all
from lsdask.io.locks import LOCK_NAME, FolderLock, holder, lock_settings, try_lock
from lsdask.persist.checkpoint import CheckpointDir
from tests.lsdask_processes import (
    lsdask_env,
    paused_env,
    run_lsdask,
    start_lsdask,
    wait_reached,
)

V = 40
WORDS = [f"zq{a}{b}" for a in "abcde" for b in "abcdefgh"]  # words to the tokenizer


# --------------------------------------------------------------------------- helpers


def _wait_told_to_wait(proc: subprocess.Popen) -> str:
    """Read ``proc``'s stderr up to its warning that it waits for a lock."""
    assert proc.stderr is not None
    for line in proc.stderr:
        if "waiting up to" in line:
            return line
    pytest.fail(f"the process ended ({proc.wait()}) without waiting for the lock")


def _jsonl(path: Path, rng: np.random.Generator, n_docs: int) -> Path:
    with open(path, "w", encoding="utf-8") as f:
        for _ in range(n_docs):
            words = rng.choice(WORDS, size=int(rng.integers(3, 12)))
            f.write(json.dumps({"text": " ".join(words)}) + "\n")
    return path


def _corpus(path: Path, rng: np.random.Generator, n_docs: int = 300, per_file: int = 100) -> Path:
    X = sp.random(n_docs, V, density=0.2, random_state=rng, format="csr")
    X.data = np.ceil(X.data * 5)
    Corpus.write(path, X, WORDS, docs_per_row_group=50, docs_per_file=per_file)
    return path


def _holder_process(folder: Path) -> subprocess.Popen:
    """A process that holds ``folder``'s lock until its stdin closes."""
    code = (
        "import sys; from lsdask.io.locks import FolderLock; "
        "lock = FolderLock(sys.argv[1], 'corpus'); lock.acquire(); print('held', flush=True); "
        "sys.stdin.read()"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(folder)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        text=True, env=lsdask_env(),
    )  # fmt: skip
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


# --------------------------------------------------------------------------- the lock


def test_a_second_holder_is_refused_naming_the_first_then_gets_it_when_it_ends(tmp_path):
    proc = _holder_process(tmp_path)
    try:
        record = holder(tmp_path)
        assert record is not None and record["pid"] == proc.pid
        assert record["host"] == socket.gethostname() and record["since"]
        message = rf"corpus {re.escape(str(tmp_path))} is locked by process {proc.pid} on host "
        with pytest.raises(LockError, match=message + r".*since .* ago\), running `-c"):
            FolderLock(tmp_path, "corpus").acquire()
        with pytest.raises(LockError, match=r"\(waited 0 s\)\. The lock ends when that process"):
            FolderLock(tmp_path, "corpus", wait=0.2).acquire()
        # a waiting writer gets the lock once the holder ends
        got: list[object] = []
        waiter = FolderLock(tmp_path, "corpus", wait=60)
        thread = threading.Thread(target=lambda: got.append(waiter.acquire()))
        thread.start()
        assert proc.stdin is not None
        proc.stdin.close()
        thread.join(90)
        assert got == [True]
        assert holder(tmp_path)["pid"] == os.getpid()
        waiter.release()
        assert holder(tmp_path) is None  # the record goes with the lock
    finally:
        proc.kill()
        proc.wait()


def test_a_killed_holder_leaves_no_stale_lock(tmp_path):
    """The kernel drops a flock with its process: nothing to break by hand."""
    proc = _holder_process(tmp_path)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    with FolderLock(tmp_path, "corpus"):
        assert holder(tmp_path)["pid"] == os.getpid()
    assert (tmp_path / LOCK_NAME).exists()  # never deleted (see lsdask.io.locks)


def test_reentrant_only_where_asked_and_only_in_the_holding_thread(tmp_path):
    with FolderLock(tmp_path, "corpus", reentrant=True):
        with FolderLock(tmp_path, "corpus", reentrant=True):
            pass
        assert holder(tmp_path) is not None  # still held by the outer one
        with pytest.raises(LockError, match="already locked by this thread"):
            FolderLock(tmp_path, "checkpoint folder").acquire()
        errors: list[BaseException] = []

        def other() -> None:
            try:
                FolderLock(tmp_path, "corpus", reentrant=True).acquire()
            except LockError as exc:
                errors.append(exc)

        thread = threading.Thread(target=other)
        thread.start()
        thread.join()
        assert len(errors) == 1 and f"process {os.getpid()}" in str(errors[0])
        with try_lock(tmp_path, "corpus") as taken:
            assert taken  # the holding thread: re-entered
    assert holder(tmp_path) is None


def test_a_file_system_without_locks_is_refused_unless_locking_is_off(tmp_path, monkeypatch):
    def no_locks(fd: int, operation: int) -> None:
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", no_locks)
    with pytest.raises(LockError, match=r"does not support locks .*No locks available.*--no-lock"):
        FolderLock(tmp_path, "corpus").acquire()
    with try_lock(tmp_path, "corpus") as taken:
        assert not taken
    with FolderLock(tmp_path, "corpus", enabled=False):
        pass
    with lock_settings(enabled=False), FolderLock(tmp_path, "corpus"):
        pass


@pytest.mark.parametrize("bad", [-1, "soon", float("nan"), True])
def test_wait_must_be_seconds(tmp_path, bad):
    with pytest.raises(ValueError, match=r"wait must be a number of seconds >= 0"):
        FolderLock(tmp_path, "corpus", wait=bad)


def test_fault_points_pause_and_crash(tmp_path):
    code = "from lsdask.io.faults import fault_point; fault_point('x.y'); print('after')"
    pause = tmp_path / "go"
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
        env=paused_env(pause, "other,x.y"),
    )  # fmt: skip
    wait_reached(pause, proc)
    assert proc.poll() is None
    pause.touch()
    assert proc.communicate(timeout=60)[0] == "after\n"
    crash = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True,
        env=lsdask_env(LSDASK_CRASH_AT="x.y"), timeout=60,
    )  # fmt: skip
    assert crash.returncode == -signal.SIGKILL and crash.stdout == ""
    unarmed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert unarmed.stdout == "after\n"


# --------------------------------------------------------------------------- two appends


def test_two_appends_at_once_keep_every_document(tmp_path):
    """Finding: two `lsdask ingest ... --append-to C` at once both chose
    part-00003 and one replaced the other. Now the second is refused, naming
    the first, or with --wait waits for it; every document is kept."""
    rng = np.random.default_rng(0)
    corpus = _corpus(tmp_path / "c", rng)
    a, b, c = (_jsonl(tmp_path / f"{n}.jsonl", rng, 120) for n in "abc")
    pause = tmp_path / "go"
    first = start_lsdask("ingest", "jsonl", a, "--append-to", corpus,
                    env=paused_env(pause, "corpus.append.locked"))  # fmt: skip
    wait_reached(pause, first)
    refused = run_lsdask("ingest", "jsonl", b, "--append-to", corpus)
    assert refused.returncode == 1, refused.stderr
    assert refused.stderr.count("\n") == 1 and refused.stderr.startswith("lsdask: error: corpus")
    assert f"is locked by process {first.pid} on host {socket.gethostname()}" in refused.stderr
    assert f"running `lsdask ingest jsonl {a} --append-to {corpus}`" in refused.stderr
    assert "--wait SECONDS" in refused.stderr and "Traceback" not in refused.stderr
    waiting = start_lsdask("ingest", "jsonl", c, "--append-to", corpus, "--wait", "300")
    told = _wait_told_to_wait(waiting)
    assert f"is locked by process {first.pid}" in told and "waiting up to 5 min" in told
    pause.touch()
    out_a, err_a = first.communicate(timeout=300)
    out_c, err_c = waiting.communicate(timeout=300)
    assert first.returncode == 0 and waiting.returncode == 0, err_a + err_c
    assert "as parts/part-00003.parquet" in out_a and "as parts/part-00004.parquet" in out_c
    X, ids = read_all(Corpus.open(corpus, rescan=True), return_doc_ids=True)
    assert X.shape[0] == 300 + 120 + 120 and len(set(ids.tolist())) == X.shape[0]


def test_an_append_inside_another_loses_nothing(tmp_path, monkeypatch):
    """In one process, deterministically: a second append (another thread) that
    runs while the first writes its part file is refused, and the corpus holds
    every document of every append that succeeded."""
    import lsdask.io.corpus.store as store

    rng = np.random.default_rng(1)
    path = _corpus(tmp_path / "c", rng)
    inner = sp.random(30, V, density=0.3, random_state=rng, format="csr")
    outcome: list[object] = []
    write_groups = store._write_groups
    started: list[bool] = []

    def interleaved(*args, **kwargs):
        if not started:
            started.append(True)

            def second() -> None:
                try:
                    outcome.append(len(Corpus.open(path).append(inner)))
                except LockError as exc:
                    outcome.append(exc)

            thread = threading.Thread(target=second)
            thread.start()
            thread.join(120)
        return write_groups(*args, **kwargs)

    monkeypatch.setattr(store, "_write_groups", interleaved)
    Corpus.open(path).append(sp.random(40, V, density=0.3, random_state=rng, format="csr"))
    monkeypatch.undo()
    succeeded = 30 if isinstance(outcome[0], int) else 0
    assert Corpus.open(path, rescan=True).n_docs == 300 + 40 + succeeded  # nothing lost
    assert isinstance(outcome[0], LockError) and "is locked by process" in str(outcome[0])


# --------------------------------------------------------------------------- two fits


def _fit_args(corpus: Path, out: Path, *more: object) -> list[object]:
    return ["fit", corpus, "--topics", "4", "--out", out, "--sync", "--seed", "0",
            *more]  # fmt: skip


def test_a_second_fit_on_a_checkpoint_folder_is_refused_and_the_folder_stays_resumable(tmp_path):
    """Finding: two fits on one checkpoint folder deleted each other's memo
    files; the loser died naming a missing .npz. Now the second is refused at
    once, naming the first; with --wait it runs after it."""
    rng = np.random.default_rng(2)
    corpus = _corpus(tmp_path / "c", rng)
    ckpt, pause = tmp_path / "ckpt", tmp_path / "go"
    first = start_lsdask(*_fit_args(corpus, tmp_path / "m1", "--laps", "3", "--checkpoint", ckpt),
                    env=paused_env(pause, "checkpoint.written"))  # fmt: skip
    wait_reached(pause, first)  # after its first lap's checkpoint
    second = run_lsdask(*_fit_args(corpus, tmp_path / "m2", "--laps", "3", "--resume", ckpt))
    assert second.returncode == 1, second.stderr
    assert second.stderr.count("\n") == 1, second.stderr
    held = f"checkpoint folder {ckpt} is locked by process {first.pid} on host "
    assert second.stderr.startswith(f"lsdask: error: {held}{socket.gethostname()}, since ")
    assert "another checkpoint folder" in second.stderr and "--wait" in second.stderr
    assert not (tmp_path / "m2").exists()
    waiting = start_lsdask(*_fit_args(corpus, tmp_path / "m3", "--laps", "1", "--resume", ckpt,
                                 "--wait", "300"))  # fmt: skip
    assert f"is locked by process {first.pid}" in _wait_told_to_wait(waiting)
    pause.touch()
    _, err = first.communicate(timeout=300)
    assert first.returncode == 0, err
    out, err = waiting.communicate(timeout=300)
    assert waiting.returncode == 0, err
    assert "laps: 4," in out, out  # it resumed the first fit's finished checkpoint
    assert CheckpointDir(ckpt).read()["state"].lap == 4


def test_a_fit_inside_another_on_its_checkpoint_folder_is_refused(tmp_path):
    """In one process, deterministically: a fit started (another thread) between
    two laps of a fit on the same checkpoint folder is refused; the first goes
    on and its checkpoint resumes."""
    rng = np.random.default_rng(3)
    corpus = str(_corpus(tmp_path / "c", rng))
    kw = dict(sparsity=2, random_state=0, client="sync", checkpoint_dir=str(tmp_path / "ck"),
              resume=True)  # fmt: skip
    outcome: list[object] = []

    def second_fit(result) -> None:
        if outcome:
            return

        def run() -> None:
            try:
                outcome.append(lsdask.LDA(4, n_laps=3, **kw).fit(corpus))
            except LockError as exc:
                outcome.append(exc)

        thread = threading.Thread(target=run)
        thread.start()
        thread.join(300)

    first = lsdask.LDA(4, n_laps=3, **kw).fit(corpus, callback=second_fit)
    assert first.n_laps_ == 3
    assert isinstance(outcome[0], LockError)
    assert re.match(r"checkpoint folder .*ck is locked by process \d+ on host", str(outcome[0]))
    assert lsdask.LDA(4, n_laps=1, **kw).fit(corpus).n_laps_ == 4
