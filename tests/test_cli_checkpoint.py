"""`lsdask fit --checkpoint/--resume` as a user runs it: a real process,
stopped with SIGTERM, then resumed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import numpy as np
import scipy.sparse as sp

from lsdask.io.corpus import Corpus
from lsdask.persist.checkpoint import CheckpointDir


def _corpus(path, rng, n_docs=3000, V=300):
    X = sp.random(n_docs, V, density=0.08, random_state=rng, format="csr")
    X.data = np.ceil(X.data * 5)
    Corpus.write(path, X, [f"w{i}" for i in range(V)], docs_per_row_group=100)


def test_sigterm_writes_a_checkpoint_and_resume_finishes(tmp_path):
    rng = np.random.default_rng(0)
    _corpus(tmp_path / "c", rng)
    ckpt = tmp_path / "ckpt"
    command = [
        sys.executable, "-m", "lsdask", "fit", str(tmp_path / "c"), "--topics", "40",
        "--out", str(tmp_path / "model"), "--sync", "--dense",
    ]  # fmt: skip
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [*command, "--laps", "200", "--checkpoint", str(ckpt)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    deadline = time.time() + 120
    while time.time() < deadline and not (ckpt / "LATEST").exists() and proc.poll() is None:
        time.sleep(0.2)
    assert (ckpt / "LATEST").exists(), "no checkpoint appeared"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err  # 128 + SIGTERM, as schedulers expect
    assert "stopped; checkpoint written to" in err and "Traceback" not in err
    # the hint is a command that runs: --resume replaces --checkpoint (argparse refuses both)
    assert f"with --resume {ckpt} in place of --checkpoint {ckpt}" in err
    state = CheckpointDir(ckpt).read()["state"]
    assert 1 <= state.lap < 200
    done = subprocess.run(
        [*command, "--laps", str(state.lap + 1), "--resume", str(ckpt)],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"laps: {state.lap + 1}, 1 this run (" in done.stdout


def test_ctrl_c_to_the_process_group_stops_a_cluster_fit_with_a_checkpoint(tmp_path):
    """A terminal's Ctrl-C reaches the worker processes too: they ignore it, and
    the fit stops after the wave under way and writes its checkpoint (no
    cancelled futures)."""
    rng = np.random.default_rng(1)
    _corpus(tmp_path / "c", rng)
    ckpt = tmp_path / "ckpt"
    proc = subprocess.Popen(
        [sys.executable, "-m", "lsdask", "fit", str(tmp_path / "c"), "--topics", "40",
         "--out", str(tmp_path / "model"), "--workers", "2", "--dense", "--laps", "200",
         "--checkpoint", str(ckpt)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"}, start_new_session=True,
    )  # fmt: skip
    deadline = time.time() + 180
    while time.time() < deadline and not (ckpt / "LATEST").exists() and proc.poll() is None:
        time.sleep(0.2)
    assert (ckpt / "LATEST").exists(), "no checkpoint appeared"
    os.killpg(proc.pid, signal.SIGINT)  # as a terminal does: the whole group
    _, err = proc.communicate(timeout=180)
    assert proc.returncode == 130, err
    assert "stopped; checkpoint written to" in err and "CancelledError" not in err
    assert 1 <= CheckpointDir(ckpt).read()["state"].lap < 200


def test_resume_takes_in_part_files_removed_from_the_corpus(tmp_path):
    """As LDA.fit does, the CLI rescans the corpus's parts/: a resume takes in
    the part files removed since the checkpoint."""
    from lsdask.cli import main

    rng = np.random.default_rng(2)
    X = sp.random(400, 80, density=0.1, random_state=rng, format="csr")
    X.data = np.ceil(X.data * 5)
    Corpus.write(tmp_path / "c", X, [f"w{i}" for i in range(80)], docs_per_row_group=100,
                 docs_per_file=200)  # fmt: skip
    argv = ["fit", str(tmp_path / "c"), "--topics", "5", "--out", str(tmp_path / "m"), "--sync",
            "--laps", "1", "--gibbs-sweeps", "10"]  # fmt: skip
    assert main([*argv, "--checkpoint", str(tmp_path / "ck")]) == 0
    parts = sorted((tmp_path / "c" / "parts").iterdir())
    assert len(parts) == 2
    parts[0].unlink()  # the oldest partition retired by hand
    assert main([*argv[:-4], "--laps", "2", "--gibbs-sweeps", "10", "--resume",
                 str(tmp_path / "ck")]) == 0  # fmt: skip
    assert Corpus.open(tmp_path / "c").n_docs == 200


def test_sigterm_during_an_ingest_leaves_no_temporary_folder(tmp_path):
    """SIGTERM unwinds an ingest as Ctrl-C does: its half-written ``.OUT.tmp-*``
    folder is removed, and the command exits with 143."""
    import json
    import string

    rng = np.random.default_rng(0)
    letters = np.array(list(string.ascii_lowercase))
    words = ["".join(w) for w in letters[rng.integers(0, 26, (2000, 6))]]
    with open(tmp_path / "docs.jsonl", "w") as f:
        for doc in rng.integers(0, 2000, (200_000, 12)).tolist():
            f.write(json.dumps({"text": " ".join(words[i] for i in doc)}) + "\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "lsdask", "ingest", "jsonl", str(tmp_path / "docs.jsonl"),
         "--out", str(tmp_path / "c")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None and not list(tmp_path.glob(".c.tmp-*")):
        time.sleep(0.05)
    assert list(tmp_path.glob(".c.tmp-*")), "the ingest wrote no temporary folder"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err
    assert err.strip().endswith("lsdask: terminated (SIGTERM)") and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["docs.jsonl"]


def test_a_scheduler_killed_mid_fit_gets_one_line_and_keeps_the_checkpoint(tmp_path):
    """An external scheduler killed under `lsdask fit --scheduler` is one
    `lsdask: error:` line that points to --resume, not Dask's tracebacks."""
    import socket

    rng = np.random.default_rng(0)
    _corpus(tmp_path / "c", rng)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    address = f"tcp://127.0.0.1:{port}"
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    scheduler = subprocess.Popen(
        [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
         "--port", str(port), "--dashboard-address", ":0"], **quiet,
    )  # fmt: skip
    worker = subprocess.Popen(
        [sys.executable, "-m", "distributed.cli.dask_worker", address, "--nthreads", "1",
         "--nworkers", "1", "--no-dashboard"], cwd="/", **quiet,
    )  # fmt: skip
    ckpt = tmp_path / "ckpt"
    try:
        fit = subprocess.Popen(
            [sys.executable, "-m", "lsdask", "fit", "c", "--topics", "40", "--out", "m",
             "--laps", "200", "--checkpoint", "ckpt", "--scheduler", address, "--init", "kmeans++"],
            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        deadline = time.time() + 120
        while time.time() < deadline and not (ckpt / "LATEST").exists() and fit.poll() is None:
            time.sleep(0.2)
        assert (ckpt / "LATEST").exists(), fit.communicate(timeout=10)
        scheduler.kill()
        _, err = fit.communicate(timeout=120)
    finally:
        for proc in (worker, scheduler):
            proc.kill()
            proc.wait(timeout=30)
    assert fit.returncode == 1, err
    last = err.strip().splitlines()[-1]
    assert last.startswith("lsdask: error: ") and "Traceback" not in err, err
    assert "--resume" in last
    assert CheckpointDir(ckpt).read()["state"].lap >= 1
