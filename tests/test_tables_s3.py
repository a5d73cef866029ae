"""Tables in an S3 bucket (moto's server on the loopback address, s3fs): a
hive-partitioned Parquet dataset and a Delta table, read in place."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import lsdask
from lsdask.errors import DataError
from lsdask.io.tables import DeltaTable, ParquetTable
from tests.s3_server import s3_options

V = 20
WORDS = [f"zq{chr(97 + i)}" for i in range(V)]


def _docs(rng: np.random.Generator, n: int) -> pa.Table:
    ids = [rng.integers(0, V, size=int(rng.integers(3, 15))).tolist() for _ in range(n)]
    return pa.table(
        {
            "token_ids": pa.array(ids, pa.list_(pa.int32())),
            "body": [" ".join(WORDS[i] for i in d) for d in ids],
            "part": [d % 2 for d in range(n)],
        }
    )


def test_a_parquet_dataset_in_a_bucket_reads_as_the_same_files_on_disk(
    tmp_path: Path, rng: np.random.Generator, s3_bucket: str, s3_endpoint: str
) -> None:
    import s3fs

    options = s3_options(s3_endpoint)
    local = tmp_path / "t"
    pq.write_to_dataset(_docs(rng, 90), str(local), partition_cols=["part"], row_group_size=20)
    fs = s3fs.S3FileSystem(**options)
    url = f"{s3_bucket}/docs"
    fs.put(str(local), url, recursive=True)
    fs.pipe(f"{url}/_SUCCESS", b"")
    fs.pipe(f"{s3_bucket}/vocab.txt", "".join(w + "\n" for w in WORDS).encode())

    table = ParquetTable(
        url, tokens="token_ids", vocabulary=f"{s3_bucket}/vocab.txt", storage_options=options
    )
    remote, vocab = table.source()
    here, _ = ParquetTable(local, tokens="token_ids", vocabulary=WORDS).source()
    assert vocab == WORDS
    assert [b.key for b in remote.batches] == [b.key for b in here.batches]
    for a, b in zip(remote.batches, here.batches, strict=True):
        assert (a.load() != b.load()).nnz == 0
    kw = dict(n_laps=2, client="sync", random_state=0)
    np.testing.assert_allclose(
        lsdask.LDA(3, **kw).fit(remote, vocabulary=vocab).components_,
        lsdask.LDA(3, **kw).fit(here, vocabulary=vocab).components_,
        rtol=1e-12,
    )
    text, words = ParquetTable(url, text="body", min_df=1, storage_options=options).source()
    assert text.n_rows == 90 and set(words) <= set(WORDS)
    # an object replaced after listing: the task sees another size
    first = remote.batches[0]
    fs.pipe(f"{url}/{first.file}", b"PAR1" + b"\x00" * 10 + b"PAR1")
    with pytest.raises(DataError, match=rf"{first.file}, row group 0: it holds 18 bytes"):
        first.load()
    with pytest.raises(FileNotFoundError, match="no such folder"):
        ParquetTable(f"{s3_bucket}/none", text="body", storage_options=options).source()


def test_a_delta_table_in_a_bucket(
    rng: np.random.Generator, s3_bucket: str, s3_endpoint: str
) -> None:
    deltalake = pytest.importorskip("deltalake")
    delta_options = {
        "AWS_ENDPOINT_URL": s3_endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": "us-east-1",
        "AWS_ALLOW_HTTP": "true",
        "AWS_S3_ALLOW_UNSAFE_RENAME": "true",
    }
    url = f"{s3_bucket}/delta"
    deltalake.write_deltalake(
        url, _docs(rng, 60), partition_by=["part"], storage_options=delta_options
    )
    table = DeltaTable(
        url,
        tokens="token_ids",
        vocabulary=WORDS,
        storage_options=s3_options(s3_endpoint),
        delta_storage_options=delta_options,
    )
    first, _ = table.source()
    assert first.n_rows == 60 and first.description.startswith(f"Delta table {url} version 0")
    deltalake.write_deltalake(url, _docs(rng, 30), mode="append", storage_options=delta_options)
    grown, _ = table.source()
    assert grown.n_rows == 90
    assert {b.key for b in first.batches} < {b.key for b in grown.batches}
    model = lsdask.LDA(3, n_laps=1, client="sync", random_state=0).fit(grown, vocabulary=WORDS)
    assert model.stats_["n_docs"][0] == pytest.approx(90)
