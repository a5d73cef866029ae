"""Single flipped bits in a corpus: every flip is refused or harmless, none loads silently.

A small corpus is written with :meth:`lsdask.io.corpus.Corpus.write`; then, for
each of ``LSDASK_BITFLIPS`` random single-bit flips (CI: 100; the full run: 500,
to go with the Zarr store's 500), a fresh copy gets one bit flipped and every
document is read back as a fit reads it (``Corpus.open(path, rescan=True)``, then
each batch's ``load``). Each flip is classified:

``identical``
    everything read back equals the original (a flip in padding or in statistics
    nothing uses);
``refused``
    a :class:`lsdask.errors.DataError` with a one-line message (any other
    exception counts as ``other``);
``silent``
    it loaded, and some document, word id, count or vocabulary word differs
    from what was written: a fit would train on data nobody wrote (target: 0);
``other``
    any other exception, or an error message of several lines.

The flips run in a child process (``python -m tests.test_bitflips_corpus``)
under an address-space limit, each flip's id printed before it runs, so a crash
or a runaway allocation is attributed to its flip. The counts are printed
(``pytest -s`` shows them).
"""

from __future__ import annotations

import os
import random
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from lsdask.errors import DataError

ROOT = Path(__file__).resolve().parents[1]
FLIPS = int(os.environ.get("LSDASK_BITFLIPS", "100"))
ADDRESS_SPACE = 4 << 30  # room for pyarrow and numpy, not for an allocation a flip inflates
KINDS = ("identical", "refused", "silent", "other")


def write_corpus(path: Path) -> None:
    """400 documents over 60 words, in 2 part files of 4 row groups each."""
    from lsdask.io.corpus import Corpus

    rng = np.random.default_rng(0)
    X = sp.random(400, 60, density=0.15, random_state=rng, format="csr")
    X.data = np.ceil(X.data * 5)
    vocab = [f"word{i:02d}" for i in range(60)]
    Corpus.write(path, X, vocab, docs_per_row_group=50, docs_per_file=200)


def read_everything(path: Path) -> tuple:
    """The vocabulary and every batch's arrays, read as a fit reads them."""
    from lsdask.io.corpus import Corpus

    corpus = Corpus.open(path, rescan=True)
    batches = []
    for batch in corpus.batches:
        d = batch.load()
        batches.append(
            (batch.file, batch.row_group, *(np.asarray(a).tolist() for a in
             (d.doc_ids, d.indptr, d.word_ids, d.counts)))
        )  # fmt: skip
    return tuple(corpus.vocab), batches


def _files(root: Path, target: str) -> list[Path]:
    if target == "parts":
        return sorted((root / "parts").glob("*.parquet"))
    return [root / "manifest.json", root / "vocab.txt"]


def child(pristine: Path, work: Path, n: int, seed: int, target: str) -> int:
    """Flip ``n`` random bits (one per copy) in ``target`` files ('parts' or 'meta');
    print each flip's class and the counts."""
    want = read_everything(pristine)
    rng = random.Random(seed)
    files = _files(pristine, target)
    # parts: by size (every byte alike); meta: half the flips in each file, so that
    # the short vocab.txt gets its share
    sizes = [f.stat().st_size for f in files] if target == "parts" else [1] * len(files)
    counts = dict.fromkeys(KINDS, 0)
    for i in range(n):
        (file,) = rng.choices(files, weights=sizes)
        rel = file.relative_to(pristine)
        byte, bit = rng.randrange(file.stat().st_size), rng.randrange(8)
        print(f"flip {seed}-{i}: {rel} byte {byte} bit {bit}", flush=True)
        # a folder of its own per flip: each read is a command's first sight of its
        # corpus (a process remembers the parts it verified, by path, size, time and inode)
        copy = work / f"flip{i}"
        shutil.copytree(pristine, copy)
        raw = bytearray((copy / rel).read_bytes())
        raw[byte] ^= 1 << bit
        (copy / rel).write_bytes(bytes(raw))
        try:
            got = read_everything(copy)
        except DataError as exc:  # lsdask's own error: it names the file
            message = str(exc)
            kind = "refused" if message and "\n" not in message.strip() else "other"
            print(f"  {kind} {type(exc).__name__}: {message[:200]!r}", flush=True)
        except Exception as exc:
            kind = "other"
            print(f"  other {type(exc).__name__}: {str(exc)[:200]!r}", flush=True)
        else:
            kind = "identical" if got == want else "silent"
            print(f"  {kind}", flush=True)
        counts[kind] += 1
        shutil.rmtree(copy)
    print("counts: " + " ".join(f"{k}={v}" for k, v in counts.items()), flush=True)
    return 0


def _limit_address_space() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


def _run(tmp_path: Path, n: int, target: str) -> tuple[dict[str, int], str]:
    pristine = tmp_path / "pristine"
    write_corpus(pristine)
    work = tmp_path / "work"
    work.mkdir()
    run = subprocess.run(
        [sys.executable, "-m", "tests.test_bitflips_corpus", str(pristine), str(work), str(n),
         "1", target],
        cwd=ROOT, capture_output=True, text=True, timeout=1800, preexec_fn=_limit_address_space,
    )  # fmt: skip
    out = run.stdout
    last = [line for line in out.splitlines() if line.startswith("flip ")][-1:]
    assert run.returncode == 0, f"status {run.returncode}; last flip {last}\n{run.stderr[-3000:]}"
    summary = out.splitlines()[-1]
    assert summary.startswith("counts: "), out[-3000:]
    counts = {k: int(v) for k, v in (item.split("=") for item in summary[8:].split())}
    print(f"{target}: {n} single-bit flips: {summary[8:]}")
    return counts, out


def _cases(out: str, kind: str) -> list[str]:
    lines = out.splitlines()
    return [
        f"{lines[i - 1]} -> {line.strip()}"
        for i, line in enumerate(lines)
        if line.startswith(f"  {kind}")
    ]


def test_single_bit_flips_in_part_files_never_load_silently(tmp_path: Path) -> None:
    counts, out = _run(tmp_path, FLIPS, "parts")
    assert sum(counts.values()) == FLIPS
    assert counts["silent"] == 0, (counts, _cases(out, "silent")[:10])
    assert counts["other"] == 0, (counts, _cases(out, "other")[:10])


def test_single_bit_flips_in_the_manifest_and_vocabulary_never_load_silently(
    tmp_path: Path,
) -> None:
    """Half the flips land in vocab.txt: a flipped letter changes a word, which
    the corpus's vocabulary digest must catch."""
    n = max(20, FLIPS // 5)
    counts, out = _run(tmp_path, n, "meta")
    assert sum(counts.values()) == n
    assert counts["silent"] == 0, (counts, _cases(out, "silent")[:10])
    assert counts["other"] == 0, (counts, _cases(out, "other")[:10])


def test_the_reader_of_this_suite_sees_a_changed_document(tmp_path: Path) -> None:
    """The comparison is not blind: a document rewritten with other counts reads as different."""
    from lsdask.io.corpus import Corpus

    write_corpus(tmp_path / "a")
    want = read_everything(tmp_path / "a")
    rng = np.random.default_rng(0)
    X = sp.random(400, 60, density=0.15, random_state=rng, format="csr")
    X.data = np.ceil(X.data * 5)
    X = X.tolil()
    X[3, 7] = X[3, 7] + 1
    X = X.tocsr()
    vocab = [f"word{i:02d}" for i in range(60)]
    Corpus.write(tmp_path / "b", X, vocab, docs_per_row_group=50, docs_per_file=200)
    assert read_everything(tmp_path / "b") != want


if __name__ == "__main__":
    if len(sys.argv) != 6:
        pytest.exit("usage: python -m tests.test_bitflips_corpus PRISTINE WORK N SEED TARGET")
    sys.exit(child(Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]),
                   sys.argv[5]))  # fmt: skip
