"""From topics back to documents: ``LDA.top_documents``, ``lsdask docs`` and the
names ``lsdask transform`` writes, against a plain reference."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import ClassVar

import numpy as np
import pyarrow.parquet as pq
import pytest

from lsdask import HDP, LDA
from lsdask.cli import main
from lsdask.estimators.top_documents import merge_top
from lsdask.io.corpus import Corpus
from lsdask.io.corpus.names import DocumentNames
from lsdask.io.ingest import ingest_text_folder
from lsdask.io.source_text import first_words
from lsdask.jobs.documents import top_documents
from lsdask.persist import save_model

THEMES = (
    "apple banana cherry grape lemon mango melon peach pear plum".split(),
    "engine wheel brake clutch piston gear axle tyre valve exhaust".split(),
    "violin cello flute oboe trumpet drum harp piano guitar organ".split(),
)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Text files of one, two or three themes, of varied lengths, in sub-folders."""
    root = tmp_path_factory.mktemp("texts")
    rng = np.random.default_rng(4)
    for i in range(36):
        main_theme = i % 3
        n = int(rng.integers(5, 60))
        words = list(rng.choice(THEMES[main_theme], size=n))
        if i % 4 == 0:  # a mixed document
            words += list(rng.choice(THEMES[(main_theme + 1) % 3], size=n // 2))
        sub = root / f"group{main_theme}"
        sub.mkdir(exist_ok=True)
        (sub / f"doc{i:02d}.txt").write_text(" ".join(words) + "\n", encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def corpus(folder: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("corpus") / "c"
    ingest_text_folder(folder, out, docs_per_row_group=5, min_df=1, max_df=1.0)
    return out


@pytest.fixture(scope="module")
def model(corpus: Path) -> LDA:
    return LDA(3, sparsity=2, n_laps=5, init="random", random_state=0, client="sync",
               progress=False).fit(corpus)  # fmt: skip


def reference(model: LDA, corpus: Path, k: int, n: int) -> list[tuple[int, float, float]]:
    """Topic k's n best (doc_id, share, tokens), by a loop over every document:
    share = (N_dk + alpha_k) / (N_d + sum_j alpha_j) where N_dk > eps."""
    rows = []
    alpha = np.asarray(model.alpha_, dtype=np.float64)
    for batch in Corpus.open(corpus).batches:
        docs = batch.load()
        X = docs.to_csr(model.model_.vocab_size)
        _, doc_topic, _ = model.model_.doc_topic_step(X, model.posterior_, model.sparsity)
        for d in range(X.shape[0]):
            N_d = float(X[d].sum())
            if doc_topic[d, k] > model.model_.options.eps:
                share = (doc_topic[d, k] + alpha[k]) / (N_d + alpha.sum())
                rows.append((int(docs.doc_ids[d]), float(share), N_d))
    rows.sort(key=lambda r: (-r[1], r[0]))
    return rows[:n]


def test_merge_top_keeps_the_best_by_share_then_id() -> None:
    ids = np.array([[5, 3, 9, 1], [1, 2, 3, 4]])
    shares = np.array([[0.2, 0.5, 0.5, -np.inf], [0.1, 0.4, 0.3, 0.2]])
    tokens = np.arange(8.0).reshape(2, 4)
    got_ids, got_shares, got_tokens = merge_top(ids, shares, tokens, 3)
    assert got_ids.tolist() == [[3, 9, 5], [2, 3, 4]]
    assert got_shares.tolist() == [[0.5, 0.5, 0.2], [0.4, 0.3, 0.2]]
    assert got_tokens.tolist() == [[1.0, 2.0, 0.0], [5.0, 6.0, 7.0]]
    padded_ids, padded, _ = merge_top(ids[:1], shares[:1], tokens[:1], 6)
    assert padded_ids[0, :3].tolist() == [3, 9, 5]
    assert np.isneginf(padded[0, 3:]).all()  # the unused document and the empty slots


@pytest.mark.parametrize("k", [0, 1, 2])
def test_top_documents_equal_the_reference(model: LDA, corpus: Path, k: int) -> None:
    assert len(Corpus.open(corpus).batches) > 3  # the merge across batches is exercised
    hits = model.top_documents(k, 7)
    expected = reference(model, corpus, k, 7)
    assert [h.doc_id for h in hits] == [d for d, _, _ in expected]
    np.testing.assert_allclose([h.share for h in hits], [s for _, s, _ in expected], rtol=1e-12)
    assert [h.tokens for h in hits] == [t for _, _, t in expected]


def test_the_top_documents_are_of_the_topics_theme(model: LDA, corpus: Path, folder: Path):
    """Each topic's best documents are files of one theme, named and quoted."""
    vocab = model.vocabulary_
    for k in range(3):
        assert all(h.text is None for h in model.top_documents(k, 5))  # no folder named
        hits = model.top_documents(k, 5, texts=folder)
        top_word = vocab[int(np.argmax(model.topic_word_[k]))]
        theme = next(i for i, words in enumerate(THEMES) if top_word in words)
        assert all(h.name is not None and h.name.startswith(f"group{theme}/") for h in hits)
        for h in hits:
            words = (folder / h.name).read_text(encoding="utf-8").split()
            assert h.text is not None
            assert h.text.removesuffix(" ...").split() == words[:30]
            assert h.tokens == len(words)


def test_names_follow_doc_ids(corpus: Path, folder: Path) -> None:
    names = DocumentNames.of(Corpus.open(corpus))
    files = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*.txt"))
    assert [names(d) for d in range(len(files))] == files  # ingest numbers them in order
    assert names(len(files)) is None and names.label(len(files)) == f"doc {len(files)}"


def test_a_loaded_model_needs_the_corpus(model: LDA, corpus: Path, tmp_path: Path) -> None:
    save_model(model, tmp_path / "m")
    from lsdask.persist import load_model

    loaded = load_model(tmp_path / "m")
    with pytest.raises(ValueError, match="corpus is needed"):
        loaded.top_documents(0)
    assert loaded.top_documents(1, 4, corpus=corpus) == model.top_documents(1, 4)
    with pytest.raises(
        ValueError, match="topic 3 is not a topic of this model: choose from 0 to 2"
    ):
        loaded.top_documents(3, corpus=corpus)
    with pytest.raises(ValueError, match="n must be"):
        loaded.top_documents(0, 0, corpus=corpus)


def test_the_hdp_ranks_under_its_own_prior(corpus: Path) -> None:
    hdp = HDP(4, sparsity=2, n_laps=3, init="random", random_state=0, client="sync",
              progress=False).fit(corpus)  # fmt: skip
    K = hdp.model_.n_components
    prior = np.asarray(hdp.model_.doc_prior(hdp.posterior_), dtype=np.float64)
    rest = hdp.model_.leftover_prior(hdp.posterior_)
    assert rest is not None and rest > 0
    rows = {}  # doc_id -> (its tokens, its topic counts), each batch's local step run once
    for batch in Corpus.open(corpus).batches:
        docs = batch.load()
        X = docs.to_csr(hdp.model_.vocab_size)
        _, doc_topic, _ = hdp.model_.doc_topic_step(X, hdp.posterior_, hdp.sparsity)
        for d, doc_id in enumerate(docs.doc_ids.tolist()):
            rows[doc_id] = (float(X[d].sum()), doc_topic[d])
    for k in range(K):
        for h in hdp.top_documents(k, 3):  # the share of each hit recomputed from its row
            length, counts = rows[h.doc_id]
            expected = (counts[k] + prior[k]) / (length + prior.sum() + rest)
            assert h.share == pytest.approx(expected, rel=1e-12)


@pytest.mark.cluster
def test_on_a_cluster_as_in_process(model: LDA, corpus: Path, dask_client) -> None:
    here = top_documents(model, corpus, n=6, client="sync")
    there = top_documents(model, corpus, n=6, client=dask_client)
    assert there.by_topic == here.by_topic


def test_docs_command(model: LDA, corpus: Path, tmp_path: Path, capsys) -> None:
    save_model(model, tmp_path / "m")
    args = ["docs", str(tmp_path / "m"), "--corpus", str(corpus), "--sync"]
    assert main([*args, "--topic", "2", "--topic", "0", "--top", "3", "--format", "json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert [t["topic"] for t in shown["topics"]] == [2, 0]
    for t in shown["topics"]:
        expected = model.top_documents(t["topic"], 3)
        assert [d["doc_id"] for d in t["documents"]] == [h.doc_id for h in expected]
        assert [d["name"] for d in t["documents"]] == [h.name for h in expected]
    assert main([*args, "--topic", "1", "--top", "2"]) == 0
    text = capsys.readouterr().out
    first = model.top_documents(1, 2)[0]
    lines = text.splitlines()
    assert lines[0] == "topic 1: top 2 of 36 documents by E[pi_dk]"
    assert f"doc_id {first.doc_id}  {first.name}" in lines[1]
    source = Corpus.open(corpus).ingest_info["source"]
    assert lines[3:] == [  # no text without --texts, and a hint where to find it
        f"(the corpus was ingested from {source}: name it with --texts to show each "
        "document's first words)"
    ]
    assert main([*args, "--topic", "1", "--top", "2", "--texts", source, "--words", "4"]) == 0
    lines = capsys.readouterr().out.splitlines()
    with_text = model.top_documents(1, 2, texts=source)[0]
    assert with_text.text is not None
    assert len(lines) == 5 and lines[2].split() == [*with_text.text.split()[:4], "..."]
    assert main([*args, "--topic", "3"]) == 2
    assert "topic 3 is not a topic of this model" in capsys.readouterr().err


def test_transform_writes_the_names(model: LDA, corpus: Path, tmp_path: Path, capsys) -> None:
    save_model(model, tmp_path / "m")
    out = tmp_path / "w.parquet"
    assert main(["transform", str(tmp_path / "m"), str(corpus), "--out", str(out), "--sync"]) == 0
    table = pq.read_table(out)
    names = DocumentNames.of(Corpus.open(corpus))
    assert table.column("doc_name").to_pylist() == names.many(table.column("doc_id").to_pylist())
    assert None not in table.column("doc_name").to_pylist()


def test_crafted_names_read_nothing_outside_the_folder(folder: Path, tmp_path: Path) -> None:
    """Names are untrusted: one that climbs out of the named folder, a link, or a
    FIFO shows no text, and nothing blocks."""
    secret = tmp_path / "secret.txt"
    secret.write_text("do not show", encoding="utf-8")
    inside = folder / "group0"
    link = inside / "zz-link.txt"
    fifo = inside / "zz-fifo.txt"
    try:
        link.symlink_to(secret)
        os.mkfifo(fifo)
        info = {"format": "text folder", "source": str(folder), "encoding": "utf-8"}
        names = ["../secret.txt", str(secret), "group0/zz-link.txt", "group0/zz-fifo.txt",
                 "group0/doc00.txt"]  # fmt: skip
        shown = first_words(folder, info, names, 3)
        assert list(shown) == ["group0/doc00.txt"]
    finally:
        link.unlink()
        fifo.unlink()


def test_a_damaged_names_list_is_ignored(corpus: Path, tmp_path: Path, caplog) -> None:
    class Fake:
        path = "x"
        ingest_info: ClassVar[dict] = {"doc_names": ["a", 3]}

    with caplog.at_level("WARNING"):
        names = DocumentNames.of(Fake())
    assert names(0) is None and "not a list of strings" in caplog.text


def test_the_text_shown_is_cleaned_as_ingested(tmp_path: Path) -> None:
    post = (
        "From: someone@example.edu\nSubject: engines\n\n"
        "In article <1@x>, a@b.c writes:\n> quoted words here\nreal words of the post\n"
        "-- \nsignature line\n"
    )
    (tmp_path / "p.txt").write_text(post, encoding="utf-8")
    info = {"format": "text folder", "source": str(tmp_path), "encoding": "utf-8"}
    assert first_words(tmp_path, {**info, "cleaning": {"strip_mail": True}}, ["p.txt"], 10) == {
        "p.txt": "real words of the post"
    }
    assert first_words(tmp_path, {**info, "strip_headers": True}, ["p.txt"], 3) == {
        "p.txt": "In article <1@x>, ..."
    }


def test_a_crafted_source_is_never_read(model: LDA, corpus: Path, tmp_path: Path) -> None:
    """A corpus whose manifest names another folder as its source and a file of it as
    a document's name: nothing of that folder is shown unless the user names it."""
    import json as _json
    import shutil

    secret = tmp_path / "private"
    secret.mkdir()
    (secret / "key.txt").write_text("secret words", encoding="utf-8")
    crafted = tmp_path / "crafted"
    shutil.copytree(corpus, crafted)
    manifest = _json.loads((crafted / "manifest.json").read_text(encoding="utf-8"))
    manifest["ingest"]["source"] = str(secret)
    manifest["ingest"]["doc_names"] = ["key.txt"] * len(manifest["ingest"]["doc_names"])
    (crafted / "manifest.json").write_text(_json.dumps(manifest), encoding="utf-8")
    found = top_documents(model, crafted, n=3, client="sync")
    assert all(h.text is None for hits in found.by_topic.values() for h in hits)
    assert found.source == str(secret)  # only shown as a hint


def test_texts_that_are_not_there(model: LDA, corpus: Path, tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no such folder or archive"):
        model.top_documents(0, 2, texts=tmp_path / "gone")
