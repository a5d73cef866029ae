"""The command line on an S3 server: ingest into s3://, append, fit with the
checkpoint and the model in s3://, then topics and score read them from there."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from lsdask.io.corpus.on_store import StoreCorpus
from lsdask.io.stores import VersionLog, open_location
from tests.s3_server import s3_options

pytestmark = pytest.mark.slow

TOPICS = ["stock market trade price bank", "goal match team player season"]


def _lsdask(*args: str, options: list[str]) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.run(
        [sys.executable, "-m", "lsdask", *args, *options],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip


def _flags(endpoint: str) -> list[str]:
    return [
        "--storage-option", "key=testing", "--storage-option", "secret=testing",
        "--storage-option", f"client_kwargs.endpoint_url={endpoint}",
        "--storage-option", "client_kwargs.region_name=us-east-1",
    ]  # fmt: skip


def _jsonl(path: Path, n: int, seed: int) -> Path:
    import random

    rng = random.Random(seed)
    with path.open("w") as f:
        for i in range(n):
            words = TOPICS[i % 2].split()
            text = " ".join(rng.choice(words) for _ in range(30))
            f.write(json.dumps({"text": text}) + "\n")
    return path


def test_ingest_fit_topics_and_score_on_s3(
    s3_bucket: str, s3_endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    flags = _flags(s3_endpoint)
    corpus, model, ckpt = f"{s3_bucket}/corpus", f"{s3_bucket}/model", f"{s3_bucket}/ckpt"
    monkeypatch.setenv("LSDASK_STORE_COPIES", str(tmp_path / "cache"))
    first = _jsonl(tmp_path / "a.jsonl", 120, 0)
    more = _jsonl(tmp_path / "b.jsonl", 40, 1)
    done = _lsdask(
        "ingest", "jsonl", str(first), "--out", corpus, "--min-df", "1",
        "--docs-per-row-group", "50", options=flags,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    done = _lsdask("ingest", "jsonl", str(more), "--append-to", corpus, options=flags)
    assert done.returncode == 0, done.stderr
    options = s3_options(s3_endpoint)
    stored = StoreCorpus.open(corpus, options)
    assert stored.n_docs == 160 and stored.version == 2
    assert sorted(stored.vocab) == sorted({w for t in TOPICS for w in t.split()})
    done = _lsdask(
        "fit", corpus, "--out", model, "--checkpoint", ckpt, "--topics", "2", "--laps", "3",
        "--sync", options=flags,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"model: {model}" in done.stdout
    assert VersionLog(open_location(ckpt, options)).latest() is not None
    topics = _lsdask("topics", model, options=flags)
    assert topics.returncode == 0, topics.stderr
    assert "market" in topics.stdout and "goal" in topics.stdout
    score = _lsdask("score", model, corpus, options=flags)
    assert score.returncode == 0, score.stderr
    assert "nats/token" in score.stdout
    weights = f"{s3_bucket}/weights.parquet"
    done = _lsdask("transform", model, corpus, "--out", weights, "--sync", options=flags)
    assert done.returncode == 0, done.stderr
    location = open_location(weights, options)
    with location.fs.open(location.root, "rb") as f:
        table = pq.read_table(f)
    assert table.num_rows == 160 and sorted(table.column("doc_id").to_pylist()) == list(range(160))
    again = _lsdask(
        "fit", corpus, "--out", model, "--topics", "2", "--laps", "1", "--sync", options=flags
    )
    assert again.returncode == 2 and "holds a saved model already" in again.stderr


def test_a_bad_storage_option_is_one_line(tmp_path: Path) -> None:
    done = _lsdask(
        "fit",
        "memory://nothing",
        "--out",
        str(tmp_path / "m"),
        "--topics",
        "2",
        options=["--storage-option", "novalue"],
    )
    assert done.returncode == 2
    assert done.stderr.strip().startswith("lsdask: error: --storage-option expects KEY=VALUE")
