"""A fit whose corpus and checkpoints are in an S3 server, its driver killed
mid-fit and resumed on another machine (another working copy): the same model
as a fit never stopped."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import lsdask
from lsdask.io.corpus.on_store import StoreCorpus
from lsdask.io.stores import VersionLog, open_location
from lsdask.synthetic import make_bars_corpus
from tests.s3_server import s3_options

pytestmark = pytest.mark.slow

SETTINGS = dict(n_components=8, sparsity=3, n_laps=6, random_state=4, alpha=1.0,
                batches_per_update=1, client="sync", progress=False)  # fmt: skip

_FIT = """
import json, sys
import lsdask
corpus, checkpoint = sys.argv[1], sys.argv[2]
options, settings = json.loads(sys.argv[3]), json.loads(sys.argv[4])
lsdask.LDA(checkpoint_dir=checkpoint, storage_options=options, resume=True, **settings).fit(corpus)
"""


@pytest.fixture
def corpus(s3_bucket: str, s3_endpoint: str) -> tuple[str, dict[str, Any]]:
    X, _ = make_bars_corpus(n_docs=900, doc_topic_prior=0.1, random_state=7)
    url, options = f"{s3_bucket}/corpus", s3_options(s3_endpoint)
    words = [f"px{i}" for i in range(X.shape[1])]
    StoreCorpus.write(url, X, words, storage_options=options, docs_per_row_group=100)
    return url, options


def _versions(url: str, options: dict[str, Any]) -> int:
    latest = VersionLog(open_location(url, options)).latest()
    return 0 if latest is None else latest.number


def test_a_killed_fit_resumes_from_the_store_on_another_machine(
    corpus: tuple[str, dict[str, Any]], s3_bucket: str, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    url, options = corpus
    monkeypatch.setenv("LSDASK_STORE_COPIES", str(tmp_path / "reference"))
    whole = lsdask.LDA(
        checkpoint_dir=f"{s3_bucket}/whole", storage_options=options, **SETTINGS
    ).fit(url)
    checkpoint = f"{s3_bucket}/checkpoint"
    env = {**os.environ, "LSDASK_STORE_COPIES": str(tmp_path / "first-machine")}
    child = subprocess.Popen(
        [sys.executable, "-c", _FIT, url, checkpoint, json.dumps(options), json.dumps(SETTINGS)],
        env=env, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 300
    while _versions(checkpoint, options) < 3:  # two laps' checkpoints in the store
        assert child.poll() is None, child.stderr.read() if child.stderr else ""
        assert time.monotonic() < deadline, "no checkpoint reached the store"
        time.sleep(0.05)
    child.send_signal(signal.SIGKILL)
    child.wait()
    killed_at = _versions(checkpoint, options)
    monkeypatch.setenv("LSDASK_STORE_COPIES", str(tmp_path / "second-machine"))
    with caplog.at_level("INFO", logger="lsdask.persist"):
        resumed = lsdask.LDA(
            checkpoint_dir=checkpoint, storage_options=options, resume=True, **SETTINGS
        ).fit(url)
    assert any(r.getMessage().startswith("resuming ckpt-") for r in caplog.records)
    assert any("rebuilt in" in r.getMessage() for r in caplog.records)
    assert _versions(checkpoint, options) > killed_at  # it went on from there
    np.testing.assert_allclose(resumed.components_, whole.components_, rtol=1e-10)
    np.testing.assert_allclose(resumed.elbo_trace_, whole.elbo_trace_, rtol=1e-10)
    top = [d.doc_id for d in resumed.top_documents(0, n=3)]  # over the corpus in the store
    assert top == [d.doc_id for d in whole.top_documents(0, n=3, corpus=url)] and len(top) == 3


def test_a_store_checkpoint_of_esvi_is_refused(corpus: tuple[str, dict[str, Any]]) -> None:
    url, _ = corpus
    model = lsdask.LDA(
        4, algorithm="esvi", checkpoint_dir="memory://ckpt", client="sync", progress=False
    )
    with pytest.raises(ValueError, match="checkpoints in a store are written for algorithm"):
        model.fit(url)
