"""SIGTERM and SIGINT at any file-system step of a command, and right after its work
is saved, then the same command again: it finishes what was asked, and a signal
after the work was saved changes nothing.

The signal is sent by the command itself at an exact point (:mod:`lsdask.io.faults`):
``LSDASK_SIGNAL_AT_FS=N:SIG`` before its ``N``-th file-system step (the steps of an
undisturbed run's ``LSDASK_FS_LOG``), ``LSDASK_SIGNAL_AT=command.committed:SIG``
right after its work is saved. The signalled command must end with status 0, or as
a stopped command does (143 or 130: lsdask never dies by the signal), with at most one
line that is not a warning and no traceback; where it ends with 0 it must have
seen the signal (its warning names it). Where it stopped, the rerun must end with
status 0 and its outputs must equal an undisturbed run's (the same model, the laps
asked for and no more; every document once; the same patches). Where it ended
with 0, its outputs must equal an undisturbed run's at once, and the rerun must do
what the same rerun does after an undisturbed run: the same status and the same
files changed (a checkpointed fit trains and writes nothing; a fit to a new
``--out`` refuses the existing model; ``--overwrite`` rewrites an equal output; an
append without ``--id`` is a new append). No temporary may be left.

CI sends SIGTERM a quarter of the way to the step that commits each command's
output and at it, SIGINT halfway to it, and both at ``command.committed``;
``LSDASK_FAULTS_FULL=1`` sends both at every step.
"""

from __future__ import annotations

import os
import re
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lsdask.io.corpus import Corpus
from lsdask.persist import load_model
from tests.faults.test_kill_points import _corpus_docs, _jsonl, _leftovers, _steps
from tests.lsdask_processes import lsdask_env, run_lsdask, without_progress

FULL = os.environ.get("LSDASK_FAULTS_FULL") == "1"
COMMITTED = "command.committed"


def _files(folder: Path) -> dict[str, tuple[int, int, int]]:
    """Each file below ``folder`` (lock files aside) with its inode, modification time
    and size: two snapshots differ where a file was written, replaced or removed."""
    found = {}
    for path in folder.rglob("*"):
        if path.is_file() and ".lock" not in path.name:
            st = path.stat()
            found[str(path.relative_to(folder))] = (st.st_ino, st.st_mtime_ns, st.st_size)
    return found


def _changed(before: dict, after: dict) -> set[str]:
    return {name for name in before.keys() | after.keys() if before.get(name) != after.get(name)}


def _check_stderr(stderr: str, case: str) -> None:
    """No traceback, and at most one line that is not a warning (the error)."""
    assert "Traceback" not in stderr, (case, stderr[-3000:])
    other = [line for line in without_progress(stderr) if not line.startswith("lsdask: warning:")]
    assert len(other) <= 1, (case, stderr[-3000:])


@dataclass
class Rerun:
    """What the identical command did when run again after one whose work was saved."""

    case: str
    folder: Path
    status: int
    changed: set[str]


def _points(lines: list[str], commit: str) -> dict[signal.Signals, list[str]]:
    """Where each signal is sent: ``N`` (before the N-th step) or ``COMMITTED``. CI:
    SIGTERM a quarter of the way to the step that commits the output and at it, SIGINT
    halfway to it; the full run: every step."""
    matching = [i + 1 for i, line in enumerate(lines) if re.search(commit, line)]
    assert matching, f"no step matches {commit!r}: {lines}"
    if FULL:
        steps = [str(n) for n in range(1, len(lines) + 1)]
        return {signal.SIGTERM: [*steps, COMMITTED], signal.SIGINT: [*steps, COMMITTED]}
    k = matching[-1]
    return {  # a quarter of the way: a fit with a checkpoint is still in its first lap
        signal.SIGTERM: [*sorted({str(max(k // 4, 1)), str(k)}), COMMITTED],
        signal.SIGINT: [str(max(k // 2, 1)), COMMITTED],
    }


def _check_signals(
    tmp: Path,
    args_of: Callable[[Path], list],
    compare: Callable[[Path, Path], None],
    commit: str,
    rerun_writes: bool,
    prepare: Callable[[Path], None] | None = None,
) -> list[str]:
    """Send each chosen signal to ``args_of(folder)`` in a fresh ``folder``, rerun the
    command, ``compare(folder, reference)`` (see the module's documentation);
    ``rerun_writes``: whether the identical command run again after an undisturbed
    run changes files. Returns what each signal did, for the report."""
    reference = tmp / "reference"
    reference.mkdir()
    if prepare:
        prepare(reference)
    log = tmp / "steps.log"
    _steps(args_of(reference), log)
    lines = log.read_text().splitlines()
    compare(reference, reference)
    seen: list[str] = []
    saved: list[Rerun] = []
    for sig, points in _points(lines, commit).items():
        name = sig.name.removeprefix("SIG")
        for at in points:
            case = f"{sig.name} at {'step ' + at if at != COMMITTED else at}/{len(lines)}"
            folder = tmp / f"{sig.name}-{at}"
            folder.mkdir()
            if prepare:
                prepare(folder)
            knob = "LSDASK_SIGNAL_AT" if at == COMMITTED else "LSDASK_SIGNAL_AT_FS"
            run = run_lsdask(*args_of(folder), env=lsdask_env(**{knob: f"{at}:{name}"}))
            _check_stderr(run.stderr, case)
            if at == COMMITTED:
                assert run.returncode == 0, (case, run.returncode, run.stderr[-3000:])
            assert run.returncode in (0, 128 + sig), (case, run.returncode, run.stderr)
            if run.returncode == 0:  # it went on: the signal must have been seen
                assert re.search(rf"\b({sig.name}|signal {int(sig)})\b", run.stderr), (
                    case, "status 0 and no word of the signal", run.stderr,
                )  # fmt: skip
                compare(folder, reference)  # its work is saved
            before = _files(folder)
            again = run_lsdask(*args_of(folder))
            _check_stderr(again.stderr, f"{case}, rerun")
            if run.returncode == 0:  # judged against an undisturbed run's rerun, below
                saved.append(
                    Rerun(case, folder, again.returncode, _changed(before, _files(folder)))
                )
            else:
                assert again.returncode == 0, (case, run.returncode, again.stderr[-3000:])
                compare(folder, reference)
            assert _leftovers(folder) == [], (case, _leftovers(folder))
            seen.append(f"{case}: status {run.returncode}, rerun {again.returncode}")
    # the identical command after an undisturbed run: what a rerun after saved work must do
    before = _files(reference)
    again = run_lsdask(*args_of(reference))
    changed = _changed(before, _files(reference))
    _check_stderr(again.stderr, "rerun of the undisturbed run")
    assert bool(changed) == rerun_writes, (changed, again.stderr[-3000:])
    for rerun in saved:
        assert (rerun.status, rerun.changed) == (again.returncode, changed), (rerun, again.stderr)
        compare(rerun.folder, reference)
    print("; ".join(seen))
    return seen


def _fit_corpus(tmp: Path) -> Path:
    source = _jsonl(tmp / "docs.jsonl", 300, 1)
    corpus = tmp / "corpus"
    assert run_lsdask("ingest", "jsonl", source, "--out", corpus,
                      "--docs-per-row-group", "100").returncode == 0  # fmt: skip
    return corpus


def _same_model(folder: Path, reference: Path) -> None:
    got, want = load_model(folder / "m"), load_model(reference / "m")
    assert got.n_laps_ == want.n_laps_ == 2
    np.testing.assert_allclose(got.components_, want.components_, rtol=1e-10)
    assert {p.name for p in (folder / "m").iterdir()} == {
        p.name for p in (reference / "m").iterdir()
    }


FIT = ["--topics", "3", "--sparsity", "2", "--laps", "2", "--sync", "--seed", "0"]


def test_fit_to_out_signalled_at_any_step_then_rerun_equals_undisturbed(tmp_path: Path) -> None:
    """No checkpoint: a rerun after a stop trains from the start; once the model is
    written, the rerun refuses to replace it (status 2) and trains nothing."""
    corpus = _fit_corpus(tmp_path)

    def args(folder: Path) -> list:
        return ["fit", corpus, *FIT, "--out", folder / "m"]

    _check_signals(tmp_path, args, _same_model, commit=r" rename (.*/)?m$", rerun_writes=False)


def test_fit_with_checkpoint_signalled_at_any_step_then_rerun_trains_no_lap_more(
    tmp_path: Path,
) -> None:
    corpus = _fit_corpus(tmp_path)

    def args(folder: Path) -> list:
        return ["fit", corpus, *FIT, "--resume", folder / "ckpt", "--out", folder / "m",
                "--overwrite"]  # fmt: skip

    seen = _check_signals(tmp_path, args, _same_model, commit=r" rename (.*/)?m$",
                          rerun_writes=False)  # fmt: skip
    # a quarter of the way the fit is in its first lap: SIGTERM stops it there
    assert any("status 143," in case for case in seen), seen


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
        assert Corpus.open(reference / "c").n_docs in (350, 500)  # 500: appended again
        assert Corpus.open(folder / "c").n_docs == Corpus.open(reference / "c").n_docs
        assert _corpus_docs(folder / "c") == _corpus_docs(reference / "c")

    _check_signals(tmp_path, args, compare, commit=r" replace manifest\.json$",
                   rerun_writes=True, prepare=prepare)  # fmt: skip


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

    _check_signals(tmp_path, args, compare, commit=r"w\.parquet$", rerun_writes=True)


def test_ingest_signalled_at_any_step_then_rerun_equals_undisturbed(tmp_path: Path) -> None:
    from tests.faults.test_kill_points import _manifest

    source = _jsonl(tmp_path / "docs.jsonl", 300, 1)

    def args(folder: Path) -> list:
        return ["ingest", "jsonl", source, "--id", "id", "--out", folder / "c", "--overwrite",
                "--docs-per-row-group", "100"]  # fmt: skip

    def compare(folder: Path, reference: Path) -> None:
        assert _manifest(folder / "c") == _manifest(reference / "c")
        assert _corpus_docs(folder / "c") == _corpus_docs(reference / "c")

    _check_signals(tmp_path, args, compare, commit=r" rename (.*/)?c$", rerun_writes=True)


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

    _check_signals(tmp_path, args, compare, commit=r" rename (.*/)?p$", rerun_writes=True)
