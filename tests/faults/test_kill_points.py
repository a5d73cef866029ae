"""Kill a command at each of its file-system steps, rerun it, compare.

Every fsync, rename and removal of lsdask's writers passes
:func:`lsdask.io.faults.fs_point` (:mod:`lsdask.io.fsops`). For each command
below, an undisturbed run logs its steps (``LSDASK_FS_LOG``); then the command is
killed with SIGKILL at step k (``LSDASK_CRASH_AT_FS=k``), rerun unchanged, and
its outputs compared with the undisturbed run's: equal arrays and manifests
(times aside), no document lost or duplicated, no temporary left beside them.
CI kills at a sample of the steps (the first, the last, and some between); set
``LSDASK_FAULTS_FULL=1`` to kill at every step.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import numpy as np

from lsdask.io.corpus import Corpus
from lsdask.persist import load_model
from lsdask.persist.checkpoint import CheckpointDir
from tests.lsdask_processes import lsdask_env, run_lsdask

FULL = os.environ.get("LSDASK_FAULTS_FULL") == "1"
SAMPLE = 3  # steps killed at per command in CI, besides the first and the last


def _jsonl(path: Path, n: int, seed: int) -> Path:
    rng = np.random.default_rng(seed)
    words = [f"{a}{b}" for a in ("apple", "river", "stone", "cloud", "field") for b in
             ("ward", "light", "berg", "ton", "wood", "mere", "ley", "stead")]  # fmt: skip
    with open(path, "w") as f:
        for i in range(n):
            text = " ".join(rng.choice(words, size=int(rng.integers(5, 30))))
            f.write(json.dumps({"id": 1000 * seed + i, "text": text}) + "\n")
    return path


def _steps(args: list, log: Path) -> int:
    log.unlink(missing_ok=True)
    run = run_lsdask(*args, env=lsdask_env(LSDASK_FS_LOG=str(log)))
    assert run.returncode == 0, run.stderr
    return len(log.read_text().splitlines())


def _kill_steps(n: int) -> list[int]:
    if FULL or n <= SAMPLE + 2:
        return list(range(1, n + 1))
    return sorted({1, n, *np.linspace(2, n - 1, SAMPLE).round().astype(int).tolist()})


def _leftovers(folder: Path) -> list[str]:
    """Temporaries of any writer: hidden entries, anywhere below ``folder``."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob(".*") if ".lock" not in p.name)


def _manifest(corpus: Path) -> dict:
    """The manifest without what differs between equal runs: times, each
    append's transaction id and the part files' digests (a part carries its
    transaction id)."""
    doc = json.loads((corpus / "manifest.json").read_text())
    doc.pop("created", None)
    for batch in doc.get("batches", []):
        batch.pop("txn", None)
        batch.pop("file_blake2b", None)
    return doc


def _corpus_docs(corpus: Path) -> list[tuple]:
    """Every document as (doc id, word ids, counts), sorted: equal lists mean no
    document lost or duplicated."""
    c = Corpus.open(corpus)
    rows = []
    for batch in c.batches:
        d = batch.load()
        for i, doc in enumerate(d.doc_ids):
            lo, hi = d.indptr[i], d.indptr[i + 1]
            rows.append((int(doc), tuple(d.word_ids[lo:hi]), tuple(d.counts[lo:hi])))
    return sorted(rows)


def _check_each_kill(tmp: Path, args_of, compare, prepare=None, statuses=(0,)) -> list[str]:
    """Kill ``args_of(folder)`` at each chosen step in a fresh ``folder``, rerun it
    (its status one of ``statuses``: 2 only where the command refuses to redo work
    the killed run finished), ``compare(folder)``; return what each kill did."""
    reference = tmp / "reference"
    reference.mkdir()
    if prepare:
        prepare(reference)
    n = _steps(args_of(reference), tmp / "steps.log")
    compare(reference, reference)
    seen = []
    for k in _kill_steps(n):
        folder = tmp / f"kill{k}"
        folder.mkdir()
        if prepare:
            prepare(folder)
        killed = run_lsdask(*args_of(folder), env=lsdask_env(LSDASK_CRASH_AT_FS=str(k)))
        assert killed.returncode == -signal.SIGKILL, (k, killed.stderr[-2000:])
        again = run_lsdask(*args_of(folder))
        assert again.returncode in statuses, (k, again.returncode, again.stderr[-2000:])
        compare(folder, reference)
        assert _leftovers(folder) == [], (k, _leftovers(folder))
        seen.append(f"{k}/{n}: rerun status {again.returncode}")
    return seen


def test_ingest_killed_at_any_step_then_rerun_equals_undisturbed(tmp_path: Path) -> None:
    source = _jsonl(tmp_path / "docs.jsonl", 300, 1)

    def args(folder: Path) -> list:
        return ["ingest", "jsonl", source, "--id", "id", "--out", folder / "c", "--overwrite",
                "--docs-per-row-group", "100"]  # fmt: skip

    def compare(folder: Path, reference: Path) -> None:
        assert _manifest(folder / "c") == _manifest(reference / "c")
        assert _corpus_docs(folder / "c") == _corpus_docs(reference / "c")

    _check_each_kill(tmp_path, args, compare)


def test_append_killed_at_any_step_keeps_every_document_once(tmp_path: Path) -> None:
    first, more = _jsonl(tmp_path / "a.jsonl", 200, 1), _jsonl(tmp_path / "b.jsonl", 150, 2)

    def prepare(folder: Path) -> None:
        run = run_lsdask("ingest", "jsonl", first, "--id", "id", "--out", folder / "c",
                         "--docs-per-row-group", "100")  # fmt: skip
        assert run.returncode == 0, run.stderr

    def args(folder: Path) -> list:
        # the documents' own ids: a rerun of an append that committed is refused
        # (the ids are in the corpus), one that did not appends them once
        return ["ingest", "jsonl", more, "--id", "id", "--append-to", folder / "c"]

    def compare(folder: Path, reference: Path) -> None:
        assert Corpus.open(folder / "c").n_docs == 350
        assert _corpus_docs(folder / "c") == _corpus_docs(reference / "c")

    _check_each_kill(tmp_path, args, compare, prepare, statuses=(0, 2))  # ids: already in


def test_fit_with_checkpoint_killed_at_any_step_then_rerun_equals_undisturbed(
    tmp_path: Path,
) -> None:
    source = _jsonl(tmp_path / "docs.jsonl", 300, 1)
    corpus = tmp_path / "corpus"
    assert run_lsdask("ingest", "jsonl", source, "--out", corpus,
                      "--docs-per-row-group", "100").returncode == 0  # fmt: skip

    def args(folder: Path) -> list:
        return ["fit", corpus, "--topics", "3", "--sparsity", "2", "--laps", "2", "--sync",
                "--seed", "0", "--resume", folder / "ckpt", "--out", folder / "m"]  # fmt: skip

    def compare(folder: Path, reference: Path) -> None:
        got, want = load_model(folder / "m"), load_model(reference / "m")
        assert got.n_laps_ == want.n_laps_ == 2
        np.testing.assert_allclose(got.components_, want.components_, rtol=1e-10)
        assert {p.name for p in (folder / "m").iterdir()} == {
            p.name for p in (reference / "m").iterdir()
        }

    _check_each_kill(tmp_path, args, compare)


def test_transform_killed_at_any_step_then_rerun_equals_undisturbed(tmp_path: Path) -> None:
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

    _check_each_kill(tmp_path, args, compare)


def test_patches_killed_at_any_step_then_rerun_equals_undisturbed(tmp_path: Path) -> None:
    import zarr
    from PIL import Image

    images = tmp_path / "images"
    images.mkdir()
    rng = np.random.default_rng(0)
    for i in range(4):
        pixels = (rng.random((40, 48)) * 255).astype(np.uint8)
        Image.fromarray(pixels).save(images / f"img{i}.png")

    def args(folder: Path) -> list:
        return ["patches", images, "--out", folder / "p", "--patch-size", "8", "--seed", "0"]

    def compare(folder: Path, reference: Path) -> None:
        for part in ("train.zarr", "heldout.zarr"):
            got = zarr.open(str(folder / "p" / part), mode="r")[:]
            np.testing.assert_array_equal(got, zarr.open(str(reference / "p" / part), mode="r")[:])

    _check_each_kill(tmp_path, args, compare, statuses=(0, 2))  # the output is in place


def test_a_fit_killed_at_random_times_then_rerun_equals_undisturbed(tmp_path: Path) -> None:
    """Timed kills, not at a named step: SIGKILL after a random delay."""
    import subprocess
    import sys
    import time

    source = _jsonl(tmp_path / "docs.jsonl", 300, 4)
    corpus = tmp_path / "corpus"
    assert run_lsdask("ingest", "jsonl", source, "--out", corpus).returncode == 0
    args = ["fit", corpus, "--topics", "3", "--sparsity", "2", "--laps", "3", "--sync",
            "--seed", "0"]  # fmt: skip
    started = time.monotonic()
    assert run_lsdask(*args, "--out", tmp_path / "ref").returncode == 0
    took = time.monotonic() - started  # the kills fall within a run of about this length
    want = load_model(tmp_path / "ref")
    rng = np.random.default_rng(7)
    for attempt in range(3):
        folder = tmp_path / f"t{attempt}"
        full = [*args, "--resume", folder / "ckpt", "--out", folder / "m"]
        proc = subprocess.Popen([sys.executable, "-m", "lsdask", *map(str, full)],
                                env=lsdask_env(), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)  # fmt: skip
        time.sleep(float(rng.uniform(0.2, 0.9)) * took)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        state = CheckpointDir(folder / "ckpt").read_state() if (folder / "ckpt").exists() else None
        if state is None or not state.command["done"]:  # killed before it was done: rerun
            again = run_lsdask(*full)
            assert again.returncode == 0, again.stderr
        # else it had written its output before the kill (a rerun would be a new command)
        got = load_model(folder / "m")
        assert got.n_laps_ == 3
        np.testing.assert_allclose(got.components_, want.components_, rtol=1e-10)
        assert _leftovers(folder) == []


def test_fit_to_out_alone_killed_at_any_step_then_rerun_equals_undisturbed(
    tmp_path: Path,
) -> None:
    """No checkpoint: a rerun trains from the start, or finds the model written
    (status 2: it exists) where the kill came after its rename."""
    source = _jsonl(tmp_path / "docs.jsonl", 300, 1)
    corpus = tmp_path / "corpus"
    assert run_lsdask("ingest", "jsonl", source, "--out", corpus,
                      "--docs-per-row-group", "100").returncode == 0  # fmt: skip

    def args(folder: Path) -> list:
        return ["fit", corpus, "--topics", "3", "--sparsity", "2", "--laps", "2", "--sync",
                "--seed", "0", "--out", folder / "m"]  # fmt: skip

    def compare(folder: Path, reference: Path) -> None:
        got, want = load_model(folder / "m"), load_model(reference / "m")
        assert got.n_laps_ == want.n_laps_ == 2
        np.testing.assert_allclose(got.components_, want.components_, rtol=1e-10)
        assert {p.name for p in (folder / "m").iterdir()} == {
            p.name for p in (reference / "m").iterdir()
        }

    _check_each_kill(tmp_path, args, compare, statuses=(0, 2))  # the model is in place


def test_fit_with_a_new_checkpoint_killed_at_any_step_then_resumed_equals_undisturbed(
    tmp_path: Path,
) -> None:
    """``--checkpoint DIR`` killed, then run again: where DIR holds a checkpoint the
    rerun refuses (status 2) and names ``--resume DIR``; that command, run as
    told, must end 0 with the undisturbed model and train no lap more (where the
    model was written before the kill, the rerun finds it its own and ends 0)."""
    source = _jsonl(tmp_path / "docs.jsonl", 300, 1)
    corpus = tmp_path / "corpus"
    assert run_lsdask("ingest", "jsonl", source, "--out", corpus,
                      "--docs-per-row-group", "100").returncode == 0  # fmt: skip
    fit = ["fit", corpus, "--topics", "3", "--sparsity", "2", "--laps", "2", "--sync",
           "--seed", "0"]  # fmt: skip
    reference = tmp_path / "reference"
    log = tmp_path / "steps.log"
    n = _steps([*fit, "--checkpoint", reference / "ck", "--out", reference / "m"], log)
    want = load_model(reference / "m")
    for k in _kill_steps(n):
        folder = tmp_path / f"kill{k}"
        args = [*fit, "--checkpoint", folder / "ck", "--out", folder / "m"]
        killed = run_lsdask(*args, env=lsdask_env(LSDASK_CRASH_AT_FS=str(k)))
        assert killed.returncode == -signal.SIGKILL, (k, killed.stderr[-2000:])
        again = run_lsdask(*args)
        if again.returncode == 2 and "--resume" in again.stderr:
            resumed = [*fit, "--resume", folder / "ck", "--out", folder / "m"]
            if (folder / "m").exists():
                resumed.append("--overwrite")
            again = run_lsdask(*resumed)
        assert again.returncode == 0, (k, again.returncode, again.stderr[-2000:])
        got = load_model(folder / "m")
        assert got.n_laps_ == 2, (k, got.n_laps_)
        np.testing.assert_allclose(got.components_, want.components_, rtol=1e-10)
        assert _leftovers(folder) == [], (k, _leftovers(folder))


def test_an_append_without_ids_killed_at_any_step_keeps_every_document_once(
    tmp_path: Path,
) -> None:
    """Without ``--id`` a rerun cannot be told from a new append by the documents'
    ids: a kill after the commit (in the staging clean-up) must still leave the
    documents in the corpus once, and the rerun must not add them again."""
    first, more = _jsonl(tmp_path / "a.jsonl", 200, 1), _jsonl(tmp_path / "b.jsonl", 150, 2)

    def prepare(folder: Path) -> None:
        run = run_lsdask("ingest", "jsonl", first, "--out", folder / "c",
                         "--docs-per-row-group", "100")  # fmt: skip
        assert run.returncode == 0, run.stderr

    def args(folder: Path) -> list:
        return ["ingest", "jsonl", more, "--append-to", folder / "c"]

    def compare(folder: Path, reference: Path) -> None:
        assert Corpus.open(folder / "c").n_docs == 350
        assert _corpus_docs(folder / "c") == _corpus_docs(reference / "c")
        assert len(list((folder / "c" / "parts").iterdir())) == 2

    _check_each_kill(tmp_path, args, compare, prepare)
