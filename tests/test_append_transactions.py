"""Nothing lost under crashes: appends commit as transactions, and a killed
output swap is mended. Real processes are killed (SIGKILL, no ``finally``
runs) at the named points of lsdask.io.faults, then the command is run again;
the result must equal an undisturbed run's, with no document lost or counted
twice and no temporary left."""

from __future__ import annotations

import json
import logging
import shutil
import signal
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import scipy.sparse as sp

import lsdask
from lsdask.io.corpus import Corpus, read_all
from lsdask.io.locks import LOCK_NAME
from lsdask.persist import load_lda
from lsdask.persist.checkpoint import CheckpointDir
from tests.lsdask_processes import (
    lsdask_env,
    paused_env,
    run_lsdask,
    start_lsdask,
    wait_reached,
)

V = 40
WORDS = [f"zq{a}{b}" for a in "abcde" for b in "abcdefgh"]  # words to the tokenizer
KILLED = -signal.SIGKILL


# --------------------------------------------------------------------------- helpers


def _jsonl(path: Path, rng: np.random.Generator, n_docs: int) -> Path:
    with open(path, "w", encoding="utf-8") as f:
        for _ in range(n_docs):
            words = rng.choice(WORDS, size=int(rng.integers(3, 12)))
            f.write(json.dumps({"text": " ".join(words)}) + "\n")
    return path


def _corpus(path: Path, rng: np.random.Generator, n_docs: int = 300) -> Path:
    X = sp.random(n_docs, V, density=0.2, random_state=rng, format="csr")
    X.data = np.ceil(X.data * 5)
    Corpus.write(path, X, WORDS, docs_per_row_group=50, docs_per_file=100)
    return path


def _hidden(folder: Path) -> list[str]:
    """Hidden entries of a folder and its parts/, but the lock file: temporaries."""
    found = [p.name for p in folder.iterdir() if p.name.startswith(".")]
    if (folder / "parts").is_dir():
        found += [f"parts/{p.name}" for p in (folder / "parts").iterdir() if p.name[0] == "."]
    return sorted(set(found) - {LOCK_NAME})


def _leftovers(parent: Path) -> list[str]:
    """Temporaries beside the outputs in ``parent`` (``.<name>.<kind>-...``)."""
    return sorted(p.name for p in parent.iterdir() if p.name.startswith("."))


def _same_corpus(a: Path, b: Path) -> None:
    Xa, ida = read_all(Corpus.open(a), return_doc_ids=True)
    Xb, idb = read_all(Corpus.open(b), return_doc_ids=True)
    assert Xa.shape == Xb.shape and abs(Xa - Xb).max() == 0
    np.testing.assert_array_equal(ida, idb)

    def batches(path: Path) -> list[dict]:
        # the transaction id differs, and with it (stamped in the file) the file's digest,
        # and the origin of an append (its staging folder's name)
        return [{k: v for k, v in e.items() if k not in ("txn", "file_blake2b", "origin")}
                for e in Corpus.open(path).manifest["batches"]]  # fmt: skip

    assert batches(a) == batches(b)


def _tokens(path: Path) -> float:
    return Corpus.open(path).n_tokens


def _fit_tokens(path: Path) -> float:
    """The tokens a fit over the corpus at ``path`` trained on."""
    model = lsdask.LDA(3, sparsity=2, n_laps=1, client="sync", random_state=0).fit(str(path))
    return float(model.size_trace_[-1])


# --------------------------------------------------------------------------- appends


@pytest.mark.parametrize("next_step", ["retry", "fit, then retry"])
def test_an_append_killed_before_its_commit_adds_its_documents_once_on_retry(
    tmp_path, next_step, caplog
):
    """Finding: an append killed after its part file was renamed in and before
    the manifest was written left an orphan part, which the next fit took in
    beside the retried append's: its documents counted twice. Now the orphan
    belongs to an append that never committed: left out and quarantined."""
    rng = np.random.default_rng(0)
    corpus = _corpus(tmp_path / "c", rng)
    new = _jsonl(tmp_path / "new.jsonl", rng, 70)
    base_docs, base_tokens = 300, _tokens(corpus)
    shutil.copytree(corpus, tmp_path / "u")
    assert run_lsdask("ingest", "jsonl", new, "--append-to", tmp_path / "u").returncode == 0
    killed = run_lsdask("ingest", "jsonl", new, "--append-to", corpus,
                  env=lsdask_env(LSDASK_CRASH_AT="corpus.append.renamed"))  # fmt: skip
    if next_step.startswith("fit"):
        caplog.set_level(logging.WARNING, logger="lsdask")
        assert _fit_tokens(corpus) == pytest.approx(base_tokens)  # the orphan's are not in
        assert "parts/part-00003.parquet was written by an append that stopped" in caplog.text
        assert Corpus.open(corpus).n_docs == base_docs
    retry = run_lsdask("ingest", "jsonl", new, "--append-to", corpus)
    assert retry.returncode == 0, retry.stderr
    assert Corpus.open(corpus, rescan=True).n_docs == base_docs + 70  # once, not twice
    assert _fit_tokens(corpus) == pytest.approx(_tokens(tmp_path / "u"))
    _same_corpus(corpus, tmp_path / "u")
    assert killed.returncode == KILLED, killed.stderr
    if next_step == "retry":
        assert "was written by an append that stopped before it committed" in retry.stderr
        assert "Moved it to quarantine/part-00003." in retry.stderr
    quarantined = sorted((corpus / "quarantine").iterdir())
    assert len(quarantined) == 1 and pq.read_metadata(quarantined[0]).num_rows == 70
    assert _hidden(corpus) == [] and _leftovers(tmp_path) == []
    assert "pending" not in Corpus.open(corpus).manifest


def test_a_fit_while_an_append_is_under_way_trains_on_the_committed_parts(tmp_path):
    """A fit that rescans while an append's part is renamed in but not committed
    leaves that part out (and does not quarantine it: its append is alive);
    once the append commits, the next fit takes it in."""
    rng = np.random.default_rng(1)
    corpus = _corpus(tmp_path / "c", rng)
    base_tokens = _tokens(corpus)
    pause = tmp_path / "go"
    append = start_lsdask("ingest", "jsonl", _jsonl(tmp_path / "new.jsonl", rng, 60), "--append-to",
                     corpus, env=paused_env(pause, "corpus.append.renamed"))  # fmt: skip
    wait_reached(pause, append)
    assert (corpus / "parts" / "part-00003.parquet").exists()  # renamed in, not committed
    assert _fit_tokens(corpus) == pytest.approx(base_tokens)
    assert Corpus.open(corpus, rescan=True).n_docs == 300
    assert not (corpus / "quarantine").exists()
    pause.touch()
    _, err = append.communicate(timeout=300)
    assert append.returncode == 0, err
    assert Corpus.open(corpus, rescan=True).n_docs == 360
    assert _fit_tokens(corpus) > base_tokens + 1


def test_an_append_landing_while_a_fit_reads_the_corpus_leaves_the_fit_consistent(tmp_path):
    """A fit that read the manifest before an append committed trains on that
    manifest's parts (not the new one it finds in parts/ meanwhile), and does
    not write its older manifest over the append's."""
    rng = np.random.default_rng(2)
    corpus = _corpus(tmp_path / "c", rng)
    before = [f"{b.file}#{b.row_group}" for b in Corpus.open(corpus).batches]
    ckpt, pause = tmp_path / "ckpt", tmp_path / "go"
    fit = start_lsdask("fit", corpus, "--topics", "3", "--out", tmp_path / "m", "--sync", "--laps",
                  "1", "--checkpoint", ckpt, env=paused_env(pause, "corpus.open.read"))  # fmt: skip
    wait_reached(pause, fit)
    Corpus.open(corpus).append(sp.random(60, V, density=0.3, random_state=rng, format="csr"))
    pause.touch()
    out, err = fit.communicate(timeout=300)
    assert fit.returncode == 0, err
    assert "data: 300 documents" in out
    assert CheckpointDir(ckpt).read()["keys"] == before
    assert Corpus.open(corpus).n_docs == 360  # the append's manifest stands


def test_old_corpora_and_parts_of_other_tools_are_taken_as_before(tmp_path):
    """Corpora written before transactions (no ids in parts or manifest) open,
    rescan and take appends; a part of another tool (no stamp), or an lsdask
    part copied from another corpus (a transaction this one never heard of), is
    adopted by a rescan as before; only a pending append's part is set aside."""
    rng = np.random.default_rng(3)
    corpus = _corpus(tmp_path / "c", rng)
    manifest = json.loads((corpus / "manifest.json").read_text())
    for entry in manifest["batches"]:
        entry.pop("txn", None)
        entry.pop("file_blake2b", None)  # nor digests
    for part in sorted((corpus / "parts").iterdir()):  # as lsdask wrote them before
        table = pq.read_table(part)
        metadata = {k: v for k, v in table.schema.metadata.items() if k != b"lsdask.transaction"}
        pq.write_table(table.replace_schema_metadata(metadata), part, row_group_size=50)
        manifest["batches"] = [
            {**e, "file_bytes": part.stat().st_size} if e["file"].endswith(part.name) else e
            for e in manifest["batches"]
        ]
    (corpus / "manifest.json").write_text(json.dumps(manifest))
    assert Corpus.open(corpus, rescan=True).n_docs == 300
    assert Corpus.open(corpus).manifest == manifest  # nothing to change
    other = _corpus(tmp_path / "other", rng, n_docs=40)
    shutil.copy(other / "parts" / "part-00000.parquet", corpus / "parts" / "copied.parquet")
    table = read_all(other)
    pq.write_table(  # another tool's part: no lsdask stamps at all
        pq.read_table(other / "parts" / "part-00000.parquet").replace_schema_metadata(None),
        corpus / "parts" / "foreign.parquet",
    )
    assert Corpus.open(corpus, rescan=True).n_docs == 380
    Corpus.open(corpus).append(table)
    assert Corpus.open(corpus, rescan=True).n_docs == 420
    assert not (corpus / "quarantine").exists()


def test_a_pending_append_whose_process_is_gone_is_quarantined_by_a_rescan(tmp_path, caplog):
    rng = np.random.default_rng(4)
    corpus = _corpus(tmp_path / "c", rng)
    killed = run_lsdask("ingest", "jsonl", _jsonl(tmp_path / "n.jsonl", rng, 30), "--append-to",
                  corpus, env=lsdask_env(LSDASK_CRASH_AT="corpus.append.renamed"))  # fmt: skip
    assert killed.returncode == KILLED
    pending = Corpus.open(corpus).manifest["pending"]
    assert [p["file"] for p in pending] == ["parts/part-00003.parquet"]
    caplog.set_level(logging.WARNING, logger="lsdask")
    assert Corpus.open(corpus, rescan=True).n_docs == 300
    txn = pending[0]["txn"]
    assert (
        f"parts/part-00003.parquet was written by an append that stopped before it committed "
        f"(transaction {txn}, process {pending[0]['pid']}"
    ) in caplog.text
    assert (
        f"its 30 documents are not in the corpus. Moved it to quarantine/part-00003.{txn}"
        in caplog.text
    )
    assert "Run that append again" in caplog.text
    assert "pending" not in Corpus.open(corpus).manifest


# --------------------------------------------------------------------------- output swaps


def test_a_model_swap_killed_midway_is_restored_by_the_next_reader(tmp_path, caplog):
    """Finding: a fit killed inside the swap of its --out (the old model moved
    aside, the new one not yet renamed in) left no model there, the old one
    aside forever, and the next writer deleted the complete new one. Now the
    next reader (or writer) puts the complete new model in place."""
    rng = np.random.default_rng(5)
    corpus = _corpus(tmp_path / "c", rng)
    fit = ["fit", corpus, "--topics", "3", "--sync", "--seed", "0", "--overwrite"]
    assert run_lsdask(*fit, "--out", tmp_path / "m", "--laps", "1").returncode == 0
    assert run_lsdask(*fit, "--out", tmp_path / "undisturbed", "--laps", "2").returncode == 0
    killed = run_lsdask(*fit, "--out", tmp_path / "m", "--laps", "2",
                  env=lsdask_env(LSDASK_CRASH_AT="replace_dir.swapping"))  # fmt: skip
    caplog.set_level(logging.WARNING, logger="lsdask")
    model = load_lda(tmp_path / "m")
    expected = load_lda(tmp_path / "undisturbed")
    np.testing.assert_array_equal(model.components_, expected.components_)
    assert model.n_laps_ == 2
    assert killed.returncode == KILLED, killed.stderr
    assert f"{tmp_path / 'm'} was missing: its writer (process " in caplog.text
    assert "Put the complete new output in its place (.m.new-" in caplog.text
    assert _leftovers(tmp_path) == []


def test_a_corpus_swap_killed_midway_is_restored_by_the_next_writer(tmp_path):
    """The same for a corpus rewritten with --overwrite: the next writer of it
    first puts the complete new corpus in place, then replaces it."""
    rng = np.random.default_rng(6)
    docs = _jsonl(tmp_path / "d.jsonl", rng, 200)
    more = _jsonl(tmp_path / "more.jsonl", rng, 150)
    ingest = ["ingest", "jsonl"]
    assert run_lsdask(*ingest, docs, "--out", tmp_path / "c").returncode == 0
    killed = run_lsdask(*ingest, more, "--out", tmp_path / "c", "--overwrite",
                  env=lsdask_env(LSDASK_CRASH_AT="replace_dir.swapping"))  # fmt: skip
    assert killed.returncode == KILLED, killed.stderr
    assert not (tmp_path / "c").exists()
    again = run_lsdask(*ingest, more, "--out", tmp_path / "c", "--overwrite")
    assert again.returncode == 0, again.stderr
    assert "was missing: its writer (process" in again.stderr
    assert run_lsdask(*ingest, more, "--out", tmp_path / "u").returncode == 0
    _same_corpus(tmp_path / "c", tmp_path / "u")
    assert _leftovers(tmp_path) == []
