"""The topics job: a saved LDA or HDP model's top words, with UMass coherence over a corpus.

``lsdask topics`` prints :func:`format_topics` of :func:`topic_report`; for a model
with learned priors (``alpha="auto"``, ``eta="auto"``) also each topic's ``alpha_k``
and the learned totals; for an HDP each topic's weight ``E[beta_k]``, the topics
ordered by it. ``--format json`` and ``csv`` write :func:`topics_json` and
:func:`topics_csv` of the same report.

UMass coherence (:func:`lsdask.evaluate.umass_coherence`) is a sum over the
``n (n - 1) / 2`` pairs of a topic's top ``n`` words, each pair's
``log((D(w_i, w_j) + 1) / D(w_j))`` (``w_j`` the more probable word, ``D`` counting
the reference documents that hold the words): at most about 0, and larger in
magnitude for larger ``n``. Its mean per pair, the sum divided by the pairs, is
comparable across ``n``; both are reported.
"""

from __future__ import annotations

import csv
import io
import json
import os
import stat
import textwrap
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lsdask.estimators.hdp import HDP
from lsdask.evaluate import top_word_ids
from lsdask.jobs.inputs import check_same_vocab, loaded_topic_model, open_corpus
from lsdask.persist.files import write_text_atomic

__all__ = [
    "CSV_COLUMNS",
    "FORMATS",
    "UMASS_SCALE",
    "TopicReport",
    "format_topics",
    "topic_report",
    "topics_csv",
    "topics_json",
    "topics_text",
    "write_report",
]

#: what UMass coherence sums, as the reports state it
UMASS_SCALE = (
    "UMass coherence: the sum over the n(n-1)/2 pairs of a topic's top n words of "
    "log((D(w_i, w_j) + 1) / D(w_j)), w_j the more probable word and D counting the "
    "documents that hold the words (nats; near 0 at best); per pair: the sum / (n(n-1)/2), "
    "comparable across n"
)


@dataclass
class TopicReport:
    """What :func:`topic_report` read.

    Attributes
    ----------
    K, n_top : int
        Topics, and words shown per topic.
    share : array of K
        Each topic's share of the training tokens.
    top_words : list of K lists of str
    top_probs : list of K lists of float
        The probability ``E[phi_kw]`` of each of those words.
    coherence : array of K or None
        UMass coherence of each topic's top words over ``corpus`` (None
        without one): a sum over their :attr:`n_pairs` pairs; ``mean_coherence``
        their mean. :attr:`coherence_per_pair` divides by the pairs.
    corpus : str or None
    alpha : array of K or None
        Each topic's document-topic prior ``alpha_k`` (``LDA.alpha_``: alpha / K
        each unless learned).
    learned_alpha, learned_eta : bool
        Whether the model learned alpha (``alpha="auto"``) and eta; ``eta`` its eta.
    weights : array of K or None
        An HDP's topic weights ``E[beta_k]`` (``HDP.topic_weights_``, decreasing:
        the topics are in that order); ``leftover`` the mass beyond K. None for LDA.
    model_name : str
        ``"LDA"`` or ``"HDP"``; ``source`` the model's folder (None for a model
        in memory).
    """

    K: int
    n_top: int
    share: np.ndarray
    top_words: list[list[str]]
    coherence: np.ndarray | None = None
    mean_coherence: float | None = None
    corpus: str | None = None
    alpha: np.ndarray | None = None
    learned_alpha: bool = False
    eta: float | None = None
    learned_eta: bool = False
    weights: np.ndarray | None = None
    leftover: float | None = None
    top_probs: list[list[float]] = field(default_factory=list)
    model_name: str = "LDA"
    source: str | None = None

    @property
    def n_pairs(self) -> int:
        """The word pairs a topic's coherence sums over: n (n - 1) / 2 of its n top words."""
        n = len(self.top_words[0]) if self.top_words else 0
        return n * (n - 1) // 2

    @property
    def coherence_per_pair(self) -> np.ndarray | None:
        """Each topic's coherence per word pair (None without coherence or pairs)."""
        if self.coherence is None or self.n_pairs == 0:
            return None
        return self.coherence / self.n_pairs


def topic_report(model: Any, *, n_top: int = 10, corpus: Any = None) -> TopicReport:
    """Each topic's top words, and their UMass coherence over a corpus.

    Parameters
    ----------
    model : str, os.PathLike, lsdask.LDA or lsdask.HDP
        A model directory (:func:`lsdask.persist.load_model`) or fitted model.
    n_top : int, default 10
        Words per topic.
    corpus : str, os.PathLike, Corpus or None, default None
        Reference documents for UMass coherence (Mimno et al. 2011), read
        batch by batch; None skips it.

    Returns
    -------
    TopicReport

    Raises
    ------
    FileNotFoundError, ValueError
        For a missing or corrupt model, a missing corpus or one over
        another vocabulary.
    """
    if isinstance(n_top, bool) or not isinstance(n_top, int) or n_top < 1:
        raise ValueError(f"n_top must be a positive integer; got {n_top!r}")
    lda = loaded_topic_model(model)
    mass = np.maximum(lda.components_ - lda.eta_, 0.0).sum(axis=1)  # tokens per topic
    topic_word = lda.topic_word_
    ids = top_word_ids(topic_word, n_top)  # as top_words orders them
    report = TopicReport(
        K=int(lda.model_.n_components),
        n_top=n_top,
        share=mass / mass.sum() if mass.sum() > 0 else mass,
        top_words=lda.top_words(n_top),
        top_probs=np.take_along_axis(topic_word, ids, axis=1).tolist(),
        model_name="HDP" if isinstance(lda, HDP) else "LDA",
        source=str(model) if isinstance(model, str | os.PathLike) else None,
        alpha=np.asarray(lda.alpha_),
        learned_alpha=bool(lda.model_.learn_alpha),
        eta=float(lda.eta_),
        learned_eta=bool(lda.model_.learn_eta),
    )
    weights = getattr(lda, "topic_weights_", None)
    if weights is not None:
        report.weights = np.asarray(weights)
        report.leftover = float(lda.leftover_weight_)
    if corpus is not None:
        docs = open_corpus(corpus, "corpus")
        if lda.vocabulary_ is not None:
            check_same_vocab(lda.vocabulary_, docs, "corpus", "the model")
        report.coherence = lda.coherence(docs, n_top)
        report.mean_coherence = float(np.mean(report.coherence))
        report.corpus = docs.path
    return report


def format_topics(report: TopicReport) -> str:
    """One line per topic of a :func:`topic_report` (a learned ``alpha_k`` and the
    coherence first, if any, the latter summed and per word pair), then the mean
    coherence with its scale, and the learned priors."""
    coherence, per_pair = report.coherence, report.coherence_per_pair
    alpha = report.alpha if report.learned_alpha else None
    prior = "" if alpha is None else f"  {'alpha_k':>8}"
    umass = "" if coherence is None else f"  {'UMass':>8}  {'per pair':>8}"
    weights = report.weights
    weight = "" if weights is None else f"  {'E[beta]':>7}"
    lines = [f"{'topic':>5}{weight}  {'share':>6}{prior}{umass}  top {report.n_top} words"]
    for k, words in enumerate(report.top_words):
        weight = "" if weights is None else f"  {weights[k]:>7.4f}"
        prior = "" if alpha is None else f"  {alpha[k]:>8.3g}"
        umass = "" if coherence is None else f"  {coherence[k]:>8.2f}  {_pair(per_pair, k)}"
        lines.append(f"{k:>5}{weight}  {report.share[k]:>6.1%}{prior}{umass}  {' '.join(words)}")
    if coherence is not None and report.mean_coherence is not None:
        pairs = report.n_pairs
        mean_pair = f"{report.mean_coherence / pairs:.3f}" if pairs else "none"
        lines.append(
            f"mean UMass coherence of {report.K} topics (top {report.n_top} words, documents "
            f"of {report.corpus}): {report.mean_coherence:.3f} summed over {pairs} word pairs, "
            f"{mean_pair} per pair"
        )
        lines.extend(textwrap.wrap(UMASS_SCALE, 100, subsequent_indent="  "))
    if alpha is not None:
        lines.append(
            f"learned document-topic prior: alpha = sum_k alpha_k = {float(alpha.sum()):.4g} "
            f"over {report.K} topics (alpha_k from {float(alpha.min()):.3g} to "
            f"{float(alpha.max()):.3g})"
        )
    if weights is not None and report.leftover is not None:
        lines.append(
            f"HDP: {report.K} topics by weight E[beta_k] (sum {float(weights.sum()):.4f}; "
            f"the mass beyond them {report.leftover:.4g})"
        )
    if report.learned_eta and report.eta is not None:
        lines.append(f"learned topic-word prior: eta = {report.eta:.4g}")
    return "\n".join(lines)


def _pair(per_pair: np.ndarray | None, k: int) -> str:
    """Topic ``k``'s coherence per word pair, in a column of 8 ("none": no pairs)."""
    return f"{'none':>8}" if per_pair is None else f"{per_pair[k]:>8.3f}"


def _value(values: np.ndarray | None, k: int) -> float | None:
    """``values[k]`` as a float, None without values."""
    return None if values is None else float(values[k])


def _topic_record(report: TopicReport, k: int) -> dict[str, Any]:
    """Topic ``k`` of a report as plain values (None where the report has none)."""
    return {
        "id": k,
        "share": float(report.share[k]),
        "alpha_k": _value(report.alpha, k),
        "weight": _value(report.weights, k),
        "coherence": _value(report.coherence, k),
        "coherence_per_pair": _value(report.coherence_per_pair, k),
        "words": [
            {"word": word, "prob": float(prob)}
            for word, prob in zip(report.top_words[k], report.top_probs[k], strict=True)
        ],
    }


def topics_json(report: TopicReport) -> str:
    """A :func:`topic_report` as one JSON object: the model's summary (K, the priors,
    an HDP's weights, the mean coherence and its scale) and ``topics``, one object
    per topic (:func:`_topic_record`: id, share, alpha_k, weight, coherence and
    per pair, the top words with their probabilities). Absent values are null."""
    mean = report.mean_coherence
    pairs = report.n_pairs
    coherence = None
    if report.coherence is not None and mean is not None:
        coherence = {
            "measure": "UMass",
            "scale": UMASS_SCALE,
            "corpus": report.corpus,
            "pairs_per_topic": pairs,
            "mean": mean,
            "mean_per_pair": mean / pairs if pairs else None,
        }
    hdp = None
    if report.weights is not None:
        hdp = {"weights_total": float(report.weights.sum()), "leftover": report.leftover}
    alpha = report.alpha
    summary = {
        "model": report.model_name,
        "source": report.source,
        "K": report.K,
        "n_top": report.n_top,
        "alpha": None if alpha is None else float(alpha.sum()),
        "learned_alpha": report.learned_alpha,
        "eta": report.eta,
        "learned_eta": report.learned_eta,
        "hdp": hdp,
        "coherence": coherence,
        "topics": [_topic_record(report, k) for k in range(len(report.top_words))],
    }
    return json.dumps(summary, indent=1)


#: the columns of :func:`topics_csv`
CSV_COLUMNS = ("id", "share", "alpha_k", "weight", "coherence", "coherence_per_pair", "words")


def topics_csv(report: TopicReport) -> str:
    """A :func:`topic_report` as CSV: a header (:data:`CSV_COLUMNS`), then one row
    per topic, its top words joined by spaces; an empty cell where the report has
    no value (an LDA model's weight, the coherence without a corpus)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for k in range(len(report.top_words)):
        record = _topic_record(report, k)
        record["words"] = " ".join(report.top_words[k])
        writer.writerow(["" if record[c] is None else record[c] for c in CSV_COLUMNS])
    return out.getvalue()


def topics_text(report: TopicReport) -> str:
    """:func:`format_topics`, ended by a newline as the other formats."""
    return format_topics(report) + "\n"


#: ``lsdask topics --format``'s formats and their writers
FORMATS = {"text": topics_text, "json": topics_json, "csv": topics_csv}


def write_report(text: str, out: str | os.PathLike[str]) -> None:
    """Write ``text`` to ``out``, the user's own path, as a shell's ``>`` does.

    A new file, or a regular file that is there, is written atomically (into a
    temporary beside it, renamed over it): a reader sees the old file or the
    new one. A link the user named, or a file that is not regular (``/dev/stdout``,
    a FIFO, a terminal), is opened and written through, as ``>`` does: renaming
    over it would replace the link or device rather than write to it.
    """
    path = os.path.abspath(out)
    folder = os.path.dirname(path)
    if not os.path.isdir(folder):
        raise FileNotFoundError(
            f"--out {out}: the folder {folder} does not exist; create it, or name a file "
            "in an existing folder"
        )
    if os.path.isdir(path):
        raise ValueError(f"--out {out} is a folder; name a file to write the topics to")
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        mode = stat.S_IFREG  # a new file
    if stat.S_ISREG(mode):
        write_text_atomic(folder, path, text)
        return
    with open(path, "w", encoding="utf-8", newline="\n") as fh:
        fh.write(text)
