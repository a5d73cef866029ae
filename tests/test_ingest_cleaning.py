"""Tests for the cleaning of raw text at ingestion: mail and news posts,
phrases, binary files, include/exclude globs, and the document-frequency
bounds of every text front-end."""

from __future__ import annotations

import csv
import io
import json
import logging
import math
import re
import tarfile
from collections import Counter
from itertools import pairwise
from pathlib import Path

import numpy as np
import pytest

from lsdask.cli import main
from lsdask.errors import DataError
from lsdask.io.corpus import Corpus, read_all
from lsdask.io.ingest import TextIngestOptions, ingest_jsonl, ingest_table, ingest_text_folder
from lsdask.io.ingest.inputs import binary_kind
from lsdask.io.ingest.mail import (
    clean_mail,
    is_attribution,
    is_quoted,
    strip_header_block,
    strip_signature,
)
from lsdask.io.ingest.phrases import PhraseCounter, join_phrases
from lsdask.io.ingest.words import Tokenizer

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
ALL = {"min_df": 1, "max_df": 1.0}


def _bags(corpus: Corpus) -> list[Counter]:
    X = read_all(corpus).tocsr()
    return [
        Counter({corpus.vocab[j]: float(v) for j, v in zip(row.indices, row.data, strict=True)})
        for row in X
    ]


def _write_jsonl(path: Path, texts: list[str]) -> Path:
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts), encoding="utf-8")
    return path


def _folder(root: Path, files: dict[str, str | bytes]) -> Path:
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    return root


def _tar(path: Path, members: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


# --------------------------------------------------------------------------- mail and news

POST = """From: ann@physics.x.edu (Ann Smith)
Subject: Re: orbit insertion
Organization: Dept of Physics
Lines: 12

In article <1993Apr5.1@y.com>, bob@y.com (Bob
Jones) writes:
> The probe missed its window.
>> Older quote about budgets.
|> Another quote style.

The probe reached orbit; thrusters fired, write to ann@physics.x.edu for data.
begin 644 picture.gif
M4$E&.#EA`0`!`(```/___P```"'Y!`$`````+`````!``$```("1`$`.S\\
end
MAX>'AX>'AX>'AX>'AX>'AX>'AX>'AX>'AX>'AX>'AX>'AX>'AX>'AX>'
--
Ann Smith, Physics | "quotable quote"
"""


def test_mail_cleaning_keeps_only_what_the_author_wrote():
    assert clean_mail(POST) == ("The probe reached orbit; thrusters fired, write to   for data.")
    # CRLF line ends are cleaned alike
    assert clean_mail(POST.replace("\n", "\r\n")) == clean_mail(POST)


def test_mail_cleaning_drops_only_lines_that_are_one_long_run():
    url = "https://example.com/archive/1993/orbit/insertion/burn-report.html"
    encoded = "M" + "4$E&.#EA`0`!`(```/___P" * 3
    text = f"See {url} for the burn.\n  {encoded}  \n{url}\nThe probe reached orbit."
    # the sentence keeps its link and words; a line that is one run is dropped
    assert clean_mail(text) == f"See {url} for the burn.\nThe probe reached orbit."
    assert clean_mail("x" * 39) == "x" * 39


def test_mail_header_block_is_only_a_block_of_header_lines():
    lines = ["From: a@b", "Subject: x", "  continued", "", "body"]
    assert strip_header_block(lines) == ["body"]
    # a first paragraph that merely starts "Note: ..." is text, not a header block
    text = ["Note: the first line", "and a sentence", "", "body"]
    assert strip_header_block(text) == text
    assert strip_header_block(["plain text", "", "more"]) == ["plain text", "", "more"]
    assert strip_header_block(["From: a", "Subject: only headers"]) == []
    assert strip_header_block([]) == []


def test_signature_is_cut_at_the_last_delimiter_only():
    assert strip_signature(["a", "--", "sig"]) == ["a"]
    assert strip_signature(["a", "-- ", "b", "-- ", "sig"]) == ["a", "-- ", "b"]
    # a dash line that is not exactly the delimiter is text
    assert strip_signature(["a", "---", "b", "-- x"]) == ["a", "---", "b", "-- x"]


@pytest.mark.parametrize(
    ("line", "quoted", "attribution"),
    [
        ("> quoted", True, False),
        ("   >> deeper", True, False),
        ("|> bar quote", True, False),
        ("In article <x@y.z>, a@b.c writes:", False, True),
        ("John Smith wrote:  ", False, True),
        ("plain text with > inside", False, False),
        ("he writes: more text after", False, False),
    ],
)
def test_quoted_and_attribution_lines(line, quoted, attribution):
    assert is_quoted(line) is quoted
    assert is_attribution(line) is attribution


def test_strip_mail_in_every_front_end_and_recorded(tmp_path):
    body = "engines thrust engines"
    posts = [f"From: a@b.edu\nSubject: rockets\n\n> quoted words\n{body}\n-- \nsig words"] * 2
    folder = _folder(tmp_path / "posts", {f"{i}.txt": p for i, p in enumerate(posts)})
    jsonl = _write_jsonl(tmp_path / "posts.jsonl", posts)
    table = tmp_path / "posts.csv"
    with table.open("w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([["text"], *[[p] for p in posts]])
    runs = {
        "folder": lambda out, **kw: ingest_text_folder(folder, out, **kw),
        "jsonl": lambda out, **kw: ingest_jsonl(jsonl, out, **kw),
        "table": lambda out, **kw: ingest_table(table, out, "text", **kw),
    }
    for name, run in runs.items():
        run(tmp_path / name, strip_mail=True, **ALL)
        corpus = Corpus.open(tmp_path / name)
        assert _bags(corpus) == [Counter({"engines": 2.0, "thrust": 1.0})] * 2, name
        assert corpus.ingest_info["cleaning"] == {"strip_mail": True, "phrases": None}
        run(tmp_path / f"{name}-raw", **ALL)
        raw = Corpus.open(tmp_path / f"{name}-raw")
        assert {"quoted", "sig", "edu", "subject"} <= set(raw.vocab), name
        assert raw.ingest_info["cleaning"] == {"strip_mail": False, "phrases": None}


def test_an_append_cleans_as_the_corpus_was_cleaned(tmp_path, caplog):
    from lsdask.jobs.ingest import run_ingest

    posts = ["From: x@y.com\n\nengines thrust\n> fuel quoted"] * 2 + ["fuel engines"]
    ingest_jsonl(_write_jsonl(tmp_path / "a.jsonl", posts), tmp_path / "c", strip_mail=True, **ALL)
    new = _write_jsonl(tmp_path / "new.jsonl", ["From: q@r.com\n\nthrust\n> engines fuel"])
    summary = run_ingest("jsonl", [new], tmp_path / "c", append=True, progress=False)
    assert (summary.n_tokens, summary.oov_tokens) == (1, 0)  # "thrust" alone: cleaned
    corpus = Corpus.open(tmp_path / "c")
    assert _bags(corpus)[-1] == Counter({"thrust": 1.0})
    with caplog.at_level(logging.WARNING, logger="lsdask.io.ingest.common"):
        other = run_ingest(
            "jsonl", [new], tmp_path / "c", append=True, progress=False,
            options={"strip_mail": False},
        )  # fmt: skip
    assert other.n_tokens == 3  # the quoted words count: asked for, with a warning
    assert "strip_mail=False, but corpus" in caplog.text


def _crafted(tmp_path: Path, field: str, value: object) -> Path:
    """A text corpus whose manifest records ``value`` as ``ingest.<field>``
    (``field`` a dotted path below ``ingest``)."""
    out = tmp_path / "crafted"
    ingest_jsonl(_write_jsonl(tmp_path / "a.jsonl", ["new york rockets"] * 3), out, **ALL)
    manifest = json.loads((out / "manifest.json").read_text())
    *parents, last = field.split(".")
    place = manifest["ingest"]
    for name in parents:
        place = place[name]
    place[last] = value
    (out / "manifest.json").write_text(json.dumps(manifest))
    return out


CRAFTED_CLEANING = [
    ("cleaning", "yes", r"ingest\.cleaning must be an object"),
    ("cleaning.strip_mail", "false", r"ingest\.cleaning\.strip_mail must be true or false; "
                                     r"found 'false'"),
    ("cleaning.strip_mail", 1, r"ingest\.cleaning\.strip_mail must be true or false; found 1"),
    ("cleaning.phrases", "yes", r"ingest\.cleaning\.phrases must be null or an object"),
    ("cleaning.phrases", [1, 2], r"ingest\.cleaning\.phrases must be null or an object"),
    ("cleaning.phrases", {}, r"ingest\.cleaning\.phrases\.joined must be a list of pairs of "
                             r"words; found None"),
    ("cleaning.phrases", {"joined": [["a"]]}, r"phrases\.joined\[0\] must be a pair of words"),
    ("cleaning.phrases", {"joined": [[1, 2]]}, r"phrases\.joined\[0\] must be a pair of words"),
    ("cleaning.phrases", {"joined": [["new", "york"], [["a"], "b"]]},
     r"phrases\.joined\[1\] must be a pair of words .*found \[\['a'\], 'b'\]"),
    ("cleaning.phrases", {"joined": "ab"}, r"phrases\.joined must be a list of pairs"),
    ("cleaning.phrases", {"joined": [], "min_count": "5"}, r"phrases\.min_count must be an int "
                                                           r">= 1; found '5'"),
    ("cleaning.phrases", {"joined": [], "threshold": math.inf}, r"phrases\.threshold must be a "
                                                                r"finite number >= 0; found inf"),
    ("tokenizer", "x", r"ingest\.tokenizer must be an object"),
    ("tokenizer.stopwords", [1, 2], r"ingest\.tokenizer\.stopwords must be null, a list of "
                                    r"words"),
]  # fmt: skip


@pytest.mark.parametrize(("field", "value", "match"), CRAFTED_CLEANING)
def test_a_crafted_cleaning_record_is_named_on_append_and_vocab(tmp_path, field, value, match):
    from lsdask.jobs.ingest import run_ingest

    corpus = _crafted(tmp_path, field, value)
    new = _write_jsonl(tmp_path / "new.jsonl", ["new york subway"])
    where = rf"{re.escape(str(corpus / 'manifest.json'))}: .*{match}.*re-ingest the corpus"
    with pytest.raises(DataError, match=where):
        run_ingest("jsonl", [new], corpus, append=True, progress=False)
    with pytest.raises(DataError, match=where):
        ingest_jsonl(new, tmp_path / "d", vocab=corpus)
    assert not (tmp_path / "d").exists()


@pytest.mark.parametrize("flag", ["--append-to", "--vocab"])
def test_a_crafted_cleaning_record_is_one_line_from_the_command_line(tmp_path, capsys, flag):
    corpus = _crafted(tmp_path, "cleaning.phrases", {"joined": [[["a"], "b"]]})
    before = (corpus / "manifest.json").read_bytes()
    new = _write_jsonl(tmp_path / "new.jsonl", ["new york subway"])
    out = [] if flag == "--append-to" else ["--out", str(tmp_path / "d")]
    assert main(["ingest", "jsonl", str(new), flag, str(corpus), *out]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 1
    assert "ingest.cleaning.phrases.joined[0] must be a pair of words" in err
    assert (corpus / "manifest.json").read_bytes() == before


def test_the_cleaning_record_read_back_is_the_one_written(tmp_path):
    from lsdask.io.ingest.common import recorded_cleaning

    path = _write_jsonl(tmp_path / "a.jsonl", ["new york subway"] * 5)
    ingest_jsonl(path, tmp_path / "c", phrases=True, phrase_min_count=1, phrase_threshold=0.0,
                 strip_mail=True, **ALL)  # fmt: skip
    corpus = Corpus.open(tmp_path / "c")
    assert recorded_cleaning(corpus) == corpus.ingest_info["cleaning"]
    assert recorded_cleaning(corpus)["strip_mail"] is True


# --------------------------------------------------------------------------- phrases


def _reference_phrases(docs_runs, min_count, threshold):
    """gensim's default scoring, counted plainly over every document."""
    words, pairs = Counter(), Counter()
    for runs in docs_runs:
        for run in runs:
            words.update(run)
            pairs.update(pairwise(run))
    n = len(words) + len(pairs)
    found = set()
    for (a, b), count in pairs.items():
        score = (count - min_count) * n / (words[a] * words[b])
        if score > threshold:
            found.add((a, b))
    return found


def _reference_join(run, phrases):
    """gensim's analyze_sentence: left to right, a word in one phrase at most."""
    out, start = [], None
    for word in run:
        if start is None:
            start = word
        elif (start, word) in phrases:
            out.append(f"{start}_{word}")
            start = None
        else:
            out.append(start)
            start = word
    if start is not None:
        out.append(start)
    return out


def _phrase_corpus(rng, n_docs=150):
    """Documents of random words with planted collocations and stopwords."""
    filler = ["".join(rng.choice(list("bcdfghjklmnpqrstvwxz"), 5)) for _ in range(400)]
    texts = []
    for _ in range(n_docs):
        parts = []
        for _ in range(rng.integers(5, 15)):
            pick = rng.random()
            if pick < 0.05:
                parts.append("new york city")
            elif pick < 0.09:
                parts.append("machine learning")
            elif pick < 0.2:
                parts.append("the")
            else:
                parts.append(str(rng.choice(filler)))
        texts.append(" ".join(parts))
    return texts


def test_phrases_match_a_plain_reference(tmp_path):
    rng = np.random.default_rng(7)
    texts = _phrase_corpus(rng)
    tok = Tokenizer()
    docs_runs = [tok.runs(t) for t in texts]
    for min_count, threshold in ((5, 10.0), (2, 1.0), (1, 0.0)):
        counter = PhraseCounter(min_count, threshold)
        for runs in docs_runs:
            counter.add(runs)
        expected = _reference_phrases(docs_runs, min_count, threshold)
        assert set(counter.phrases()) == expected
    assert {("new", "york"), ("machine", "learning")} <= _reference_phrases(docs_runs, 5, 10.0)
    for runs in docs_runs:
        for run in runs:
            assert join_phrases(run, expected) == _reference_join(run, expected)

    # the corpus holds the reference's joined tokens, document by document
    summary = ingest_jsonl(
        _write_jsonl(tmp_path / "p.jsonl", texts), tmp_path / "c", phrases=True, **ALL
    )
    corpus = Corpus.open(tmp_path / "c")
    found = _reference_phrases(docs_runs, 5, 10.0)
    wanted = [
        Counter({w: float(c) for w, c in Counter(
            w for run in runs for w in _reference_join(run, found)).items()})
        for runs in docs_runs
    ]  # fmt: skip
    assert _bags(corpus) == wanted
    assert "new_york" in corpus.vocab and summary.oov_tokens == 0
    recorded = corpus.ingest_info["cleaning"]["phrases"]
    assert recorded["joined"] == sorted([a, b] for a, b in found)
    assert (recorded["min_count"], recorded["threshold"]) == (5, 10.0)


def test_phrases_join_no_pair_across_a_stopword():
    tok = Tokenizer()
    texts = ["bank of america"] * 20 + ["bank america"] * 1
    counter = PhraseCounter(1, 0.0)
    for t in texts:
        counter.add(tok.runs(t))
    assert counter.pairs == Counter({"bank\x00america": 1})


def test_phrase_counting_is_bounded_and_keeps_the_frequent_pairs():
    rng = np.random.default_rng(3)
    tok = Tokenizer()
    texts = [
        " ".join(["new york"] * 3 + [f"n{''.join(rng.choice(list('abcdefghij'), 4))}"
                                     for _ in range(12)])
        for _ in range(80)
    ]  # fmt: skip
    counter = PhraseCounter(5, 10.0, max_pairs=30)
    for t in texts:
        counter.add(tok.runs(t))
        assert len(counter.pairs) <= 30
    assert counter.n_pruned > 0
    full = PhraseCounter(5, 10.0)
    for t in texts:
        full.add(tok.runs(t))
    assert counter.pairs["new\x00york"] == full.pairs["new\x00york"] == 240
    assert counter.words == full.words  # the words are never dropped
    assert len(full.pairs) > 30


def test_the_vocabulary_is_chosen_over_the_joined_tokens_and_appends_join_them(tmp_path):
    from lsdask.jobs.ingest import run_ingest

    texts = ["new york subway"] * 10 + ["york minster"] * 10 + ["new shoes"] * 10
    texts += ["alpha beta alpha beta"]  # a phrase in one document only
    path = _write_jsonl(tmp_path / "a.jsonl", texts)
    summary = ingest_jsonl(
        path, tmp_path / "c", phrases=True, phrase_min_count=1, phrase_threshold=0.0,
        min_df=2, max_df=1.0,
    )  # fmt: skip
    corpus = Corpus.open(tmp_path / "c")
    joined = corpus.ingest_info["cleaning"]["phrases"]["joined"]
    assert ["york", "subway"] in joined and ["alpha", "beta"] in joined
    # "york subway" scores, but "new york" takes its "york" first: it never occurs,
    # and the vocabulary holds only tokens that do (document frequencies counted
    # over the joined tokens); the phrase below min_df is dropped as words are
    assert sorted(corpus.vocab) == ["new_shoes", "new_york", "subway", "york_minster"]
    assert (summary.oov_tokens, summary.oov_types) == (2, 1)
    assert (read_all(corpus).sum(axis=0) > 0).all()
    new = _write_jsonl(tmp_path / "n.jsonl", ["new york subway new shoes"])
    appended = run_ingest("jsonl", [new], tmp_path / "c", append=True, progress=False)
    assert appended.oov_tokens == 0
    assert _bags(Corpus.open(tmp_path / "c"))[-1] == Counter(
        {"new_york": 1.0, "subway": 1.0, "new_shoes": 1.0}
    )


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"phrase_threshold": 3.0}, r"phrase_threshold set how phrases are detected, but "
                                    r"phrases is None; pass phrases=True"),
        ({"phrases": False, "phrase_min_count": 2}, r"phrase_min_count set .* phrases is False"),
        ({"phrases": True, "phrase_min_count": 0}, r"phrase_min_count must be an int >= 1.*got 0"),
        ({"phrases": True, "phrase_threshold": -1.0}, r"phrase_threshold must be a finite "
                                                      r"number >= 0.*got -1\.0"),
        ({"phrases": True, "phrase_threshold": math.nan}, r"phrase_threshold must be .*got nan"),
        ({"phrases": True, "vocab": ["a"]}, r"phrases=True detects phrases over the documents "
                                            r"before choosing the vocabulary, but vocab= "
                                            r"imposes one"),
        ({"strip_mail": "yes"}, r"strip_mail must be True, False or None; got 'yes'"),
    ],
)  # fmt: skip
def test_bad_cleaning_options_are_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        TextIngestOptions(**kwargs)


# --------------------------------------------------------------------------- binary files


def _png_bytes() -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (4, 4), (200, 10, 10)).save(buffer, format="PNG")
    return buffer.getvalue()


BINARIES = {
    "img/red.png": _png_bytes,
    "doc.pdf": lambda: b"%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\n",
    "data.bin": lambda: b"words words\x00\x01\x02 more words",
}


def test_binary_kind_by_content():
    assert binary_kind(_png_bytes(), "latin-1") == "a PNG image"
    assert binary_kind(b"%PDF-1.7 ...", "utf-8") == "a PDF document"
    assert binary_kind(b"GIF89a....", "latin-1") == "a GIF image"
    assert binary_kind(b"\x1f\x8b\x08\x00", "latin-1") == "gzip-compressed data"
    assert binary_kind(b"plain \x00 text", "latin-1") == "binary data (NUL bytes)"
    assert binary_kind(b"x" * 9000 + b"\x00", "utf-8") is None  # past the first 8 KiB
    utf16 = "plain text".encode("utf-16")
    assert binary_kind(utf16, "utf-16") is None and binary_kind(utf16, "utf-8") is not None
    assert binary_kind("café crème".encode("latin-1"), "latin-1") is None
    jpeg = next(iter(sorted((SHARED_DATA / "bsds500").glob("*/*.jpg"))), None)
    if jpeg is not None:
        assert binary_kind(jpeg.read_bytes(), "latin-1") == "a JPEG image"


def test_binary_files_are_skipped_and_counted_in_a_folder_and_an_archive(tmp_path, caplog):
    texts = {"a.txt": "rockets engines", "sub/b.txt": "engines fuel"}
    files = {**texts, **{name: make() for name, make in BINARIES.items()}}
    folder = _folder(tmp_path / "mixed", files)
    tar = _tar(
        tmp_path / "mixed.tar.gz",
        {n: c if isinstance(c, bytes) else c.encode() for n, c in files.items()},
    )
    for source in (folder, tar):
        out = tmp_path / f"c-{source.name}"
        with caplog.at_level(logging.WARNING, logger="lsdask.io.ingest.common"):
            caplog.clear()
            summary = ingest_text_folder(source, out, encoding="latin-1", **ALL)
        corpus = Corpus.open(out)
        assert summary.n_docs == 2 and summary.n_skipped_files == 3
        assert sorted(corpus.ingest_info["doc_names"]) == sorted(texts)
        assert sorted(corpus.vocab) == ["engines", "fuel", "rockets"]
        skipped = corpus.ingest_info["skipped_files"]
        assert skipped["n_files"] == 3
        assert {s["name"]: s["kind"] for s in skipped["first"]} == {
            "img/red.png": "a PNG image",
            "doc.pdf": "a PDF document",
            "data.bin": "binary data (NUL bytes)",
        }
        assert "skipped 3 files that are not text, whatever the encoding" in caplog.text
        assert "img/red.png (a PNG image)" in caplog.text
    # excluded, they are not read at all: no warning, nothing counted
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="lsdask.io.ingest.common"):
        quiet = ingest_text_folder(
            folder, tmp_path / "q", exclude=["*.png", "*.pdf", "*.bin"], **ALL
        )
    assert quiet.n_skipped_files == 0 and "skipped" not in caplog.text


def test_a_folder_of_binary_files_only_says_so(tmp_path):
    folder = _folder(tmp_path / "images", {"a.png": _png_bytes(), "b.png": _png_bytes()})
    with pytest.raises(DataError, match=r"no documents found \(2 files skipped as not text"):
        ingest_text_folder(folder, tmp_path / "c", encoding="latin-1", **ALL)


def test_text_not_in_the_encoding_points_to_the_encoding_and_to_exclude(tmp_path):
    folder = _folder(tmp_path / "posts", {"a.txt": "caf\xe9".encode("latin-1")})
    with pytest.raises(DataError, match=r"If it is text in another encoding, pass it: .*"
                                        r"--encoding latin-1.*--exclude GLOB"):  # fmt: skip
        ingest_text_folder(folder, tmp_path / "c", **ALL)


def test_cli_reports_skipped_files(tmp_path, capsys):
    folder = _folder(tmp_path / "mixed", {"a.txt": "rockets engines", "x.png": _png_bytes()})
    out = tmp_path / "c"
    code = main(["ingest", "text", str(folder), "--out", str(out), "--encoding", "latin-1",
                 "--min-df", "1", "--max-df", "1.0"])  # fmt: skip
    assert code == 0
    assert "skipped: 1 file, not text" in capsys.readouterr().out


# --------------------------------------------------------------------------- include / exclude

TREE = {
    "a/1.txt": "apples",
    "a/2.md": "bananas",
    "b/3.txt": "cherries",
    "b/deep/4.txt": "dates",
    "README": "figs",
}


@pytest.mark.parametrize(
    ("include", "exclude", "expected"),
    [
        (None, None, ["README", "a/1.txt", "a/2.md", "b/3.txt", "b/deep/4.txt"]),
        ("*.txt", None, ["a/1.txt", "b/3.txt", "b/deep/4.txt"]),
        (["*.txt", "README"], None, ["README", "a/1.txt", "b/3.txt", "b/deep/4.txt"]),
        (None, ["b/*"], ["README", "a/1.txt", "a/2.md"]),
        ("*.txt", "b/deep/*", ["a/1.txt", "b/3.txt"]),
        ("a/*", "*.md", ["a/1.txt"]),
    ],
)
def test_include_and_exclude_globs_in_a_folder_and_an_archive(tmp_path, include, exclude, expected):
    folder = _folder(tmp_path / "tree", TREE)
    tar = _tar(tmp_path / "tree.tar.gz", {n: t.encode() for n, t in sorted(TREE.items())})
    for source in (folder, tar):
        out = tmp_path / f"c-{source.name}"
        ingest_text_folder(source, out, include=include, exclude=exclude, **ALL)
        names = Corpus.open(out).ingest_info["doc_names"]
        assert sorted(names) == expected


def test_globs_from_the_command_line_and_bad_globs(tmp_path, capsys):
    folder = _folder(tmp_path / "tree", TREE)
    out = tmp_path / "c"
    code = main(["ingest", "text", str(folder), "--out", str(out), "--include", "*.txt",
                 "--include", "README", "--exclude", "b/deep/*", "--min-df", "1",
                 "--max-df", "1.0"])  # fmt: skip
    assert code == 0
    info = Corpus.open(out).ingest_info
    assert sorted(info["doc_names"]) == ["README", "a/1.txt", "b/3.txt"]
    assert (info["include"], info["exclude"]) == (["*.txt", "README"], ["b/deep/*"])
    with pytest.raises(ValueError, match=r"include must be a glob or a list of globs .*got 3"):
        ingest_text_folder(folder, tmp_path / "d", include=3, **ALL)
    with pytest.raises(ValueError, match=r"exclude must be a glob .*got \[''\]"):
        ingest_text_folder(folder, tmp_path / "d", exclude=[""], **ALL)
    with pytest.raises(DataError, match=r"no documents found matching include \['\*\.zip'\]"):
        ingest_text_folder(folder, tmp_path / "d", include="*.zip", **ALL)


# --------------------------------------------------------------------------- df bounds


def _reference_vocab(texts, min_df, max_df):
    tok = Tokenizer()
    df = Counter(w for t in texts for w in set(tok.tokens(t)))
    lo = min_df if isinstance(min_df, int) else min_df * len(texts)
    hi = max_df if isinstance(max_df, int) else max_df * len(texts)
    return sorted(w for w, d in df.items() if lo <= d <= hi)


DF_TEXTS = [
    "apples bananas cherries",
    "apples bananas dates",
    "apples cherries figs",
    "apples bananas grapes",
    "kiwis lemons",
]


@pytest.mark.parametrize(("min_df", "max_df"), [(2, 1.0), (1, 3), (0.4, 0.7), (2, 0.79)])
def test_min_df_and_max_df_in_every_text_front_end(tmp_path, min_df, max_df):
    expected = _reference_vocab(DF_TEXTS, min_df, max_df)
    jsonl = _write_jsonl(tmp_path / "d.jsonl", DF_TEXTS)
    table = tmp_path / "d.csv"
    table.write_text("text\n" + "\n".join(DF_TEXTS) + "\n", encoding="utf-8")
    folder = _folder(tmp_path / "d", {f"{i}.txt": t for i, t in enumerate(DF_TEXTS)})
    bounds = {"min_df": min_df, "max_df": max_df}
    ingest_jsonl(jsonl, tmp_path / "j", **bounds)
    ingest_table(table, tmp_path / "t", "text", **bounds)
    ingest_text_folder(folder, tmp_path / "f", **bounds)
    flags = ["--min-df", str(min_df), "--max-df", str(max_df)]
    assert main(["ingest", "jsonl", str(jsonl), "--out", str(tmp_path / "jc"), *flags]) == 0
    assert main(["ingest", "table", str(table), "--out", str(tmp_path / "tc"), *flags]) == 0
    assert main(["ingest", "text", str(folder), "--out", str(tmp_path / "fc"), *flags]) == 0
    for name in ("j", "t", "f", "jc", "tc", "fc"):
        assert sorted(Corpus.open(tmp_path / name).vocab) == expected, name


def test_cleaning_flags_from_the_command_line(tmp_path, capsys):
    posts = ["From: a@b.com\n\nnew york rockets\n> quoted"] * 8
    jsonl = _write_jsonl(tmp_path / "p.jsonl", posts)
    out = tmp_path / "c"
    code = main(["ingest", "jsonl", str(jsonl), "--out", str(out), "--strip-mail", "--phrases",
                 "--phrase-min-count", "2", "--phrase-threshold", "0.1", "--min-df", "1",
                 "--max-df", "1.0"])  # fmt: skip
    assert code == 0
    corpus = Corpus.open(out)
    cleaning = corpus.ingest_info["cleaning"]
    assert cleaning["strip_mail"] is True
    assert (cleaning["phrases"]["min_count"], cleaning["phrases"]["threshold"]) == (2, 0.1)
    assert "quoted" not in corpus.vocab and "com" not in corpus.vocab
    assert sorted(corpus.vocab) == ["new_york", "rockets"]  # joined left to right
    with pytest.raises(SystemExit):
        main(["ingest", "jsonl", str(jsonl), "--out", str(tmp_path / "d"), "--phrases",
              "--phrase-threshold", "-2"])  # fmt: skip
    assert "--phrase-threshold: expected a score, a finite number >= 0" in capsys.readouterr().err
    assert main(["ingest", "jsonl", str(jsonl), "--out", str(tmp_path / "d"),
                 "--phrase-min-count", "3"]) != 0  # fmt: skip
    assert "phrase_min_count set how phrases are detected" in capsys.readouterr().err
