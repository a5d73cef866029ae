"""Tests for lsdask.io.ingest: the tokenizer, stopwords and the ingest functions."""

from __future__ import annotations

import csv
import gzip
import io
import json
import logging
import os
import tarfile
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lsdask.errors import DataError
from lsdask.io.corpus import Corpus, read_all
from lsdask.io.ingest import (
    IngestOptions,
    IngestSummary,
    TextIngestOptions,
    import_ldac,
    import_uci,
    ingest_jsonl,
    ingest_table,
    ingest_text_folder,
)
from lsdask.io.ingest.stopwords import (
    ENGLISH_STOPWORDS,
    GLASGOW_CONTENT_WORDS,
    GLASGOW_STOPWORDS,
    LEGACY_ENGLISH_STOPWORDS,
)
from lsdask.io.ingest.words import Tokenizer, VocabularyBuilder, encode, select_vocabulary

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"

TEXTS = {
    "a/1.txt": "Apples and bananas. Apples!",
    "a/2.txt": "Bananas, cherries; the APPLES",
    "b/3.txt": "Cherries, dates 42 x y2k",
    "b/sub/4.txt": "Élan café, Café crème",
}
ALL = {"min_df": 1, "max_df": 1.0}


def _bags(corpus: Corpus) -> list[Counter]:
    """Every document of a corpus as a Counter of words."""
    X = read_all(corpus).tocsr()
    return [
        Counter({corpus.vocab[j]: float(v) for j, v in zip(row.indices, row.data, strict=True)})
        for row in X
    ]


def _expected(texts, tokenizer=None, vocab=None) -> list[Counter]:
    tokenizer = tokenizer or Tokenizer()
    out = []
    for text in texts:
        bag = Counter(tokenizer.tokens(text))
        out.append(Counter({w: float(c) for w, c in bag.items() if vocab is None or w in vocab}))
    return out


def _files(folder: Path) -> list[str]:
    return sorted(os.listdir(folder))


# --------------------------------------------------------------------------- text


def test_tokenizer_keeps_words_of_two_or_more_letters_without_stopwords():
    tok = Tokenizer()
    assert tok.tokens("The cat's 2 cats, a DOG; x y2k dog_house Élan café") == [
        "cat",
        "cats",
        "dog",
        "élan",
        "café",
    ]
    assert Tokenizer(stopwords=None).tokens("The cat") == ["the", "cat"]
    assert Tokenizer(lowercase=False, stopwords={"cat"}).tokens("The Cat sat") == ["The", "sat"]
    assert Tokenizer(pattern=r"\d+", stopwords=None).tokens("a1 b22") == ["1", "22"]
    assert Tokenizer().settings()["stopwords"] == "english-2"
    assert Tokenizer(stopwords={"b", "a"}).settings()["stopwords"] == ["a", "b"]
    # the earlier list keeps its recorded name, so corpora ingested with it keep it
    legacy = Tokenizer(stopwords=LEGACY_ENGLISH_STOPWORDS)
    assert legacy.settings()["stopwords"] == "english"
    assert Tokenizer.from_settings(legacy.settings()) == legacy != Tokenizer()
    assert Tokenizer.from_settings({"stopwords": "english-2"}).stopwords == ENGLISH_STOPWORDS
    with pytest.raises(DataError, match=r"stopwords must be .*'english-2'.*found 'french'"):
        Tokenizer.from_settings({"stopwords": "french"})


@pytest.mark.parametrize(
    ("settings", "match"),
    [
        ("x", r"ingest\.tokenizer must be an object .*found 'x'"),
        ([1, 2], r"ingest\.tokenizer must be an object .*found \[1, 2\]"),
        ({"stopwords": [1, 2]}, r"ingest\.tokenizer\.stopwords must be null, a list of words"),
        ({"stopwords": {"a": 1}}, r"ingest\.tokenizer\.stopwords must be .*found \{'a': 1\}"),
        ({"lowercase": "false"}, r"ingest\.tokenizer\.lowercase must be true or false"),
        ({"pattern": 3}, r"ingest\.tokenizer\.pattern must be a regular expression"),
        ({"pattern": "(["}, r"ingest\.tokenizer\.pattern must be a valid regular expression"),
    ],
)  # fmt: skip
def test_crafted_tokenizer_settings_are_named(settings, match):
    with pytest.raises(DataError, match=match + r".*re-ingest the corpus"):
        Tokenizer.from_settings(settings, where="m.json: ingest.tokenizer")


def test_runs_split_the_tokens_at_stopwords():
    tok = Tokenizer()
    text = "The Bank of America, New York City; and a cat"
    runs = tok.runs(text)
    assert runs == [["bank"], ["america", "new", "york", "city"], ["cat"]]
    assert [w for run in runs for w in run] == tok.tokens(text)
    assert Tokenizer(lowercase=False, stopwords={"of"}).runs("Bank OF x America") == [
        ["Bank"],
        ["America"],
    ]
    assert tok.runs("the and 42") == []


def test_tokenizer_rejects_bad_settings():
    with pytest.raises(ValueError, match=r"pattern must be a valid regular expression"):
        Tokenizer(pattern="(")
    with pytest.raises(TypeError, match=r"stopwords must be a collection of words or None"):
        Tokenizer(stopwords="the")
    with pytest.raises(TypeError, match=r"text must be a str; got int"):
        Tokenizer().tokens(3)


def test_stopword_list_is_the_glasgow_list_as_documented():
    assert isinstance(ENGLISH_STOPWORDS, frozenset)
    assert {"no", "nor", "not"} <= ENGLISH_STOPWORDS
    # the source: the Glasgow IR group's 318 words, as scikit-learn ships them
    assert len(GLASGOW_STOPWORDS) == 318
    assert GLASGOW_CONTENT_WORDS == {"bill", "fire", "interest", "mill", "system"}
    assert GLASGOW_CONTENT_WORDS <= GLASGOW_STOPWORDS
    supplement = LEGACY_ENGLISH_STOPWORDS - GLASGOW_STOPWORDS
    assert ENGLISH_STOPWORDS == (GLASGOW_STOPWORDS - GLASGOW_CONTENT_WORDS) | supplement
    assert len(ENGLISH_STOPWORDS) == 318 - 5 + len(supplement) == 436
    assert LEGACY_ENGLISH_STOPWORDS < ENGLISH_STOPWORDS and "no" not in LEGACY_ENGLISH_STOPWORDS
    assert all(w == w.lower() and w.isalpha() for w in ENGLISH_STOPWORDS)
    assert {"the", "and", "of", "which", "would", "don", "ve", "said"} <= ENGLISH_STOPWORDS
    assert not {"government", "people", "computer", "apple", "system"} & ENGLISH_STOPWORDS


def test_glasgow_list_is_scikit_learns_word_for_word():
    text = pytest.importorskip("sklearn.feature_extraction.text")
    assert frozenset(text.ENGLISH_STOP_WORDS) == GLASGOW_STOPWORDS


def test_vocabulary_builder_orders_by_document_frequency_then_alphabet():
    builder = VocabularyBuilder(min_df=2, max_df=0.75)
    for doc in [["b", "a", "a", "z"], ["a", "b", "c"], ["c", "b"], ["d", "d", "d", "c"]]:
        builder.add(doc)
    # df: a 2, b 3, c 3, d 1, z 1; max_df 0.75 * 4 = 3 keeps b and c
    assert builder.build() == ["b", "c", "a"]
    summary = builder.summary()
    assert (summary["dropped_min_df"], summary["dropped_max_df"], summary["vocab_size"]) == (
        2,
        0,
        3,
    )
    assert builder.document_frequency("a") == 2 and builder.n_types == 5

    capped = VocabularyBuilder(min_df=1, max_df=2, max_vocab=3)
    for doc in [["b", "a"], ["a", "c"], ["c", "d"]]:
        capped.add(doc)
    assert capped.build() == ["a", "c", "b"]
    assert capped.summary()["dropped_max_vocab"] == 1


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"min_df": -1}, r"min_df must be an int count of documents \(>= 0\) or a float"),
        ({"min_df": 1.5}, r"min_df must be .*; got 1\.5"),
        ({"max_df": 0}, r"max_df must be an int count of documents \(>= 1\)"),
        ({"max_df": True}, r"max_df must be .*; got True"),
        ({"max_vocab": 0}, r"max_vocab must be a positive int or None"),
    ],
)
def test_vocabulary_builder_rejects_bad_bounds(kwargs, match):
    with pytest.raises(ValueError, match=match):
        VocabularyBuilder(**kwargs)


def test_vocabulary_errors_when_nothing_can_pass():
    builder = VocabularyBuilder(min_df=3, max_df=2)
    builder.add(["a"])
    with pytest.raises(ValueError, match=r"max_df=2 allows words in at most 2 .* min_df=3"):
        builder.build()
    with pytest.raises(ValueError, match=r"no word is left in the vocabulary: 10 documents"):
        select_vocabulary(["a", "b"], [1, 2], 10, min_df=5, max_df=1.0)
    with pytest.raises(ValueError, match=r"no documents were added"):
        VocabularyBuilder().build()


def test_encode_sorts_ids_and_counts_out_of_vocabulary_tokens():
    oov: set[str] = set()
    ids, counts, n_oov = encode(["c", "a", "zz", "c", "zz", "q"], {"a": 2, "c": 0}, oov_types=oov)
    np.testing.assert_array_equal(ids, [0, 2])
    np.testing.assert_array_equal(counts, [2.0, 1.0])
    assert ids.dtype == np.int32 and counts.dtype == np.float32
    assert n_oov == 3 and oov == {"zz", "q"}
    ids, counts, n_oov = encode([], {"a": 0})
    assert ids.size == 0 and counts.size == 0 and n_oov == 0


# --------------------------------------------------------------------------- raw text ingestion


@pytest.fixture
def text_folder(tmp_path) -> Path:
    root = tmp_path / "texts"
    for name, text in TEXTS.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    (root / ".hidden").write_text("hidden words", encoding="utf-8")
    return root


def test_text_folder_round_trip(text_folder, tmp_path):
    out = tmp_path / "corpus"
    summary = ingest_text_folder(
        text_folder, out, encoding="utf-8", docs_per_row_group=3, progress=True, **ALL
    )
    corpus = Corpus.open(out)
    assert summary["path"] == corpus.path and summary["n_docs"] == 4
    assert summary["n_tokens"] == corpus.n_tokens == 12
    assert summary["vocab_size"] == corpus.vocab_size
    assert [b.n_docs for b in corpus.batches] == [3, 1]
    assert _bags(corpus) == _expected(TEXTS.values())
    info = corpus.ingest_info
    assert info["doc_names"] == list(TEXTS)
    assert info["format"] == "text folder" and info["tokenizer"]["stopwords"] == "english-2"
    assert info["vocabulary"]["imposed"] is False
    assert (summary["oov_tokens"], summary["oov_types"], summary["n_empty_docs"]) == (0, 0, 0)


def test_utf8_default_latin1_on_request_and_pruning(text_folder, tmp_path):
    summary = ingest_text_folder(text_folder, tmp_path / "c", min_df=2, max_df=1.0)
    corpus = Corpus.open(tmp_path / "c")
    assert corpus.ingest_info["encoding"] == "utf-8"
    assert sorted(corpus.vocab) == ["apples", "bananas", "cherries"]
    assert summary["oov_types"] > 0 and summary["oov_tokens"] > 0
    # the default reads the accented words whole; UTF-8 read as latin-1 garbles them
    ingest_text_folder(text_folder, tmp_path / "u", **ALL)
    ingest_text_folder(text_folder, tmp_path / "l", encoding="latin-1", **ALL)
    words, garbled = (set(Corpus.open(tmp_path / name).vocab) for name in ("u", "l"))
    assert {"café", "crème", "élan"} <= words and not {"café", "crème"} & garbled


def test_text_not_in_the_encoding_is_refused_naming_the_file(tmp_path):
    folder = tmp_path / "posts"
    folder.mkdir()
    (folder / "a.txt").write_text("plain words here", encoding="utf-8")
    (folder / "b.txt").write_bytes("caf\xe9 au lait".encode("latin-1"))
    with pytest.raises(
        DataError, match=r"file '.*b\.txt': not utf-8 text \(byte 3: .*--encoding latin-1"
    ):
        ingest_text_folder(folder, tmp_path / "c", **ALL)
    tar = _make_tar(tmp_path / "posts.tar.gz", {"p/1": "caf\xe9"})
    with pytest.raises(DataError, match=r"posts\.tar\.gz member 'p/1': not utf-8 text"):
        ingest_text_folder(tar, tmp_path / "c", **ALL)
    assert _files(tmp_path) == ["posts", "posts.tar.gz"]  # nothing half-written
    with pytest.raises(ValueError, match=r"encoding must name a text encoding.*'utf-9'"):
        ingest_text_folder(folder, tmp_path / "c", encoding="utf-9", **ALL)
    summary = ingest_text_folder(folder, tmp_path / "c", encoding="latin-1", **ALL)
    assert "café" in Corpus.open(tmp_path / "c").vocab and summary["n_docs"] == 2


def _make_tar(path: Path, members: dict[str, str], mode="w:gz") -> Path:
    with tarfile.open(path, mode) as tar:
        for name, text in members.items():
            data = text.encode("latin-1")
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_tar_archive_with_subset(tmp_path):
    train = {"news-train/g1/1": "Hockey goalie scores", "news-train/g2/2": "Goalie café saves"}
    test = {"news-test/g1/3": "Hockey again"}
    tar = _make_tar(tmp_path / "news.tar.gz", {**train, **test, "news-train/._junk": "junk"})
    summary = ingest_text_folder(
        tar, tmp_path / "train", subset="news-train/", encoding="latin-1", **ALL
    )
    corpus = Corpus.open(tmp_path / "train")
    assert summary["n_docs"] == 2
    assert _bags(corpus) == _expected(train.values())
    assert corpus.ingest_info["doc_names"] == list(train)
    assert corpus.ingest_info["encoding"] == "latin-1"

    globbed = ingest_text_folder(
        tar, tmp_path / "g1", subset="news-*/g1", encoding="latin-1", **ALL
    )
    assert globbed["n_docs"] == 2

    with pytest.raises(DataError, match=r"no documents found matching subset 'nope/'.*news-test"):
        ingest_text_folder(tar, tmp_path / "none", subset="nope/", **ALL)
    assert not (tmp_path / "none").exists()


def test_bad_text_sources(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"path_or_tar: .*missing.* does not exist"):
        ingest_text_folder(tmp_path / "missing", tmp_path / "c")
    (tmp_path / "plain.txt").write_text("not a tar")
    with pytest.raises(DataError, match=r"neither a folder nor a tar archive"):
        ingest_text_folder(tmp_path / "plain.txt", tmp_path / "c")
    tar = _make_tar(tmp_path / "x.tar.gz", {f"d/{i}": "word " * 2000 for i in range(20)})
    data = tar.read_bytes()
    tar.write_bytes(data[: len(data) // 2])
    with pytest.raises(DataError, match=r"tar archive .*x\.tar\.gz: could not be read"):
        ingest_text_folder(tar, tmp_path / "c", **ALL)
    assert _files(tmp_path) == ["plain.txt", "x.tar.gz"]


def test_existing_out_dir_fails_before_reading(text_folder, tmp_path):
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "x").write_text("x")
    with pytest.raises(FileExistsError, match=r"already exists; pass overwrite=True"):
        ingest_text_folder(text_folder, tmp_path / "c", **ALL)


def _write_jsonl(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_inputs_that_raised_bare_errors_are_named(tmp_path, text_folder):
    """Each of these ended in a traceback from deep inside (EOFError from
    tarfile, RecursionError from json, UnicodeEncodeError writing vocab.txt)."""
    tar = _make_tar(tmp_path / "news.tar.gz", {"a/1": "Hockey goalie scores " * 50})
    (tmp_path / "cut.tar.gz").write_bytes(tar.read_bytes()[:60])
    with pytest.raises(DataError, match=r"tar archive .*cut\.tar\.gz: could not be read"):
        ingest_text_folder(tmp_path / "cut.tar.gz", tmp_path / "c", **ALL)
    path = _write_jsonl(tmp_path / "deep.jsonl", ['{"text": "fine words"}', "[" * 100_000])
    with pytest.raises(DataError, match=r"deep\.jsonl, line 2: JSON nested too deeply"):
        ingest_jsonl(path, tmp_path / "c", **ALL)
    path = _write_jsonl(tmp_path / "s.jsonl", ['{"text": "ab\\ud800cd and more"}'])
    with pytest.raises(ValueError, match=r"holds '\\ud800', a lone UTF-16 surrogate"):
        ingest_jsonl(path, tmp_path / "c", tokenizer=Tokenizer(pattern=r"[^ ]+"), **ALL)
    with pytest.raises(ValueError, match=r"is inside the input folder .* would read the corpus"):
        ingest_text_folder(text_folder, text_folder / "corpus", **ALL)
    assert not (tmp_path / "c").exists() and not (text_folder / "corpus").exists()


def test_jsonl_round_trip(tmp_path):
    records = [
        {"title": "Sparse topics", "abstract": "Topic models with sparse posteriors", "id": 1},
        {"text": "Memoized variational inference", "title": None},
        {"title": ["Dask", "arrays"], "other": 3},
        {"id": 4},
    ]
    path = _write_jsonl(tmp_path / "docs.jsonl", [json.dumps(r) for r in records[:2]] + [""])
    with open(path, "a", encoding="utf-8") as f:
        f.write("\n".join(json.dumps(r) for r in records[2:]) + "\n")
    summary = ingest_jsonl(path, tmp_path / "c", **ALL)
    texts = [
        "Sparse topics Topic models with sparse posteriors",
        "Memoized variational inference",
        "Dask arrays",
        "",
    ]
    corpus = Corpus.open(tmp_path / "c")
    assert _bags(corpus) == _expected(texts)
    assert summary["n_docs"] == 4 and summary["n_empty_docs"] == 1

    gz = tmp_path / "docs.jsonl.gz"
    gz.write_bytes(gzip.compress(path.read_bytes()))
    assert ingest_jsonl(gz, tmp_path / "gz", **ALL)["n_tokens"] == summary["n_tokens"]


@pytest.mark.parametrize(
    ("lines", "match"),
    [
        (
            ['{"text": "fine words"}', "", '{"text": "broken'],
            r"docs\.jsonl, line 3: not valid JSON",
        ),
        (['{"text": "ok"}', "[1, 2]"], r"line 2: expected a JSON object .* found a list"),
        (['{"text": "ok"}', '{"title": 5}'], r"line 2: field 'title' holds a int; expected a str"),
        (['{"body": "a"}', '{"body": "b"}'], r"none of the 2 records has any of the text fields"),
    ],
)
def test_bad_json_lines_are_named(tmp_path, lines, match):
    path = _write_jsonl(tmp_path / "docs.jsonl", lines)
    with pytest.raises(DataError, match=match):
        ingest_jsonl(path, tmp_path / "c", **ALL)
    assert _files(tmp_path) == ["docs.jsonl"]


def test_csv_and_parquet_tables_round_trip(tmp_path):
    texts = ['Quoted, "multi"\nline text here', "", "Plain words here", "More words"]
    with open(tmp_path / "docs.csv", "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["id", "body"])
        for i, text in enumerate(texts):
            writer.writerow([i, text])
    summary = ingest_table(tmp_path / "docs.csv", tmp_path / "csv", "body", **ALL)
    assert _bags(Corpus.open(tmp_path / "csv")) == _expected(texts)
    assert summary["n_docs"] == 4 and summary["n_empty_docs"] == 1

    table = pa.table({"id": [0, 1, 2, 3], "body": [texts[0], None, texts[2], texts[3]]})
    pq.write_table(table, tmp_path / "docs.parquet", row_group_size=2)
    ingest_table(tmp_path / "docs.parquet", tmp_path / "pq", "body", batch_rows=3, **ALL)
    assert _bags(Corpus.open(tmp_path / "pq")) == _expected(texts)

    with open(tmp_path / "docs.tsv", "w", encoding="utf-8") as f:
        f.write("body\tid\nalpha beta\t1\n")
    assert ingest_table(tmp_path / "docs.tsv", tmp_path / "tsv", "body", **ALL)["n_tokens"] == 2


def test_bad_tables_are_named(tmp_path):
    (tmp_path / "docs.csv").write_text("id,body\n1,hello world\n2\n", encoding="utf-8")
    with pytest.raises(
        DataError, match=r"docs\.csv: no column 'text'; the columns are \['id', 'body'\]"
    ):
        ingest_table(tmp_path / "docs.csv", tmp_path / "c", "text", **ALL)
    with pytest.raises(DataError, match=r"docs\.csv, line 3: the row has 1 fields"):
        ingest_table(tmp_path / "docs.csv", tmp_path / "c", "body", **ALL)
    pq.write_table(pa.table({"id": [1], "n": [2]}), tmp_path / "docs.parquet")
    with pytest.raises(DataError, match=r"no column 'body'; the columns are \['id', 'n'\]"):
        ingest_table(tmp_path / "docs.parquet", tmp_path / "c", "body", **ALL)
    with pytest.raises(DataError, match=r"column 'n' has type int64; expected strings"):
        ingest_table(tmp_path / "docs.parquet", tmp_path / "c", "n", **ALL)
    (tmp_path / "docs.xlsx").write_text("x")
    with pytest.raises(ValueError, match=r"cannot tell the format .* format='csv'"):
        ingest_table(tmp_path / "docs.xlsx", tmp_path / "c", "body")
    assert not (tmp_path / "c").exists()


@pytest.mark.parametrize(
    ("text", "match"),
    [
        # an unquoted comma: the text after it was dropped without a word
        ("id,body\n1,apples and pears, then more fruit\n2,bananas\n", r"line 2: the row has 3 "
         r"fields but the header has 2\. A field holding the delimiter ',' must be quoted"),
        # a quote left open: the rest of the file became one document
        ("id,body\n1,\"hello world\n2,big cats\n3,small dogs\n", r"lines 2-4: malformed CSV "
         r"\(unexpected end of data\); a quoted field must end with a quote"),
    ],
)  # fmt: skip
def test_csv_rows_that_lose_or_merge_documents_are_refused(tmp_path, text, match):
    (tmp_path / "d.csv").write_text(text, encoding="utf-8")
    with pytest.raises(DataError, match=r"d\.csv, " + match):
        ingest_table(tmp_path / "d.csv", tmp_path / "c", "body", **ALL)
    assert _files(tmp_path) == ["d.csv"]


def test_csv_header_hints_bom_delimiter_and_encoding(tmp_path):
    path = tmp_path / "d.csv"
    path.write_bytes("body,id\napple pie\t1\n".encode("utf-8-sig").replace(b"\t", b","))
    assert ingest_table(path, tmp_path / "bom", "body", **ALL)["n_tokens"] == 2  # BOM dropped
    path.write_bytes('"body","id"\n"apple pie",1\n'.encode("utf-8-sig"))  # quoted header too
    assert ingest_table(path, tmp_path / "bom2", "body", **ALL)["n_tokens"] == 2
    path.write_text("body;id\napple pie;1\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"is the delimiter another than ','\? .*--delimiter"):
        ingest_table(path, tmp_path / "c", "body", **ALL)
    assert ingest_table(path, tmp_path / "semi", "body", delimiter=";", **ALL)["n_docs"] == 1
    path.write_text("body,id\napple pie,1\n", encoding="utf-16")
    with pytest.raises(ValueError, match=r"'utf-16': CSV files are read line by line.*iconv"):
        ingest_table(path, tmp_path / "c", "body", encoding="utf-16", **ALL)
    (tmp_path / "d.txt").write_text("body\napple pie\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"format='csv' or format='parquet' \(lsdask: --format"):
        ingest_table(tmp_path / "d.txt", tmp_path / "c", "body", **ALL)
    assert (
        ingest_table(tmp_path / "d.txt", tmp_path / "txt", "body", format="csv", **ALL)["n_docs"]
        == 1
    )
    assert not (tmp_path / "c").exists()


def test_a_folder_of_parquet_files_and_other_string_types_are_read(tmp_path):
    """A dataset folder as Spark or Dask writes it (partition subfolders, _SUCCESS,
    hidden checksums), dictionary-encoded (pandas categorical) and string-view
    text columns."""
    folder = tmp_path / "ds.parquet"
    (folder / "year=2020").mkdir(parents=True)
    texts = ["apple pie here", "banana split there", "cherry tart", "apple crumble"]
    pq.write_table(pa.table({"body": texts[:2]}), folder / "year=2020" / "part-0.parquet")
    body = pa.array(texts[2:]).dictionary_encode()
    pq.write_table(pa.table({"body": body}), folder / "part-1.parquet")
    (folder / "_SUCCESS").write_text("")
    (folder / ".part-1.parquet.crc").write_text("junk")
    pq.write_table(pa.table({"x": [1]}), folder / "_metadata.parquet")
    ingest_table(folder, tmp_path / "c", "body", **ALL)
    assert _bags(Corpus.open(tmp_path / "c")) == _expected(texts[2:] + texts[:2])
    if hasattr(pa, "string_view"):
        table = pa.table({"body": pa.array(texts, pa.string_view())})
        pq.write_table(table, tmp_path / "view.parquet")
        ingest_table(tmp_path / "view.parquet", tmp_path / "v", "body", **ALL)
        assert _bags(Corpus.open(tmp_path / "v")) == _expected(texts)
    with pytest.raises(ValueError, match=r"inside the input folder .*lsdask ingest table"):
        ingest_table(folder, folder / "corpus", "body", **ALL)  # its parts would be input
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match=r"empty: a folder without Parquet files"):
        ingest_table(tmp_path / "empty", tmp_path / "e", "body", format="parquet", **ALL)


# --------------------------------------------------------------------------- bags of words


@pytest.fixture
def ldac(tmp_path) -> tuple[Path, Path]:
    (tmp_path / "vocab.txt").write_text("apple\nbanana\ncherry\ndate\n", encoding="utf-8")
    (tmp_path / "docs.dat").write_text("2 3:2 0:1\n0\n\n1 1:5\n2 2:1 3:4", encoding="utf-8")
    return tmp_path / "docs.dat", tmp_path / "vocab.txt"


def test_ldac_round_trip(ldac, tmp_path):
    summary = import_ldac(*ldac, tmp_path / "c")
    corpus = Corpus.open(tmp_path / "c")
    assert corpus.vocab == ["apple", "banana", "cherry", "date"]
    np.testing.assert_array_equal(
        read_all(corpus).toarray(), [[1, 0, 0, 2], [0, 0, 0, 0], [0, 5, 0, 0], [0, 0, 1, 4]]
    )
    assert summary == {
        "path": corpus.path,
        "n_docs": 4,
        "n_tokens": 13,
        "vocab_size": 4,
        "n_batches": 1,
        "n_empty_docs": 1,
        "oov_tokens": 0,
        "oov_types": 0,
        "vocab_imposed": False,
        "n_skipped_files": 0,
    }
    pruned = import_ldac(*ldac, tmp_path / "p", min_df=2)
    assert Corpus.open(tmp_path / "p").vocab == ["date"] and pruned["oov_tokens"] == 7
    from lsdask.jobs.ingest import format_ingest_summary

    assert "pruned from the vocabulary (min_df, max_df, max_vocab)" in format_ingest_summary(pruned)
    assert "batches: 1 row group\n" in format_ingest_summary(pruned)


def test_pruning_options_with_an_imposed_vocabulary_are_refused(ldac, text_folder, tmp_path):
    """They would do nothing to an imposed vocabulary: an error, not silence."""
    with pytest.raises(ValueError, match=r"^min_df prune a vocabulary built from the data, but"):
        import_ldac(*ldac, tmp_path / "a", vocab=["apple", "date"], min_df=2)
    with pytest.raises(ValueError, match=r"^max_df, max_vocab prune .* Drop them, or drop vocab"):
        ingest_text_folder(text_folder, tmp_path / "b", vocab=["apple"], max_df=0.9, max_vocab=3)
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
    # the defaults (None) stand for 5 documents and half of them when a vocabulary is built
    with pytest.raises(ValueError, match=r"max_df=0\.5 allows .* 4 documents, but min_df=5"):
        ingest_text_folder(text_folder, tmp_path / "c")


def test_options_as_one_object_or_as_keywords_give_the_same_corpus(text_folder, tmp_path):
    options = TextIngestOptions(min_df=1, max_df=1.0, docs_per_row_group=3)
    by_object = ingest_text_folder(text_folder, tmp_path / "a", options=options)
    by_keywords = ingest_text_folder(text_folder, tmp_path / "b", docs_per_row_group=3, **ALL)
    assert {**by_object, "path": None} == {**by_keywords, "path": None}
    assert Corpus.open(tmp_path / "a").vocab == Corpus.open(tmp_path / "b").vocab
    # keywords given beside the object replace its fields; the object is unchanged
    ingest_text_folder(text_folder, tmp_path / "c", options=options, docs_per_row_group=2)
    assert [b.n_docs for b in Corpus.open(tmp_path / "c").batches] == [2, 2]
    assert options.docs_per_row_group == 3
    with pytest.raises(
        TypeError,
        match=r"import_ldac\(\) takes options=IngestOptions\(\.\.\.\); got a TextIngestOptions",
    ):
        import_ldac(tmp_path / "x.dat", tmp_path / "v.txt", tmp_path / "d", options=options)


def test_unknown_keywords_are_named_with_the_valid_ones(text_folder, ldac, tmp_path):
    with pytest.raises(
        TypeError,
        match=r"^ingest_text_folder\(\) got an unexpected keyword argument 'min_dff' \(did you "
        r"mean 'min_df'\?\); it takes path_or_tar, out_dir, subset, .*, min_df, .*tokenizer",
    ):
        ingest_text_folder(text_folder, tmp_path / "c", min_dff=1)
    # bags of words are words already: no tokenizer
    with pytest.raises(
        TypeError, match=r"^import_ldac\(\) got an unexpected keyword .*'tokenizer'"
    ):
        import_ldac(*ldac, tmp_path / "c", tokenizer=Tokenizer())
    with pytest.raises(TypeError, match=r"'id_columns' \(did you mean 'id_column'\?\)"):
        ingest_table(tmp_path / "t.csv", tmp_path / "c", "text", id_columns="n")
    assert not (tmp_path / "c").exists()


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"min_df": -1}, r"min_df must be an int count of documents \(>= 0\).*got -1"),
        ({"max_df": 1.5}, r"max_df must be an int count .* \[0, 1\]; got 1\.5"),
        ({"max_df": True}, r"max_df must be .*; got True"),
        ({"max_vocab": 0}, r"max_vocab must be a positive int or None; got 0"),
        ({"vocab": ["a"], "max_vocab": 3}, r"^max_vocab prune a vocabulary .* Drop it, or"),
    ],
)
def test_bad_options_are_refused_before_any_input_is_read(tmp_path, kwargs, match):
    with pytest.raises(ValueError, match=match):
        IngestOptions(**kwargs)
    # the inputs do not exist: the options are checked first, for bags of words too
    with pytest.raises(ValueError, match=match):
        import_uci(tmp_path / "docword.txt", tmp_path / "vocab.txt", tmp_path / "c", **kwargs)
    with pytest.raises(ValueError, match=match):
        ingest_jsonl(tmp_path / "d.jsonl", tmp_path / "c", **kwargs)


def test_option_keywords_agree_with_the_options_and_show_in_signatures():
    import inspect
    from dataclasses import fields

    from lsdask.io.ingest.options import IngestKeywords, TextIngestKeywords

    for keywords, options in ((IngestKeywords, IngestOptions),
                              (TextIngestKeywords, TextIngestOptions)):  # fmt: skip
        declared = {k: v.__forward_arg__ for k, v in keywords.__annotations__.items()}
        assert declared == {f.name: f.type for f in fields(options)}
        assert keywords.__optional_keys__ == set(declared)
    takes = {ingest_text_folder: TextIngestOptions, ingest_jsonl: TextIngestOptions,
             ingest_table: TextIngestOptions, import_ldac: IngestOptions,
             import_uci: IngestOptions}  # fmt: skip
    for function, options in takes.items():
        params = inspect.signature(function).parameters
        for f in fields(options):
            assert params[f.name].kind is inspect.Parameter.KEYWORD_ONLY
            assert params[f.name].default == f.default, (function.__name__, f.name)
        assert "keywords" not in params and params["options"].default is None


def test_summary_reads_as_attributes_and_as_a_mapping(ldac, tmp_path):
    summary = import_ldac(*ldac, tmp_path / "c")
    assert isinstance(summary, IngestSummary)
    assert summary.n_docs == summary["n_docs"] == 4 and summary.get("missing") is None
    assert list(summary)[:2] == ["path", "n_docs"] and len(summary) == 10
    assert "vocab_imposed" in summary and "appended_part" not in summary
    assert json.loads(json.dumps(dict(summary)))["n_tokens"] == 13
    with pytest.raises(KeyError):
        summary["nope"]
    with pytest.raises(AttributeError):
        summary.n_docs = 5  # type: ignore[misc]


def test_appending_returns_the_corpus_and_the_part_added(text_folder, tmp_path):
    from lsdask.jobs.ingest import AppendSummary, format_ingest_summary, run_ingest

    ingest_text_folder(text_folder, tmp_path / "c", **ALL)
    new = _write_jsonl(tmp_path / "new.jsonl", ['{"text": "apples and zebras"}'])
    summary = run_ingest("jsonl", [new], tmp_path / "c", append=True, progress=False)
    assert isinstance(summary, AppendSummary)
    assert summary["path"] == str(Corpus.open(tmp_path / "c").path)
    assert (summary.n_docs, summary.corpus_docs, summary.n_batches) == (1, 5, 1)
    assert (summary.oov_tokens, summary.vocab_imposed) == (1, True)
    assert list(summary)[-2:] == ["appended_part", "corpus_docs"]
    assert "the corpus now holds 5 documents" in format_ingest_summary(summary)


@pytest.mark.parametrize(
    ("line", "match"),
    [
        ("3 0:1 1:1", r"docs\.dat, line 2: says N=3 pairs but has 2"),
        ("1 9:1", r"line 2: word id 9 is outside \[0, 4\)"),
        ("2 1:1 x:2", r"line 2: malformed pair 'x:2'; expected 'id:count'"),
        ("1 1-2", r"line 2: malformed pair '1-2'"),
        ("2 1:1 1:2", r"line 2: word id 1 is listed twice"),
        ("1 1:-3", r"line 2: count -3\.0; counts must be finite, >= 0"),
        ("one 1:1", r"line 2: expected 'N id:count id:count \.\.\.'"),
        # were an OverflowError and a message naming no line
        ("1 99999999999999999999:1", r"line 2: word id 99999999999999999999 is outside"),
        ("1 1:1e39", r"line 2: count 1e\+39; counts must be finite, >= 0 and at most 3\.403e\+38"),
        ("1 1:2\xe9", r"line 2: not ASCII \(byte 5 of the line: b'\\xc3\\xa9"),
    ],
)
def test_bad_ldac_lines_are_named(ldac, tmp_path, line, match):
    dat, vocab = ldac
    dat.write_text(f"1 0:1\n{line}\n1 2:1\n", encoding="utf-8")
    with pytest.raises(DataError, match=match):
        import_ldac(dat, vocab, tmp_path / "c")


def test_failed_ingest_leaves_no_output_and_no_temporary_folder(ldac, tmp_path):
    dat, vocab = ldac
    rng = np.random.default_rng(7)
    lines = [f"2 {a}:1 {a + 2}:3" for a in rng.integers(0, 2, size=500)]
    dat.write_text("\n".join([*lines, "2 1:1"]) + "\n", encoding="utf-8")
    before = _files(tmp_path)
    with pytest.raises(DataError, match=r"line 501: says N=2 pairs but has 1"):
        import_ldac(dat, vocab, tmp_path / "out", docs_per_row_group=50, docs_per_file=100)
    assert _files(tmp_path) == before


def test_imposed_vocabulary_counts_dropped_tokens(ldac, tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="lsdask.io.ingest"):
        summary = import_ldac(*ldac, tmp_path / "c", vocab=["date", "banana", "zebra"])
    corpus = Corpus.open(tmp_path / "c")
    assert corpus.vocab == ["date", "banana", "zebra"]
    np.testing.assert_array_equal(
        read_all(corpus).toarray(), [[2, 0, 0], [0, 0, 0], [0, 5, 0], [4, 0, 0]]
    )
    # dropped: apple (1 token) in doc 0, cherry (1 token) in doc 3
    assert (summary["oov_tokens"], summary["oov_types"], summary["n_empty_docs"]) == (2, 2, 1)
    info = corpus.ingest_info
    assert (info["oov_tokens"], info["oov_types"], info["vocabulary"]["imposed"]) == (2, 2, True)
    assert "imposed vocabulary" in caplog.text and "dropped 2 tokens" in caplog.text


def test_imposed_corpus_vocabulary_for_new_text(text_folder, tmp_path, caplog):
    ingest_text_folder(text_folder, tmp_path / "old", encoding="utf-8", **ALL)
    old = Corpus.open(tmp_path / "old")
    new_texts = {"n/1": "Apples and zebras, zebras", "n/2": "Zebras only", "n/3": "Dates"}
    folder = tmp_path / "new"
    for name, text in new_texts.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    with caplog.at_level(logging.INFO, logger="lsdask.io.ingest"):
        summary = ingest_text_folder(folder, tmp_path / "c", vocab=old)
    corpus = Corpus.open(tmp_path / "c")
    assert corpus.vocab == old.vocab
    assert _bags(corpus) == _expected(new_texts.values(), vocab=set(old.vocab))
    assert (summary["oov_tokens"], summary["oov_types"], summary["n_empty_docs"]) == (3, 1, 1)
    assert corpus.ingest_info["vocabulary"]["from"] == f"corpus {old.path}"
    assert f"imposed vocabulary (corpus {old.path})" in caplog.text
    # a corpus path works too
    assert ingest_text_folder(folder, tmp_path / "d", vocab=tmp_path / "old") == {
        **summary,
        "path": str(tmp_path / "d"),
    }


def test_imposed_words_the_tokenizer_never_yields_are_warned_of(tmp_path, caplog):
    folder = tmp_path / "t"
    folder.mkdir()
    (folder / "a").write_text("Graphics cards and the graphics of games")
    with caplog.at_level(logging.WARNING, logger="lsdask.io"):
        ingest_text_folder(folder, tmp_path / "c", vocab=["Graphics", "games", "the", "cards"])
    assert "1 of its 4 words hold capitals, but tokens are lowercased" in caplog.text
    assert "not whole tokens" not in caplog.text  # each word is named once, for its reason
    assert (
        "1 of its 4 words are stopwords, which the tokenizer drops, so they never receive a "
        "token (e.g. 'the')" in caplog.text
    )
    assert Corpus.open(tmp_path / "c").n_tokens == 2  # games, cards: Graphics never matches
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="lsdask.io"):
        ingest_text_folder(folder, tmp_path / "d", vocab=["games", "card game", "x", "cards"])
    assert "2 of its 4 words are not whole tokens of its pattern" in caplog.text
    assert "'card game', 'x'" in caplog.text


def test_new_text_on_a_corpus_vocabulary_takes_that_corpus_tokenizer(tmp_path, caplog):
    """Retraining data ingested with ``vocab=`` a corpus is cut into words as that
    corpus's text was: its tokenizer comes from the corpus's manifest."""
    folder = tmp_path / "t"
    folder.mkdir()
    (folder / "a").write_text("The cat and the dog; the cat purred")
    (folder / "b").write_text("The dog barked at the cat")
    mine = Tokenizer(stopwords={"and", "at"}, pattern=r"(?u)\b\w+\b")
    base = ingest_text_folder(folder, tmp_path / "base", tokenizer=mine, min_df=1, max_df=1.0)
    assert Tokenizer.from_settings(Corpus.open(base["path"]).ingest_info["tokenizer"]) == mine
    assert "the" in Corpus.open(base["path"]).vocab  # kept by this tokenizer, not the default
    ingest_text_folder(folder, tmp_path / "new", vocab=tmp_path / "base")
    new = Corpus.open(tmp_path / "new")
    assert new.n_tokens == Corpus.open(base["path"]).n_tokens == 12  # nothing out of vocabulary
    assert Tokenizer.from_settings(new.ingest_info["tokenizer"]) == mine
    # a different tokenizer, given on purpose, is used, with a warning
    with caplog.at_level(logging.WARNING, logger="lsdask.io"):
        ingest_text_folder(folder, tmp_path / "o", vocab=tmp_path / "base", tokenizer=Tokenizer())
    assert "is not the one corpus" in caplog.text and "Pass no tokenizer" in caplog.text
    assert Corpus.open(tmp_path / "o").n_tokens == 7  # the default drops 'the', 'and', 'at'
    # a word list carries no tokenizer: the default
    ingest_text_folder(folder, tmp_path / "list", vocab=["the", "cat"])
    assert Corpus.open(tmp_path / "list").n_tokens == 3  # 'the' is a default stopword


def _write_uci(tmp_path: Path, body: str, header=(4, 3, 4), name="docword.t.txt") -> Path:
    text = "\n".join(str(h) for h in header) + "\n" + body
    path = tmp_path / name
    if name.endswith(".gz"):
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    return path


@pytest.fixture
def uci_vocab(tmp_path) -> Path:
    (tmp_path / "vocab.t.txt").write_text("ant\nbee\ncat\n")
    return tmp_path / "vocab.t.txt"


@pytest.mark.parametrize("name", ["docword.t.txt", "docword.t.txt.gz"])
def test_uci_round_trip_with_empty_documents(tmp_path, uci_vocab, name):
    docword = _write_uci(tmp_path, "1 1 2\n1 3 1\n3 2 4\n3 1 1\n", header=(5, 3, 4), name=name)
    summary = import_uci(docword, uci_vocab, tmp_path / "c")
    corpus = Corpus.open(tmp_path / "c")
    np.testing.assert_array_equal(
        read_all(corpus).toarray(), [[2, 0, 1], [0, 0, 0], [1, 4, 0], [0, 0, 0], [0, 0, 0]]
    )
    assert (summary["n_docs"], summary["n_tokens"], summary["n_empty_docs"]) == (5, 8, 3)
    assert corpus.vocab == ["ant", "bee", "cat"]


@pytest.mark.parametrize(
    ("body", "header", "match"),
    [
        ("1 1 2\n2 3 1\n", (4, 3, 4), r"header says NNZ=4 entries but the file has 2"),
        ("2 1 2\n1 3 1\n", (4, 3, 2), r"line 5: docID 1 after docID 2; lines must be grouped"),
        ("1 1 2\n", (4, 5, 1), r"the header says W=5 words but the vocabulary file has 3"),
        ("1 4 2\n", (4, 3, 1), r"line 4: word id 4 is outside \[1, 4\)"),
        ("1 99999999999999999999 2\n", (4, 3, 1), r"line 4: word id 99999999999999999999 is out"),
        # a wrong D wrote empty documents for hours (2.1 GB after 10 minutes)
        (
            "1 1 2\n",
            (99999999999999, 3, 1),
            r"the header says D=99999999999999 documents but "
            r"NNZ=1 entries, so at least 99999999999998 documents would be empty",
        ),
        ("9 1 2\n", (4, 3, 1), r"line 4: docID 9 is outside \[1, 4\]"),
        ("1 1\n", (4, 3, 1), r"line 4: expected 'docID wordID count'; found '1 1'"),
        ("1 2 1\n1 2 3\n", (4, 3, 2), r"lines 4-5 \(docID 1\): word id 2 is listed twice"),
        ("", ("x", 3, 1), r"line 1: expected the header \(D, W, NNZ"),
    ],
)
def test_bad_uci_files_are_named(tmp_path, uci_vocab, body, header, match):
    docword = _write_uci(tmp_path, body, header=header)
    with pytest.raises(DataError, match=match):
        import_uci(docword, uci_vocab, tmp_path / "c")
    assert not (tmp_path / "c").exists()


def test_bad_vocabulary_files_are_named(ldac):
    dat, vocab = ldac
    vocab.write_text("apple\nbanana\napple\n")
    with pytest.raises(DataError, match=r"vocab\.txt, line 3: 'apple' repeats line 1"):
        import_ldac(dat, vocab, dat.parent / "c")
    vocab.write_text("apple\n\nbanana\n")
    with pytest.raises(DataError, match=r"vocab\.txt, line 2: empty line"):
        import_ldac(dat, vocab, dat.parent / "c")
    vocab.write_text("\ufeffapple\nbanana\ncherry\ndate\n", encoding="utf-8")  # a BOM
    import_ldac(dat, vocab, dat.parent / "bom")
    assert Corpus.open(dat.parent / "bom").vocab[0] == "apple"


def test_a_vocab_file_option_is_read_as_vocabulary_files_are(ldac, tmp_path):
    """--vocab FILE named neither the file nor the line of a repeated word, and
    kept a byte order mark and spaces as parts of words."""
    from lsdask.jobs.ingest import read_vocab_arg

    path = tmp_path / "words.txt"
    path.write_text("\ufeffapple \nbanana\napple\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"words\.txt, line 3: 'apple' repeats line 1"):
        read_vocab_arg(path)
    path.write_text("\ufeffapple \nbanana\x0cpie\n", encoding="utf-8")
    assert read_vocab_arg(path) == ["apple", "banana\x0cpie"]


# --------------------------------------------------------------------------- real data


def test_ap_corpus_has_the_published_size(tmp_path):
    ap = SHARED_DATA / "ap"
    if not (ap / "ap.dat").exists():
        pytest.skip(f"AP data not found at {ap} (the shared data folder is absent)")
    summary = import_ldac(ap / "ap.dat", ap / "vocab.txt", tmp_path / "ap")
    assert (summary["n_docs"], summary["n_tokens"], summary["vocab_size"]) == (2246, 435838, 10473)
    corpus = Corpus.open(tmp_path / "ap")
    first = corpus.batches[0].load()
    line = (ap / "ap.dat").read_text().split("\n", 1)[0].split()
    assert first.indptr[1] == int(line[0])
    assert first.doc_lengths()[0] == sum(int(p.split(":")[1]) for p in line[1:])


def test_20newsgroups_train_split_ingests(tmp_path):
    tar = SHARED_DATA / "20newsgroups" / "20news-bydate.tar.gz"
    if not tar.exists():
        pytest.skip(f"20 Newsgroups archive not found at {tar} (the shared data folder is absent)")
    summary = ingest_text_folder(
        tar, tmp_path / "20news", subset="20news-bydate-train/", encoding="latin-1"
    )
    assert summary["n_docs"] == 11314
    assert 15_000 < summary["vocab_size"] < 40_000
    assert summary["n_tokens"] > 1_000_000
    corpus = Corpus.open(tmp_path / "20news")
    names = corpus.ingest_info["doc_names"]
    assert len(names) == 11314 and all(n.startswith("20news-bydate-train/") for n in names)
    assert len(corpus.batches) == 12 and corpus.batches[0].load().n_docs == 1000


def test_strip_headers_drops_mail_headers(tmp_path):
    from lsdask.io.corpus import Corpus
    from lsdask.io.ingest import ingest_text_folder

    folder = tmp_path / "posts"
    folder.mkdir()
    for i in range(3):
        (folder / f"{i}.txt").write_text(
            "From: someone@host\nSubject: nntp posting host\n\nrockets engines orbit fuel\n"
        )
    out = ingest_text_folder(folder, tmp_path / "c", strip_headers=True, min_df=1, max_df=1.0)
    assert sorted(Corpus.open(out["path"]).vocab) == ["engines", "fuel", "orbit", "rockets"]
    kept = ingest_text_folder(folder, tmp_path / "d", min_df=1, max_df=1.0)
    assert "subject" in Corpus.open(kept["path"]).vocab


def test_documents_without_words_are_named_as_the_problem(tmp_path):
    folder = tmp_path / "empty"
    folder.mkdir()
    for name in ("a.txt", "b.txt"):
        (folder / name).write_text("42 7 ... the")  # no word of letters but a stopword
    for options in ({}, ALL):
        with pytest.raises(ValueError, match=r"none of the 2 documents has a word"):
            ingest_text_folder(folder, tmp_path / "c", **options)
    assert not (tmp_path / "c").exists()


# --------------------------------------------------------------------------- document ids

ID_TEXTS = {907: "apples and bananas", -3: "cherries and dates", 12: "", 2**40: "figs"}


def _doc_ids(path: Path) -> list[int]:
    _, ids = read_all(path, return_doc_ids=True)
    return ids.tolist()


def test_own_integer_ids_become_doc_id_in_every_table_format(tmp_path):
    jsonl = tmp_path / "d.jsonl"
    jsonl.write_text(
        "".join(json.dumps({"key": str(k), "text": t}) + "\n" for k, t in ID_TEXTS.items())
    )
    ingest_jsonl(jsonl, tmp_path / "j", ["text"], id_field="key", docs_per_row_group=2, **ALL)
    with open(tmp_path / "d.csv", "w", newline="") as f:
        csv.writer(f).writerows([["id", "body"], *([k, t] for k, t in ID_TEXTS.items())])
    ingest_table(tmp_path / "d.csv", tmp_path / "c", "body", id_column="id", **ALL)
    table = pa.table({"body": list(ID_TEXTS.values()), "id": list(ID_TEXTS)})
    pq.write_table(table, tmp_path / "d.parquet")
    ingest_table(tmp_path / "d.parquet", tmp_path / "p", "body", id_column="id", **ALL)
    for name in ("j", "c", "p"):
        corpus = Corpus.open(tmp_path / name)
        assert _doc_ids(tmp_path / name) == list(ID_TEXTS)
        assert _bags(corpus) == _expected(ID_TEXTS.values())
        assert "doc_names" not in corpus.ingest_info
    # without the option: numbered in order
    ingest_table(tmp_path / "d.csv", tmp_path / "n", "body", **ALL)
    assert _doc_ids(tmp_path / "n") == [0, 1, 2, 3]


@pytest.mark.parametrize(
    ("rows", "match"),
    [
        (
            [[1, "apple pie"], ["x7", "cherry tart"]],
            r"d\.csv, line 3: id 'id' is 'x7'; document ids must be integers",
        ),
        (
            [[1, "apple pie"], [2, "fig roll"], [1, "cherry tart"]],
            r"document id 1 appears 2 times \(documents 0 and 2, counting from 0 in input",
        ),
        ([[1, "apple pie"], ["", "cherry tart"]], r"line 3: the id 'id' is missing"),
        ([[1, "apple pie"], ["\u00b2", "cherry tart"]], r"line 3: id 'id' is '\u00b2'; document"),
        (
            [[1, "apple pie"], [2**63, "cherry tart"]],
            r"line 3: id 'id' is 9223372036854775808, outside the int64",
        ),
    ],
)
def test_bad_document_ids_are_refused_naming_the_line(tmp_path, rows, match):
    with open(tmp_path / "d.csv", "w", newline="") as f:
        csv.writer(f).writerows([["id", "body"], *rows])
    with pytest.raises(DataError, match=match):
        ingest_table(tmp_path / "d.csv", tmp_path / "c", "body", id_column="id", **ALL)
    assert not (tmp_path / "c").exists()


def test_missing_id_field_or_column_is_named(tmp_path):
    (tmp_path / "d.jsonl").write_text('{"id": 1, "text": "a b"}\n{"text": "c d"}\n')
    with pytest.raises(DataError, match=r"d\.jsonl, line 2: no id field 'id'"):
        ingest_jsonl(tmp_path / "d.jsonl", tmp_path / "j", ["text"], id_field="id", **ALL)
    (tmp_path / "d.csv").write_text("key,body\n1,a b\n")
    with pytest.raises(DataError, match=r"no column 'id'; the columns are \['key', 'body'\]"):
        ingest_table(tmp_path / "d.csv", tmp_path / "c", "body", id_column="id", **ALL)
    pq.write_table(pa.table({"body": ["ab", "cd"], "id": [1.5, 2.0]}), tmp_path / "d.parquet")
    with pytest.raises(
        DataError, match=r"d\.parquet, row 1 \(column 'id': double\): id 'id' is 1\.5"
    ):
        ingest_table(tmp_path / "d.parquet", tmp_path / "p", "body", id_column="id", **ALL)
    pq.write_table(pa.table({"body": ["ab", "cd"], "id": [1, None]}), tmp_path / "d.parquet")
    with pytest.raises(DataError, match=r"row 2 \(column 'id': int64\): the id 'id' is missing"):
        ingest_table(tmp_path / "d.parquet", tmp_path / "p", "body", id_column="id", **ALL)
    assert _files(tmp_path) == ["d.csv", "d.jsonl", "d.parquet"]


def test_csv_not_in_the_encoding_is_refused_naming_the_file(tmp_path):
    path = tmp_path / "d.csv"
    path.write_bytes("id,body\n1,apple pie\n2,läuft café crème\n".encode("latin-1"))
    with pytest.raises(DataError, match=r"d\.csv, line 3: not utf-8 text .*--encoding latin-1"):
        ingest_table(path, tmp_path / "c", "body", **ALL)
    assert not (tmp_path / "c").exists()
    ingest_table(path, tmp_path / "c", "body", encoding="latin-1", **ALL)
    assert {"läuft", "café", "crème"} <= set(Corpus.open(tmp_path / "c").vocab)
    with pytest.raises(ValueError, match=r"encoding must name a text encoding.*'utf-9'"):
        ingest_table(path, tmp_path / "x", "body", encoding="utf-9", **ALL)


def test_duplicate_ids_are_found_before_anything_is_written(tmp_path, monkeypatch):
    """With a vocabulary to build, the first pass finds a repeated id and the
    second (writing) pass never starts; with an imposed vocabulary (one
    pass) the id is found at its end, and the corpus is not left behind."""
    import lsdask.io.ingest.common as ingest_common

    with open(tmp_path / "d.csv", "w", newline="") as f:
        csv.writer(f).writerows([["id", "body"], [1, "apple pie"], [2, "fig"], [1, "tart"]])
    writes = []
    original = ingest_common.Corpus.write

    def recording(*args, **kwargs):
        writes.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(ingest_common.Corpus, "write", recording)
    with pytest.raises(DataError, match=r"document id 1 appears 2 times"):
        ingest_table(tmp_path / "d.csv", tmp_path / "c", "body", id_column="id", **ALL)
    assert writes == []
    with pytest.raises(DataError, match=r"document id 1 appears 2 times"):
        ingest_table(
            tmp_path / "d.csv", tmp_path / "c", "body", id_column="id",
            vocab=["apple", "pie", "fig", "tart"],
        )  # fmt: skip
    assert writes == [1] and not (tmp_path / "c").exists()


# --------------------------------------------------------------------------- unreadable files


def _truncated_gz(path: Path, text: str) -> Path:
    data = gzip.compress(text.encode())
    path.write_bytes(data[: len(data) * 2 // 3])
    return path


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "ldac", "uci"])
@pytest.mark.parametrize("damage", ["truncated", "not gzip"])
def test_truncated_or_foreign_gz_input_is_named_and_leaves_nothing(tmp_path, fmt, damage):
    rng = np.random.default_rng(3)
    words = ["apple", "banana", "cherry", "date"]
    n = 400
    if fmt == "jsonl":
        text = "".join(
            json.dumps({"text": " ".join(rng.choice(words, 5))}) + "\n" for _ in range(n)
        )
    elif fmt == "csv":
        text = "body\n" + "".join(" ".join(rng.choice(words, 5)) + "\n" for _ in range(n))
    elif fmt == "ldac":
        text = "".join(f"1 {rng.integers(4)}:{rng.integers(1, 9)}\n" for _ in range(n))
    else:
        text = f"{n}\n4\n{n}\n" + "".join(f"{d + 1} {rng.integers(1, 5)} 2\n" for d in range(n))
    path = tmp_path / f"in.{fmt}.gz"
    if damage == "truncated":
        _truncated_gz(path, text)
        match = r"in\.\w+\.gz, line \d+: could not be read \((EOFError|BadGzipFile|error)"
    else:
        path.write_text(text)  # plain text under a .gz name
        match = r"in\.\w+\.gz, line 1: could not be read .*not gzip-compressed despite its \.gz"
    (tmp_path / "vocab.txt").write_text("\n".join(words) + "\n")
    out = tmp_path / "c"
    run = {
        "jsonl": lambda: ingest_jsonl(path, out, ["text"], **ALL),
        "csv": lambda: ingest_table(path, out, "body", format="csv", **ALL),
        "ldac": lambda: import_ldac(path, tmp_path / "vocab.txt", out),
        "uci": lambda: import_uci(path, tmp_path / "vocab.txt", out),
    }[fmt]
    with pytest.raises(DataError, match=match):
        run()
    assert not out.exists()


def test_a_folder_given_as_an_input_file_is_named(ldac, tmp_path):
    dat, _ = ldac
    (tmp_path / "words").mkdir()
    with pytest.raises(DataError, match=r"words: could not be read .*it is a folder"):
        import_ldac(dat, tmp_path / "words", tmp_path / "c")
    assert not (tmp_path / "c").exists()
