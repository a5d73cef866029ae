"""What text cleaning does to 20 Newsgroups' topics (issue 43).

Two ingests of the "bydate" training split of 20 Newsgroups
(``../shared/data/20newsgroups/20news-bydate.tar.gz``, latin-1), each with its
test split over the training vocabulary, then ``LDA(K)`` at its defaults on
each (memoized VI, the 2-worker LocalCluster), scored on the test split:

- ``before``: the cleaning lsdask had before issue 43 and the benchmark
  corpora still use (``datasets/ingest_corpora.py``): each post's mail header
  dropped (``strip_headers``), the earlier stopword list (``"english"``,
  :data:`lsdask.io.ingest.stopwords.LEGACY_ENGLISH_STOPWORDS`),
  ``min_df=5``, ``max_df=0.5``;
- ``after``: ``strip_mail`` (headers, quoted replies and their attribution
  lines, signatures, encoded blocks, addresses) and the default stopword list
  (``"english-2"``), the same document-frequency bounds.

For each, the share of topics whose top 10 words hold a stopword (of the
default list) or a mail token (:data:`MAIL_TOKENS`: the header fields of RFC
1036 news articles, the address domains, and the words of attribution
lines), and the heldout score (document completion, nats per token). The two
vocabularies differ, so their heldout scores predict different tokens: they
say whether the model still fits its own data, not which corpus is better.

Example::

    python pipelines/benchmarks/bench_cleaning.py --k 100
    python pipelines/benchmarks/bench_cleaning.py --quick   # K=20, 3 laps: a smoke run
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path
from typing import Any

from lsdask import LDA
from lsdask.io.ingest import ingest_text_folder
from lsdask.io.ingest.stopwords import ENGLISH_STOPWORDS, LEGACY_ENGLISH_STOPWORDS
from lsdask.io.ingest.words import Tokenizer

ROOT = Path(__file__).resolve().parents[2]
ARCHIVE = "20newsgroups/20news-bydate.tar.gz"

#: Tokens of mail and news plumbing rather than of what a post says: RFC 1036
#: header field names (split into words as the tokenizer splits them), address
#: domains, and attribution words ("In article <...>, x@y.edu writes:").
MAIL_TOKENS = frozenset(
    """
    from subject newsgroups path date organization lines message id references
    sender reply followup distribution keywords summary xref nntp posting host
    expires approved article writes wrote edu com org net gov mil uk ca de au
    """.split()
)

VARIANTS: dict[str, dict[str, Any]] = {
    "before": {"strip_headers": True, "stopwords": LEGACY_ENGLISH_STOPWORDS},
    "after": {"strip_mail": True, "stopwords": ENGLISH_STOPWORDS},
}


def ingest(variant: str, shared: Path, work: Path) -> tuple[Path, Path, dict]:
    """The variant's training and test corpora, written under ``work``."""
    settings = dict(VARIANTS[variant])
    tokenizer = Tokenizer(stopwords=settings.pop("stopwords"))
    train, test = work / f"{variant}-train", work / f"{variant}-test"
    common = dict(encoding="latin-1", overwrite=True, progress=False, tokenizer=tokenizer)
    subset = "20news-bydate-train"
    t0 = time.perf_counter()
    summary = ingest_text_folder(
        shared / ARCHIVE, train, subset=subset, min_df=5, max_df=0.5, **common, **settings
    )
    ingest_text_folder(
        shared / ARCHIVE, test, subset="20news-bydate-test", vocab=train, **common, **settings
    )
    return train, test, {"train": dict(summary), "ingest_s": time.perf_counter() - t0}


def flagged(top: list[list[str]]) -> dict[str, Any]:
    """Topics whose top words hold a stopword or a mail token, and which."""
    stop = [sorted(set(words) & ENGLISH_STOPWORDS) for words in top]
    mail = [sorted(set(words) & MAIL_TOKENS) for words in top]
    either = [bool(s or m) for s, m in zip(stop, mail, strict=True)]
    return {
        "share_stopword": sum(map(bool, stop)) / len(top),
        "share_mail": sum(map(bool, mail)) / len(top),
        "share_either": sum(either) / len(top),
        "examples": [
            {"topic": k, "words": words, "stopwords": stop[k], "mail": mail[k]}
            for k, words in enumerate(top)
            if either[k]
        ][:10],
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {"K": args.k, "variants": {}}
    for variant in VARIANTS:
        train, test, info = ingest(variant, args.shared, args.work)
        t0 = time.perf_counter()
        laps = {} if args.laps is None else {"n_laps": args.laps}
        lda = LDA(args.k, random_state=0, progress=False, **laps).fit(train)
        fit_s = time.perf_counter() - t0
        top = lda.top_words(10)
        row = {
            **info,
            "fit_s": fit_s,
            "laps": int(lda.n_laps_),
            "heldout": float(lda.score(test)),
            **flagged(top),
            "top_words": [" ".join(words) for words in top],
        }
        out["variants"][variant] = row
        print(
            f"{variant}: V={row['train']['vocab_size']:,}, tokens {row['train']['n_tokens']:,}, "
            f"topics with a stopword {row['share_stopword']:.0%}, with a mail token "
            f"{row['share_mail']:.0%}, either {row['share_either']:.0%}; heldout "
            f"{row['heldout']:.4f} nats/token ({row['laps']} laps, {fit_s:.0f} s)",
            flush=True,
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--work", type=Path, default=ROOT / "data" / "bench_cleaning")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    parser.add_argument("--k", type=int, default=100)
    parser.add_argument("--laps", type=int, default=None, help="at most (default: LDA's)")
    parser.add_argument("--quick", action="store_true", help="K=20, 3 laps")
    args = parser.parse_args()
    if args.quick:
        args.k, args.laps = 20, 3
    args.work.mkdir(parents=True, exist_ok=True)
    result = run(args)
    name = f"cleaning-20news-K{args.k}{'-quick' if args.quick else ''}.json"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / name).write_text(json.dumps(result, indent=1), encoding="utf-8")
    print(f"wrote {args.out / name}")
    if not args.quick:
        shutil.rmtree(args.work, ignore_errors=True)


if __name__ == "__main__":
    main()
