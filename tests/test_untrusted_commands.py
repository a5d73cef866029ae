"""Commands under signals and lost workers, and the messages of wrong inputs
(issue 39: findings 9 and 10, and the smaller items).

Real ``python -m lsdask`` processes stopped at named points
(:mod:`lsdask.io.faults`) and signalled there; a real LocalCluster of worker
processes with one killed before the fit's first wave.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import scipy.sparse as sp

import lsdask
from lsdask.io.corpus import Corpus
from lsdask.persist import load_model
from lsdask.persist.checkpoint import CheckpointDir
from lsdask.persist.svi_gibbs import checkpoint_path
from lsdask.synthetic import make_bars_corpus
from tests.lsdask_processes import (
    lsdask_env,
    paused_env,
    run_lsdask,
    start_lsdask,
    wait_reached,
    without_progress,
)

SIGNALS = [(signal.SIGTERM, "SIGTERM"), (signal.SIGINT, "SIGINT")]


def _laps(out: str) -> str:
    return next(line for line in out.splitlines() if line.startswith("laps: "))


@pytest.fixture(scope="module")
def bars(tmp_path_factory) -> Path:
    """A corpus of three row groups."""
    X, _ = make_bars_corpus(300, doc_topic_prior=0.1, random_state=1)
    corpus = tmp_path_factory.mktemp("bars") / "corpus"
    Corpus.write(corpus, X, [f"p{i}" for i in range(25)], docs_per_row_group=100)
    return corpus


def _signalled_at(point: str, sig: int, args: list, tmp_path: Path) -> subprocess.CompletedProcess:
    """Run ``lsdask ARGS`` to the point ``point``, send it ``sig`` there, let it go
    on; the finished process."""
    pause = tmp_path / f"pause-{point}-{int(sig)}"
    proc = start_lsdask(*args, env=paused_env(pause, point))
    wait_reached(pause, proc)
    proc.send_signal(sig)
    time.sleep(0.3)  # the handler runs (and must not stop the command)
    pause.touch()
    out, err = proc.communicate(timeout=300)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


# ---- finding 9: a signal once the work is saved changes nothing


@pytest.mark.parametrize(
    ("point", "sig", "name"),
    [("fit.output", signal.SIGTERM, "SIGTERM"), ("command.committed", signal.SIGINT, "SIGINT")],
)
def test_a_signal_at_the_fit_output_step_exits_0_and_the_rerun_trains_nothing(
    bars: Path, tmp_path: Path, point: str, sig: int, name: str
) -> None:
    """At ``fit.output`` the fit has trained and written its last checkpoint, and
    writes its model next: the signal is held until the model is in place;
    at ``command.committed`` the work is saved. Either way the command exits 0,
    and the same command run again (as a retry loop would) trains no lap."""
    ckpt, out = tmp_path / "ckpt", tmp_path / "model"
    args = ["fit", bars, "--topics", "4", "--sparsity", "2", "--laps", "2", "--sync",
            "--seed", "0", "--out", out, "--resume", ckpt]  # fmt: skip
    done = _signalled_at(point, sig, args, tmp_path)
    assert done.returncode == 0, done.stderr
    assert name in done.stderr and "Traceback" not in done.stderr
    assert load_model(out).n_laps_ == 2
    assert _laps(done.stdout).startswith("laps: 2 ("), done.stdout
    again = run_lsdask(*args)
    assert again.returncode == 0, again.stderr
    assert _laps(again.stdout).startswith("laps: 2, 0 this run"), again.stdout
    assert "nothing to do" in again.stdout
    assert load_model(out).n_laps_ == 2
    assert CheckpointDir(ckpt).read_state().lap == 2


def test_the_same_fit_over_changed_data_trains_its_laps_again(bars: Path, tmp_path: Path) -> None:
    """A finished command run again over the same corpus trains nothing; over a
    corpus that documents were appended to, it is new work (scheduled
    retraining): ``n_laps`` more laps over the corpus as it is now. Through the
    job, as ``lsdask fit --resume`` runs it (``command_id``: its arguments' hash)."""
    import shutil

    from lsdask.jobs import corpus_lda

    corpus, ckpt, out = tmp_path / "corpus", tmp_path / "ckpt", tmp_path / "model"
    shutil.copytree(bars, corpus)

    def fit():
        model = lsdask.LDA(4, sparsity=2, n_laps=2, random_state=0, client="sync",
                           checkpoint_dir=str(ckpt), resume=True)  # fmt: skip
        return corpus_lda.fit_corpus_lda(model, str(corpus), out_dir=out, overwrite=True,
                                         command_id="nightly")  # fmt: skip

    first = fit()
    assert (first.laps, first.laps_this_run) == (2, 2)
    again = fit()  # the same command over the same corpus: nothing to do
    assert (again.laps, again.laps_this_run) == (2, 0)
    X, _ = make_bars_corpus(100, doc_topic_prior=0.1, random_state=2)
    Corpus.open(corpus).append(X)
    more = fit()
    assert (more.laps, more.laps_this_run) == (4, 2)
    same = fit()
    assert (same.laps, same.laps_this_run, same.done_before) == (4, 0, True)
    assert load_model(out).n_laps_ == 4


@pytest.fixture(scope="module")
def bars_model(bars: Path, tmp_path_factory) -> Path:
    model = tmp_path_factory.mktemp("model") / "m"
    assert run_lsdask("fit", bars, "--topics", "4", "--laps", "1", "--sync", "--out",
                      model).returncode == 0  # fmt: skip
    return model


@pytest.mark.parametrize(("sig", "name"), SIGNALS)
def test_a_signal_at_the_transform_output_step_exits_0_with_the_whole_output(
    bars: Path, bars_model: Path, tmp_path: Path, sig: int, name: str
) -> None:
    model, weights = bars_model, tmp_path / "w.parquet"
    args = ["transform", model, bars, "--out", weights, "--sync"]
    done = _signalled_at("transform.output", sig, args, tmp_path)
    assert done.returncode == 0, done.stderr
    assert name in done.stderr and "Traceback" not in done.stderr
    assert pq.read_table(weights).num_rows == 300
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".w.parquet")] == []


@pytest.mark.parametrize(("sig", "name"), SIGNALS)
def test_a_signal_after_an_append_is_committed_exits_0(tmp_path: Path, sig: int, name: str) -> None:
    docs = tmp_path / "docs.jsonl"
    docs.write_text(
        "".join(
            json.dumps({"id": i, "text": f"apple river stone w{i % 7}"}) + "\n" for i in range(40)
        )
    )
    more = tmp_path / "more.jsonl"
    more.write_text(
        "".join(
            json.dumps({"id": 100 + i, "text": f"cloud field w{i % 5}"}) + "\n" for i in range(10)
        )
    )
    corpus = tmp_path / "c"
    assert run_lsdask("ingest", "jsonl", docs, "--id", "id", "--out", corpus, "--min-df", "1",
                      "--max-df", "1.0").returncode == 0  # fmt: skip
    args = ["ingest", "jsonl", more, "--id", "id", "--append-to", corpus]
    done = _signalled_at("command.committed", sig, args, tmp_path)
    assert done.returncode == 0, done.stderr
    assert name in done.stderr and "after the work was saved" in done.stderr
    assert Corpus.open(corpus).n_docs == 50

    # the same signal while the committed append removes its staging folder: the
    # documents are in, so the command ends 0 and its clean-up is finished
    again = tmp_path / "again"
    assert run_lsdask("ingest", "jsonl", docs, "--id", "id", "--out", again, "--min-df", "1",
                      "--max-df", "1.0").returncode == 0  # fmt: skip
    shutil.copytree(again, tmp_path / "probe")
    log = tmp_path / "steps.log"
    probe = ["ingest", "jsonl", more, "--id", "id", "--append-to", tmp_path / "probe"]
    assert run_lsdask(*probe, env=lsdask_env(LSDASK_FS_LOG=str(log))).returncode == 0
    clean_up = next(
        int(line.split()[0])
        for line in log.read_text().splitlines()
        if line.split()[1] == "rmtree" and ".probe.append-" in line
    )
    args = ["ingest", "jsonl", more, "--id", "id", "--append-to", again]
    stopped = run_lsdask(*args, env=lsdask_env(LSDASK_SIGNAL_AT_FS=f"{clean_up}:{name[3:]}"))
    assert stopped.returncode == 0, stopped.stderr
    assert "after the work was saved" in stopped.stderr
    assert Corpus.open(again).n_docs == 50
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".again.")] == []


def test_a_signal_after_patches_and_fit_gmm_saved_their_output_exits_0(tmp_path: Path) -> None:
    """``patches`` (its Zarr stores written) and ``fit-gmm --save`` (its model
    folder renamed in): SIGTERM, then SIGINT, after the work was saved."""
    from PIL import Image

    from lsdask.persist import load_gmm

    images = tmp_path / "images"
    images.mkdir()
    rng = np.random.default_rng(0)
    for i in range(4):
        Image.fromarray((rng.random((40, 48)) * 255).astype(np.uint8)).save(images / f"i{i}.png")
    args = ["patches", images, "--out", tmp_path / "p", "--patch-size", "8", "--seed", "0"]
    done = _signalled_at("command.committed", signal.SIGTERM, args, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "SIGTERM came after the work was saved" in done.stderr
    train = tmp_path / "p" / "train.zarr"
    assert train.is_dir()
    args = ["fit-gmm", train, "--components", "3", "--laps", "2", "--sync", "--save",
            tmp_path / "gmm"]  # fmt: skip
    done = _signalled_at("command.committed", signal.SIGINT, args, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "SIGINT came after the work was saved" in done.stderr
    assert load_gmm(tmp_path / "gmm").n_laps_ == 2


def test_a_finished_svi_gibbs_command_rerun_over_the_same_corpus_trains_nothing(
    tmp_path: Path,
) -> None:
    """The rule of ``lsdask fit`` for ``--algorithm svi-gibbs`` (its own checkpoint
    file), through the job as the command runs it."""
    from lsdask.jobs import corpus_lda

    rng = np.random.default_rng(2)
    X = sp.csr_matrix(rng.poisson(0.6, size=(300, 30)).astype(float))
    corpus, ckpt, out = tmp_path / "c", tmp_path / "ck", tmp_path / "m"
    Corpus.write(corpus, X, [f"w{i}" for i in range(30)], docs_per_row_group=100)

    def fit():
        model = lsdask.LDA(
            4, algorithm="svi-gibbs", alpha=1.0, eta=0.3, n_laps=2, minibatch_size=60,
            gibbs_burnin=1, gibbs_samples=1, random_state=0, client="sync",
            checkpoint_dir=str(ckpt), resume=True,
        )  # fmt: skip
        return corpus_lda.fit_corpus_lda(model, str(corpus), out_dir=out, overwrite=True,
                                         command_id="A")  # fmt: skip

    first = fit()
    assert (first.laps, first.laps_this_run, first.done_before) == (2, 2, False)
    again = fit()
    assert (again.laps, again.laps_this_run, again.done_before) == (2, 0, True)
    assert "nothing to do" in corpus_lda.format_fit_report(again)
    Corpus.open(corpus).append(sp.csr_matrix(rng.poisson(0.6, size=(60, 30)).astype(float)))
    more = fit()
    assert (more.laps, more.laps_this_run, more.done_before) == (4, 2, False)


# ---- finding 10: a worker lost before the first wave


def _kill_a_worker_for_good(cluster, client) -> None:
    """SIGKILL a worker process, its nanny told not to start another (it closes
    instead), and wait until the scheduler counts one worker fewer."""
    from distributed.core import Status

    before = len(client.scheduler_info()["workers"])
    nanny = cluster.workers[sorted(cluster.workers)[0]]
    pid = nanny.pid
    nanny.status = Status.closing_gracefully  # on its worker's exit: close, not restart
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while len(client.scheduler_info()["workers"]) != before - 1:
        assert time.monotonic() < deadline, "the scheduler never saw the worker leave"
        time.sleep(0.02)


def test_a_worker_lost_before_the_first_wave_gives_the_undisturbed_result(tmp_path: Path) -> None:
    """The waves a fit groups its batches into (default: as many as the cluster's
    slots) are those of the cluster as set up, not of the workers alive when the
    fit starts. Memoized VI adds the statistics of a wave on the driver, in batch
    order, whichever worker ran each task (a task is a pure function of its batch
    and the globals): the result is bit for bit the undisturbed one."""
    import zarr
    from distributed import Client, LocalCluster

    rng = np.random.default_rng(5)
    X = (rng.standard_normal((2000, 6)) * rng.uniform(0.3, 3.0, 6)).astype(np.float32)
    z = zarr.create_array(str(tmp_path / "p.zarr"), shape=X.shape, chunks=(250, 6), dtype="f4")
    z[:] = X
    kw = dict(covariance_type="zero-mean", sparsity=2, n_laps=3, random_state=3, tol=1e-15)
    with (
        LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=":0") as cluster,
        Client(cluster) as client,
    ):
        undisturbed = lsdask.GaussianMixture(5, client=client, **kw).fit(str(tmp_path / "p.zarr"))
        _kill_a_worker_for_good(cluster, client)
        assert len(client.scheduler_info()["workers"]) == 1
        disturbed = lsdask.GaussianMixture(5, client=client, **kw).fit(str(tmp_path / "p.zarr"))
    np.testing.assert_array_equal(disturbed.elbo_trace_, undisturbed.elbo_trace_)
    np.testing.assert_array_equal(disturbed.covariances_, undisturbed.covariances_)
    np.testing.assert_array_equal(disturbed.weights_, undisturbed.weights_)


# ---- the smaller items


def test_svi_gibbs_stopped_by_sigterm_exits_143(bars: Path, tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt"
    proc = start_lsdask(
        "fit", bars, "--topics", "4", "--algorithm", "svi-gibbs", "--minibatch-size", "20",
        "--laps", "100000", "--sync", "--out", tmp_path / "m", "--checkpoint", ckpt,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while not checkpoint_path(ckpt).exists():
        assert proc.poll() is None, proc.communicate()[1]
        assert time.monotonic() < deadline, "no checkpoint appeared"
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err
    assert "stopped; checkpoint written to" in err


def test_an_unreachable_scheduler_exits_1(bars: Path, tmp_path: Path) -> None:
    """The environment, not the input: status 1, as docs/cli.md says."""
    env = lsdask_env(DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT="1s")
    done = run_lsdask("fit", bars, "--topics", "3", "--out", tmp_path / "m", "--scheduler",
                      "tcp://127.0.0.1:1", env=env)  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert "could not connect to a Dask scheduler" in done.stderr
    assert len(without_progress(done.stderr)) == 1 and "Traceback" not in done.stderr


@pytest.mark.parametrize("command", ["fit", "transform", "fit-gmm", "patches"])
def test_the_out_of_memory_advice_names_options_the_command_has(
    command: str, bars: Path, tmp_path: Path, monkeypatch, capsys
) -> None:
    """Each option the advice names (``--x``) is one of the command's own, or
    ``lsdask ingest``'s where the advice says to ingest again."""
    import re

    import lsdask.cli.app as app
    from lsdask.cli.parser import COMMANDS, build_parser

    def out_of_memory(args) -> int:
        raise MemoryError

    monkeypatch.setitem(COMMANDS, command, (COMMANDS[command][0], out_of_memory))
    argv = {
        "fit": ["fit", str(bars), "--topics", "3", "--out", str(tmp_path / "m")],
        "transform": ["transform", str(tmp_path), str(bars), "--out", str(tmp_path / "w")],
        "fit-gmm": ["fit-gmm", str(tmp_path / "p.zarr"), "--components", "3"],
        "patches": ["patches", str(tmp_path), "--out", str(tmp_path / "p")],
    }[command]
    assert app.main(argv) == 1
    lines = without_progress(capsys.readouterr().err)
    assert len(lines) == 1 and lines[0].startswith("lsdask: error: out of memory. "), lines
    err = lines[0]
    parser = build_parser()
    subparsers = next(a for a in parser._actions if a.dest == "command").choices

    def flags(name: str) -> set[str]:
        found = set()
        for action in subparsers[name]._actions:
            found.update(action.option_strings)
            for sub in getattr(action, "choices", None) or {}:
                if name == "ingest":
                    found.update(f for a in action.choices[sub]._actions for f in a.option_strings)
        return found

    named = set(re.findall(r"--[a-z][a-z-]+", err))
    assert named, err
    own = flags(command) | (flags("ingest") if "ingest" in err else set())
    assert named <= own, (named - own, err)


def test_lda_on_counts_too_large_to_be_word_counts_says_so() -> None:
    X = np.array([[3, 2**62, 0], [1, 0, 2]], dtype=np.int64)
    match = (r"word counts must be at most 2,147,483,647; document \(row\) 0, word id 1 holds "
             r"4\.61169e\+18\. Counts this large are not word counts")  # fmt: skip
    with pytest.raises(ValueError, match=match):
        lsdask.LDA(2, client="sync").fit(X)
    with pytest.raises(ValueError, match=r"document \(row\) 1, word id 2 holds"):
        lsdask.LDA(2, client="sync").fit(sp.csr_matrix(np.array([[1, 0, 0], [0, 0, 2**62]])))
    one = np.array([[2**62]], dtype=np.int64)  # what the finding tried: "exceeds the 1 ..."
    with pytest.raises(ValueError, match=r"word counts must be at most"):
        lsdask.LDA(2, client="sync").fit(one)


def test_a_gaussian_mixture_given_a_sparse_matrix_says_to_convert_it() -> None:
    X = sp.random(50, 4, density=0.5, format="csr", random_state=0)
    match = (r"X is a scipy sparse matrix \(csr_matrix, shape \(50, 4\)\); GaussianMixture does "
             r"not take sparse input\. Convert it with X\.toarray\(\).*Zarr array")  # fmt: skip
    with pytest.raises(ValueError, match=match):
        lsdask.GaussianMixture(2, client="sync").fit(X)
    fitted = lsdask.GaussianMixture(2, client="sync", n_laps=1).fit(X.toarray())
    with pytest.raises(ValueError, match=r"does not take sparse input"):
        fitted.predict(X)
