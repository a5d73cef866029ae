"""Runs that finish what they started (issue 25, finding 5).

A fit killed after its last checkpoint but before its output folder is written,
rerun as the same command, trains no more laps and writes the output once; the
same command rerun after it completed trains nothing over the same corpus, and
is a new one over a corpus documents were added to (the nightly job: N more
laps); ``--laps 0`` exports a checkpoint without training.
"""

from __future__ import annotations

import json
import shutil
import signal
from pathlib import Path

import numpy as np

from lsdask.io.corpus import Corpus
from lsdask.persist import load_model
from lsdask.persist.checkpoint import CheckpointDir
from lsdask.synthetic import make_bars_corpus
from tests.lsdask_processes import lsdask_env, run_lsdask


def _laps(out: str) -> str:
    return next(line for line in out.splitlines() if line.startswith("laps: "))


def test_an_interrupted_command_rerun_finishes_exactly_what_it_asked(tmp_path: Path) -> None:
    X, _ = make_bars_corpus(300, doc_topic_prior=0.1, random_state=1)
    corpus = tmp_path / "corpus"
    Corpus.write(corpus, X, [f"p{i}" for i in range(25)], docs_per_row_group=100)
    ckpt, out = tmp_path / "ckpt", tmp_path / "model"
    args = ["fit", corpus, "--topics", "4", "--sparsity", "2", "--laps", "2", "--sync",
            "--out", out]  # fmt: skip
    # killed after training, before the output: no model, a finished checkpoint
    crashed = run_lsdask(*args, "--checkpoint", ckpt, env=lsdask_env(LSDASK_CRASH_AT="fit.output"))
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr
    assert not out.exists()
    state = CheckpointDir(ckpt).read_state()
    assert state is not None and state.lap == 2 and state.command["done"] is False
    # the same command (continued with --resume): no more laps, the output written once
    again = run_lsdask(*args, "--resume", ckpt)
    assert again.returncode == 0, again.stderr
    assert _laps(again.stdout).startswith("laps: 2, 0 this run"), again.stdout
    first = load_model(out)
    assert first.n_laps_ == 2 and CheckpointDir(ckpt).read_state().command["done"] is True
    # run once more over the same corpus, the same command finds its work done
    retried = run_lsdask(*args, "--resume", ckpt)
    assert retried.returncode == 0, retried.stderr
    assert _laps(retried.stdout).startswith("laps: 2, 0 this run"), retried.stdout
    assert load_model(out).n_laps_ == 2
    # over a corpus documents were added to, it is a new one: 2 more laps (the nightly job)
    more, _ = make_bars_corpus(100, doc_topic_prior=0.1, random_state=2)
    Corpus.open(corpus).append(more)
    nightly = run_lsdask(*args, "--resume", ckpt)
    assert nightly.returncode == 0, nightly.stderr
    assert load_model(out).n_laps_ == 4
    # --laps 0 exports the checkpoint as it is, without training
    export = tmp_path / "export"
    code = run_lsdask("fit", corpus, "--topics", "4", "--sparsity", "2", "--laps", "0",
                      "--sync", "--resume", ckpt, "--out", export)  # fmt: skip
    assert code.returncode == 0, code.stderr
    exported, trained = load_model(export), load_model(out)
    assert exported.n_laps_ == 4
    np.testing.assert_array_equal(exported.components_, trained.components_)
    meta = json.loads((export / "params.json").read_text())
    assert "checkpoint_dir" not in meta["params"]
    refused = run_lsdask("fit", corpus, "--topics", "4", "--laps", "0", "--sync", "--out",
                         tmp_path / "none")  # fmt: skip
    assert refused.returncode == 2 and "n_laps=0 trains nothing" in refused.stderr


def test_a_command_killed_after_its_output_before_its_mark_finishes_on_rerun(
    tmp_path: Path,
) -> None:
    """Killed between writing its model and recording itself done in the
    checkpoint (the mark's own temporary left behind): the same command again
    recognises its model (``command.json`` in it), records the mark, trains and
    writes nothing, exits 0 and leaves no temporary."""
    X, _ = make_bars_corpus(300, doc_topic_prior=0.1, random_state=1)
    corpus = tmp_path / "corpus"
    Corpus.write(corpus, X, [f"p{i}" for i in range(25)], docs_per_row_group=100)
    ckpt, out = tmp_path / "ckpt", tmp_path / "model"
    args = ["fit", corpus, "--topics", "4", "--sparsity", "2", "--laps", "2", "--sync",
            "--out", out, "--resume", ckpt]  # fmt: skip
    log = tmp_path / "steps.log"
    assert run_lsdask(*args, env=lsdask_env(LSDASK_FS_LOG=str(log))).returncode == 0
    steps = log.read_text().splitlines()
    # the last step: the mark's state.json replaced into place (killed just before it)
    mark = next(
        int(line.split()[0])
        for line in reversed(steps)
        if line.split()[1] == "replace" and line.endswith("/state.json")
    )
    assert mark == len(steps), steps[-3:]
    for path in (ckpt, out):
        shutil.rmtree(path)
    killed = run_lsdask(*args, env=lsdask_env(LSDASK_CRASH_AT_FS=str(mark)))
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert json.loads((out / "command.json").read_text())["laps"] == 2
    assert CheckpointDir(ckpt).read_state().command["done"] is False
    written = (out / "arrays.npz").stat().st_mtime_ns
    again = run_lsdask(*args)
    assert again.returncode == 0, again.stderr
    assert _laps(again.stdout).startswith("laps: 2, 0 this run"), again.stdout
    assert CheckpointDir(ckpt).read_state().command["done"] is True
    assert (out / "arrays.npz").stat().st_mtime_ns == written
    assert sorted(p.name for p in ckpt.rglob(".*") if p.name != ".lsdask.lock") == []
