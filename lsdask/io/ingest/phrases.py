"""Phrase detection: frequent collocations of two words joined into one token.

As gensim's ``Phrases`` (default scorer), after Mikolov et al., "Distributed
Representations of Words and Phrases and their Compositionality" (NIPS 2013,
section 4): the adjacent words ``a b`` become the token ``a_b`` when

.. math::

    \\mathrm{score}(a, b) = \\frac{(n_{ab} - \\delta)\\,N}{n_a\\,n_b} > \\tau,

where :math:`n_a`, :math:`n_b` and :math:`n_{ab}` are how often the words and
the pair occur in the corpus, :math:`\\delta` is ``min_count`` (pairs seen
``min_count`` times or fewer never score above 0), :math:`\\tau` is
``threshold``, and :math:`N` the number of distinct words and pairs counted
(gensim's ``len(vocab)``).

Pairs are counted within runs of adjacent words (:meth:`Tokenizer.runs
<lsdask.io.ingest.words.Tokenizer.runs>`): a stopword between two words
separates them. :class:`PhraseCounter` counts over a stream of documents in
bounded memory: when it holds more than ``max_pairs`` distinct pairs, it drops
the pairs seen fewest times, as gensim does past ``max_vocab_size`` (the
counts of pairs dropped and seen again afterwards then fall short).
:func:`join_phrases` joins the chosen pairs in a run, left to right, each word
in at most one phrase.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from itertools import pairwise

from lsdask.config import DEFAULT_PHRASE_MAX_PAIRS

__all__ = ["PHRASE_DELIMITER", "PhraseCounter", "join_phrases", "phrase_score"]

#: Joins the two words of a phrase: ``new_york``.
PHRASE_DELIMITER = "_"

_KEY = "\x00"  # separates the two words of a pair in the counting table


def phrase_score(pair_count: int, count_a: int, count_b: int, n: int, min_count: int) -> float:
    """Mikolov et al.'s score of the pair ``a b``: ``(n_ab - min_count) * N / (n_a * n_b)``."""
    return (pair_count - min_count) * n / (count_a * count_b)


def join_phrases(run: Sequence[str], phrases: Collection[tuple[str, str]]) -> list[str]:
    """The words of ``run`` with each pair of ``phrases`` joined, left to right.

    Examples
    --------
    >>> join_phrases(["new", "york", "city"], {("new", "york"), ("york", "city")})
    ['new_york', 'city']
    """
    out: list[str] = []
    i, n = 0, len(run)
    while i < n:
        if i + 1 < n and (run[i], run[i + 1]) in phrases:
            out.append(run[i] + PHRASE_DELIMITER + run[i + 1])
            i += 2
        else:
            out.append(run[i])
            i += 1
    return out


class PhraseCounter:
    """Count words and adjacent pairs over a stream of documents; choose phrases.

    Parameters
    ----------
    min_count : int
        :math:`\\delta` of the score: pairs seen at most this often are never
        phrases.
    threshold : float
        :math:`\\tau`: a pair whose score exceeds it is a phrase.
    max_pairs : int, default :data:`~lsdask.config.DEFAULT_PHRASE_MAX_PAIRS`
        The most distinct pairs held; beyond, those seen fewest times are
        dropped (each time one count more than the last time).
    """

    def __init__(
        self, min_count: int, threshold: float, max_pairs: int = DEFAULT_PHRASE_MAX_PAIRS
    ) -> None:
        self.min_count = min_count
        self.threshold = threshold
        self.max_pairs = max_pairs
        self.words: Counter[str] = Counter()
        self.pairs: Counter[str] = Counter()
        self.n_pruned = 0
        self._min_reduce = 1

    def add(self, runs: Iterable[Sequence[str]]) -> None:
        """Count one document given as its runs of adjacent words."""
        for run in runs:
            self.words.update(run)
            self.pairs.update(a + _KEY + b for a, b in pairwise(run))
        if len(self.pairs) > self.max_pairs:
            self._prune()

    def _prune(self) -> None:
        """Drop the pairs seen fewer times than the bound, then raise it, until
        at most ``max_pairs`` are left."""
        while len(self.pairs) > self.max_pairs:
            rare = [key for key, count in self.pairs.items() if count < self._min_reduce]
            for key in rare:
                del self.pairs[key]
            self.n_pruned += len(rare)
            self._min_reduce += 1

    def phrases(self) -> dict[tuple[str, str], float]:
        """The pairs that score above ``threshold``, with their scores."""
        n = len(self.words) + len(self.pairs)
        found: dict[tuple[str, str], float] = {}
        for key, count in self.pairs.items():
            if count <= self.min_count:
                continue
            a, b = key.split(_KEY)
            score = phrase_score(count, self.words[a], self.words[b], n, self.min_count)
            if score > self.threshold:
                found[(a, b)] = score
        return found
