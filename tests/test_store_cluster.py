"""A fit on a cluster started the way one is started on machines that share no
disk: ``dask scheduler`` and ``dask worker`` commands, each in a folder of its
own, reading a corpus that exists only in an S3 server."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import lsdask
from lsdask.io.corpus.on_store import StoreCorpus
from lsdask.io.corpus.source import corpus_source
from lsdask.synthetic import make_bars_corpus
from tests.s3_server import s3_options

pytestmark = pytest.mark.slow


@pytest.fixture
def scheduler_file(tmp_path: Path) -> Iterator[Path]:
    """A scheduler and two single-threaded workers, each started by the ``dask``
    command in its own working folder; the scheduler file their address is in."""
    address = tmp_path / "scheduler" / "scheduler.json"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    procs: list[subprocess.Popen] = []
    commands = [("scheduler", ["scheduler", "--no-dashboard", "--port", "0"])]
    commands += [
        (f"worker{i}", ["worker", "--nthreads", "1", "--no-dashboard", "--local-directory", "."])
        for i in (1, 2)
    ]
    try:
        for folder, args in commands:
            (tmp_path / folder).mkdir()
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-m", "dask", *args, "--scheduler-file", str(address)],
                    cwd=tmp_path / folder,
                    env=env,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
            if folder == "scheduler":
                _wait_for(address)
        yield address
    finally:
        for p in procs[::-1]:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()


def _wait_for(path: Path, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"the scheduler wrote no {path} in {timeout} s")
        time.sleep(0.2)


def test_a_fit_on_dask_commands_reads_the_corpus_from_s3(
    scheduler_file: Path, s3_bucket: str, s3_endpoint: str
) -> None:
    from distributed import Client

    X, _ = make_bars_corpus(n_docs=300, doc_topic_prior=0.1, random_state=5)
    url, options = f"{s3_bucket}/bars", s3_options(s3_endpoint)
    words = [f"px{i}" for i in range(X.shape[1])]
    StoreCorpus.write(url, X, words, storage_options=options, docs_per_row_group=100)
    source, vocab = corpus_source(url, options)
    kw = dict(sparsity=3, n_laps=3, random_state=2, alpha=1.0, progress=False, batches_per_update=1)
    with Client(scheduler_file=str(scheduler_file), timeout=60) as client:
        client.wait_for_workers(2, timeout=120)
        on_cluster = lsdask.LDA(8, client=client, **kw).fit(source, vocabulary=vocab)
        where = client.run(os.getcwd)
    here = lsdask.LDA(8, client="sync", **kw).fit(source, vocabulary=vocab)
    assert len(set(where.values())) == 2 and os.getcwd() not in where.values()
    np.testing.assert_allclose(on_cluster.elbo_trace_, here.elbo_trace_, rtol=1e-10)
    np.testing.assert_allclose(on_cluster.components_, here.components_, rtol=1e-9)
    assert on_cluster.vocabulary_ == words
