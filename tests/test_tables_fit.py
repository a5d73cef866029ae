"""Tables read in place through the public faces: ``lsdask.LDA.fit(table)`` (and
the HDP, which inherits it), ``lsdask.ParquetTable``/``lsdask.DeltaTable``, and
``lsdask fit --table``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import lsdask
from lsdask.cli import main
from lsdask.persist import load_model

V = 24
WORDS = [f"zq{chr(97 + i // 26)}{chr(97 + i % 26)}" for i in range(V)]


def _docs(rng: np.random.Generator, n: int) -> pa.Table:
    topics = rng.dirichlet(np.full(V, 0.1), size=3)
    ids = [rng.choice(V, size=int(rng.integers(5, 25)), p=topics[d % 3]).tolist() for d in range(n)]
    return pa.table(
        {
            "token_ids": pa.array(ids, pa.list_(pa.int32())),
            "body": [" ".join(WORDS[i] for i in d) for d in ids],
            "part": [d % 2 for d in range(n)],
        }
    )


@pytest.fixture
def table_root(tmp_path: Path, rng: np.random.Generator) -> Path:
    root = tmp_path / "table"
    pq.write_to_dataset(_docs(rng, 200), str(root), partition_cols=["part"], row_group_size=50)
    return root


def test_the_tables_are_exported_without_loading_pyarrow_at_import() -> None:
    assert lsdask.ParquetTable is lsdask.io.tables.ParquetTable
    assert lsdask.DeltaTable is lsdask.io.tables.DeltaTable
    assert {"ParquetTable", "DeltaTable"} <= set(lsdask.__all__)
    code = "import sys, lsdask; print('pyarrow' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_lda_and_hdp_fit_a_table_itself(table_root: Path) -> None:
    table = lsdask.ParquetTable(table_root, tokens="token_ids", vocabulary=WORDS)
    kw = dict(n_laps=2, client="sync", random_state=0)
    direct = lsdask.LDA(3, **kw).fit(table)
    source, vocab = table.source()
    by_source = lsdask.LDA(3, **kw).fit(source, vocabulary=vocab)
    np.testing.assert_allclose(direct.components_, by_source.components_, rtol=1e-12)
    assert direct.vocabulary_ == WORDS
    assert direct.transform(table).shape == (200, 3)
    hdp = lsdask.HDP(max_components=4, n_laps=2, client="sync", random_state=0).fit(table)
    assert hdp.vocabulary_ == WORDS and np.isfinite(hdp.elbo_trace_).all()
    text = lsdask.ParquetTable(table_root, text="body", min_df=2)
    model = lsdask.LDA(3, **kw).fit(text)
    assert model.vocabulary_ == text.source()[1]
    with pytest.raises(ValueError, match="has words of its own, which differ"):
        lsdask.LDA(3, **kw).fit(table, vocabulary=WORDS[::-1])
    with pytest.raises(ValueError, match="algorithm='svi-gibbs' streams documents"):
        lsdask.LDA(3, algorithm="svi-gibbs", **kw).fit(table)
    # a text table over a model's vocabulary is transformed; a rebuilt one is refused
    over_model = lsdask.ParquetTable(table_root, text="body", vocabulary=model.vocabulary_)
    assert model.transform(over_model).shape == (200, 3)


def test_lsdask_fit_table_saves_a_model_with_its_vocabulary(
    table_root: Path, tmp_path: Path, capsys
) -> None:
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("".join(w + "\n" for w in WORDS))
    out = tmp_path / "model"
    argv = ["fit", "--table", str(table_root), "--tokens-column", "token_ids", "--vocabulary",
            str(vocab), "--topics", "3", "--laps", "2", "--sync", "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert f"lsdask fit --table {table_root}" in printed and "200 documents" in printed
    model = load_model(out)
    assert model.vocabulary_ == WORDS and (out / "elbo.png").is_file()
    text_out = tmp_path / "text-model"
    argv = ["fit", "--table", str(table_root), "--text-column", "body", "--min-df", "2",
            "--topics", "3", "--laps", "1", "--sync", "--out", str(text_out)]  # fmt: skip
    assert main(argv) == 0
    built = lsdask.ParquetTable(table_root, text="body", min_df=2).source()[1]
    assert load_model(text_out).vocabulary_ == built


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["CORPUS_PLACEHOLDER", "--tokens-column", "ids"], "--tokens-column: options of a table"),
        (["--table", "T", "CORPUS_PLACEHOLDER"], "give a CORPUS .* or --table .*, not both"),
        ([], "give a CORPUS to fit, or a table read in place"),
        (["--table", "T"], "--table needs --tokens-column or --text-column"),
        (["--table", "T", "--text-column", "body", "--table-version", "1"], "it needs --delta"),
        (["--table", "T", "--tokens-column", "nope", "--vocabulary", "V"], "no column 'nope'"),
        (["--table", "T", "--delta", "--text-column", "body"], "no table there"),
    ],
)
def test_lsdask_fit_table_errors_are_one_line(
    table_root: Path, tmp_path: Path, capsys, extra: list[str], message: str
) -> None:
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("".join(w + "\n" for w in WORDS))
    corpus = tmp_path / "corpus"
    names = {"T": str(table_root), "V": str(vocab), "CORPUS_PLACEHOLDER": str(corpus)}
    argv = ["fit", *[names.get(a, a) for a in extra], "--topics", "3", "--sync",
            "--out", str(tmp_path / "m")]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("lsdask: error: ") and err.count("\n") == 1
    import re

    assert re.search(message, err), err


def test_lsdask_fit_a_delta_table_then_resume_on_its_next_version(
    tmp_path: Path, rng: np.random.Generator, capsys
) -> None:
    deltalake = pytest.importorskip("deltalake")
    root = tmp_path / "delta"
    deltalake.write_deltalake(str(root), _docs(rng, 120), partition_by=["part"])
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("".join(w + "\n" for w in WORDS))
    ck = tmp_path / "ck"
    argv = [
        "fit",
        "--table",
        str(root),
        "--delta",
        "--tokens-column",
        "token_ids",
        "--vocabulary",
        str(vocab),
        "--topics",
        "3",
        "--sync",
        "--out",
        str(tmp_path / "m"),
    ]
    assert main([*argv, "--laps", "2", "--checkpoint", str(ck)]) == 0
    assert "Delta table" in capsys.readouterr().out
    deltalake.write_deltalake(str(root), _docs(rng, 40), mode="append")
    assert main([*argv, "--laps", "1", "--resume", str(ck)]) == 0
    printed = capsys.readouterr().out
    assert "version 1" in printed and "160 documents" in printed and "3, 1 this run" in printed
    assert main([*argv, "--laps", "1", "--table-version", "0", "--resume", str(ck)]) == 0
    assert "120 documents" in capsys.readouterr().out
