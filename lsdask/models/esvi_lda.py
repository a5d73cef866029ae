"""ESVI for LDA: the topic-word parameters cut into vocabulary blocks (esvi paper, App. C).

The parameters ``lambda`` (K x V) are cut into P *blocks* of words; a block
holds ``lambda[v, k]`` for its words only (:class:`ParamBlock`, word-major).
Each worker owns a *shard* of documents (:class:`ESVIShard`): the documents'
topic counts ``n_d`` (so ``q(pi_d) = Dir(alpha + n_d)``) and, per block, the
documents' entries in that block's words with their kept responsibilities
(:class:`ShardPiece`). Only the K topic totals ``pi_k = sum_v lambda_kv`` are
shared by all.

A *sub-step* updates every entry of one shard in one block
(:func:`lsdask.kernels.esvi.esvi_block_update`) against a snapshot of ``n_d``,
of the block and of ``pi``, and writes the new ``n_d`` and block in place: no
copy of the block is made; beside it a sub-step holds the word factors
``exp(psi(lambda_v))`` of the words the shard uses in the block (at most the
block's size, in its element type). Since
``q(pi_d)`` and ``q(phi)`` stay at their optimum given the responsibilities
(``lambda = eta + S``, ``gamma_d = alpha + n_d``), the ELBO is

    sum_d [log B(alpha + n_d) - log B(alpha)]                    (per shard)
  + sum_k [sum_v log Gamma(lambda_kv) - log Gamma(pi_k)] - K log B(eta 1_V)  (per block, then pi)
  + sum c H(phi)                                                 (per shard and block)

with ``log B(a) = sum log Gamma(a_k) - log Gamma(sum a_k)``: every piece is a
partial sum held where its data are, and no process needs the whole of lambda.
An update over every entry of a shard in a block is exact block coordinate
ascent (Theorem 1 over the whole simplex), so with ``C = K`` or the L-sparse
rule the ELBO never decreases from one sub-step to the next.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.special import digamma, gammaln

from lsdask import config
from lsdask.kernels.esvi import (
    block_word_exps,
    esvi_accumulate,
    esvi_block_update,
    esvi_doc_counts,
)

#: the TOPK rules: the L-sparse rule drops the left-over mass, the paper's spreads it
TOPK_RULES = ("lsparse", "paper")
#: the element types a block may be stored in
BLOCK_DTYPES = ("float64", "float32")
#: bytes of float64 temporaries per chunk of a block's rows (sums, first responsibilities)
_CHUNK_BYTES = 1 << 25


@dataclass(frozen=True)
class VocabPartition:
    """Words cut into P blocks of nearly equal token mass and equal size.

    Word frequencies are Zipfian, so V / P consecutive ids would not balance
    the work. Words are taken in order of decreasing mass (ties: lower id
    first), each into the block of least mass so far among those with room
    (``ceil(V / P)`` words each, so the blocks' bytes stay within one word of
    even); ties go to the lower block.
    """

    block_of: np.ndarray  # (V,) int32
    local: np.ndarray  # (V,) int32, the word's row in its block
    words: tuple[np.ndarray, ...]  # per block, its global word ids (increasing)
    mass: np.ndarray  # (P,) tokens per block

    @classmethod
    def balanced(cls, mass: np.ndarray, n_blocks: int) -> VocabPartition:
        mass = np.asarray(mass, dtype=np.float64)
        V = mass.shape[0]
        room = -(-V // n_blocks)
        order = np.lexsort((np.arange(V), -mass))
        load = np.zeros(n_blocks)
        size = np.zeros(n_blocks, dtype=np.int64)
        block_of = np.empty(V, dtype=np.int32)
        full = np.zeros(n_blocks, dtype=bool)
        for v in order:
            b = int(np.argmin(np.where(full, np.inf, load)))
            block_of[v] = b
            load[b] += mass[v]
            size[b] += 1
            full[b] = size[b] >= room
        words = tuple(np.flatnonzero(block_of == b) for b in range(n_blocks))
        local = np.empty(V, dtype=np.int32)
        for w in words:
            local[w] = np.arange(w.size, dtype=np.int32)
        return cls(block_of, local, words, load)

    @property
    def n_blocks(self) -> int:
        return len(self.words)


@dataclass(frozen=True, eq=False)
class ShardPiece:
    """A shard's entries in one block's words, with their responsibilities."""

    indptr: np.ndarray  # (n_docs + 1,) int64
    cols: np.ndarray  # (nnz,) int32, block-local words
    counts: np.ndarray  # (nnz,) float64
    resp: np.ndarray  # (nnz, C) float64
    idx: np.ndarray  # (nnz, C) int32
    rest: np.ndarray  # (nnz,) float64
    H: float  # sum c H(phi) of the entries

    @property
    def nbytes(self) -> int:
        arrays = (self.indptr, self.cols, self.counts, self.resp, self.idx, self.rest)
        return int(sum(a.nbytes for a in arrays))


@dataclass(frozen=True, eq=False)
class ESVIShard:
    """One worker's documents and their local variables (never moves)."""

    part: int
    doc_topic: np.ndarray  # (n_docs, K) n_d
    pieces: tuple[ShardPiece, ...]  # one per block
    alloc: float  # sum_d log B(alpha + n_d) - log B(alpha)
    n_tokens: float

    @property
    def n_docs(self) -> int:
        return int(self.doc_topic.shape[0])

    @property
    def H(self) -> float:
        return float(sum(p.H for p in self.pieces))


@dataclass(frozen=True, eq=False)
class ParamBlock:
    """One vocabulary block of the topic-word parameters, ``lambda[v, k]`` for its words."""

    index: int
    words: np.ndarray  # (V_b,) global word ids
    lam: np.ndarray  # (V_b, K) float64, or float32 (ESVILDA.block_dtype)
    start: np.ndarray | None = None  # (V_b, K) start counts within lam, first rotation only

    @property
    def nbytes(self) -> int:
        extra = 0 if self.start is None else self.start.nbytes
        return int(self.lam.nbytes + self.words.nbytes + extra)


@dataclass(frozen=True)
class PartReport:
    """The small sums a sub-step sends to the driver (K floats and a few scalars)."""

    part: int
    block: int
    colsum: np.ndarray  # (K,) sum_v lambda_kv over the block's words
    lgamma: float  # sum_{v in block, k} log Gamma(lambda_vk)
    alloc: float  # the shard's allocation term
    H: float  # the shard's entropy
    n_tokens: float
    block_nbytes: int = 0
    shard_nbytes: int = 0
    passes: int = 0  # passes over documents' entries in the sub-step (documents x passes)


@dataclass(frozen=True)
class ESVILDA:
    """The math of ESVI for LDA: pure functions of shards, blocks and totals.

    Parameters
    ----------
    n_topics, vocab_size : K and V
    alpha : (K,) document-topic prior (alpha_k, i.e. alpha / K for a symmetric one)
    eta : topic-word prior
    topk : C, responsibilities kept per entry (1..K)
    rule : ``"lsparse"`` (drop the rest) or ``"paper"`` (spread it over the other topics)
    seed : seeds the random first responsibilities, per shard
    local_iters : passes over each document's entries per sub-step at most, ``n_d``
        written after each (1: every update reads the sub-step's snapshot, the paper's
        Alg. 5)
    warm : start from topics (:meth:`seed_block`) instead of random responsibilities:
        every entry starts with none, and the first rotation gives each its first
        responsibilities against the start's topics, which leave the blocks after it
        (:meth:`drop_start`)
    block_dtype : ``"float64"`` or ``"float32"``, the element type of the blocks
        (float32 halves the bytes a worker holds and moves; the updates and every
        sum are still computed in float64)
    local_tol : a document stops its passes of a sub-step once one moves none of its
        topic counts by ``local_tol`` or more (0: always ``local_iters`` passes)
    word_table_bytes : the most bytes a sub-step's table of word factors may take;
        beyond it each document's factors are taken on their own (the same numbers)
    """

    n_topics: int
    vocab_size: int
    alpha: np.ndarray = field(repr=False)
    eta: float
    topk: int
    rule: str = "lsparse"
    seed: int = 0
    local_iters: int = 1
    warm: bool = False
    block_dtype: str = "float64"
    local_tol: float = 0.0
    word_table_bytes: int = config.ESVI_WORD_TABLE_BYTES

    # ---- before the rotations
    def word_mass(self, loaders: list[Any], shared: Any = None) -> np.ndarray:
        """Tokens per word in the shard's documents, (V,)."""
        mass = np.zeros(self.vocab_size)
        for loader in loaders:
            X = sp.csr_matrix(loader.load())
            np.add.at(mass, X.indices, X.data)
        return mass

    def init_shard(
        self, loaders: list[Any], part: int, partition: VocabPartition
    ) -> tuple[Any, ...]:
        """The shard of ``part`` from its batches with random first responsibilities,
        and, per block, its statistics ``(words, S)`` over the block words it uses
        (S sparse, a CSR matrix, when every entry keeps C < K topics and nothing is
        spread: it then holds at most C values per entry, not K per word)."""
        rows = [sp.csr_matrix(loader.load(), dtype=np.float64) for loader in loaders]
        X = sp.vstack(rows, format="csr") if rows else sp.csr_matrix((0, self.vocab_size))
        X.sum_duplicates()
        K = self.n_topics
        rng = np.random.default_rng([self.seed, part])
        doc_topic = np.zeros((X.shape[0], K))
        pieces, stats = [], []
        block_of = partition.block_of[X.indices]
        rows_of = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
        for b in range(partition.n_blocks):
            sel = block_of == b
            per_doc = np.bincount(rows_of[sel], minlength=X.shape[0])
            indptr = np.concatenate([[0], np.cumsum(per_doc)]).astype(np.int64)
            cols = partition.local[X.indices[sel]].astype(np.int32)
            counts = np.ascontiguousarray(X.data[sel], dtype=np.float64)
            if self.warm:  # no responsibilities yet: the first rotation gives them
                resp, idx, rest = self._no_resp(cols.size)
            else:
                resp, idx, rest = self._random_resp(rng, cols.size)
            used, compact = np.unique(cols, return_inverse=True)
            if self.topk < K and not rest.any():
                H = esvi_doc_counts(indptr, counts, resp, idx, rest, doc_topic)
                S = sp.csr_matrix(
                    ((counts[:, None] * resp).ravel(),
                     (np.repeat(compact, self.topk), idx.ravel())),
                    shape=(used.size, K),
                )  # fmt: skip
            else:
                S = np.zeros((used.size, K))
                H = esvi_accumulate(indptr, compact.astype(np.int32), counts, resp, idx, rest,
                                    doc_topic, S)  # fmt: skip
            pieces.append(ShardPiece(indptr, cols, counts, resp, idx, rest, float(H)))
            stats.append((used.astype(np.int32), S))
        shard = ESVIShard(part, doc_topic, tuple(pieces), self.alloc(doc_topic), float(X.sum()))
        return (shard, *stats)

    def _no_resp(self, nnz: int) -> tuple[np.ndarray, ...]:
        """Entries that hold no mass yet (a warm start): zero responsibilities on
        the topics ``0..C-1`` (which topics does not matter while they hold none),
        with no random draw of ``nnz x K`` weights to be thrown away."""
        C = self.topk
        idx = np.broadcast_to(np.arange(C, dtype=np.int32), (nnz, C)).copy()
        return np.zeros((nnz, C)), idx, np.zeros(nnz)

    def _random_resp(self, rng: np.random.Generator, nnz: int) -> tuple[np.ndarray, ...]:
        """First responsibilities: uniform random weights, then the TOPK rule. The
        weights are drawn a chunk of entries at a time (the same stream as one
        draw), so no (nnz, K) array is made when C < K."""
        K, C = self.n_topics, self.topk
        if C == K:
            w = rng.random((nnz, K))
            idx = np.broadcast_to(np.arange(K, dtype=np.int32), (nnz, K)).copy()
            return w / w.sum(axis=1, keepdims=True), idx, np.zeros(nnz)
        resp = np.empty((nnz, C))
        idx = np.empty((nnz, C), dtype=np.int32)
        rest = np.zeros(nnz)
        step = max(1, _CHUNK_BYTES // (8 * K))
        for lo in range(0, nnz, step):
            w = rng.random((min(step, nnz - lo), K))
            top = np.argpartition(-w, C - 1, axis=1)[:, :C]
            top_w = np.take_along_axis(w, top, axis=1)
            rank = np.lexsort((top, -top_w), axis=-1)  # descending weight, ties: lower topic
            top = np.take_along_axis(top, rank, axis=1)
            kept = np.take_along_axis(w, top, axis=1)
            hi = lo + w.shape[0]
            idx[lo:hi] = top
            if self.rule == "paper":
                resp[lo:hi] = kept / w.sum(axis=1, keepdims=True)
                rest[lo:hi] = np.maximum(1.0 - resp[lo:hi].sum(axis=1), 0.0)
            else:
                resp[lo:hi] = kept / kept.sum(axis=1, keepdims=True)
        return resp, idx, rest

    def make_block(
        self, index: int, partition: VocabPartition, *stats: tuple[np.ndarray, Any]
    ) -> tuple[ParamBlock, PartReport]:
        """Block ``index``: ``lambda = eta + sum_p S_p`` over its words, from every
        shard's statistics in part order."""
        words = partition.words[index]
        lam = np.full((words.size, self.n_topics), self.eta, dtype=self.block_dtype)
        for used, S in stats:
            if sp.issparse(S):
                coo = S.tocoo()  # one value per (word, topic): duplicates were summed
                lam[used[coo.row], coo.col] += coo.data
            else:
                lam[used] += S
        block = ParamBlock(index, words, lam)
        return block, self._block_report(block, -1, 0.0, 0.0, 0.0, 0)

    def seed_block(self, block: ParamBlock, counts: np.ndarray) -> tuple[ParamBlock, PartReport]:
        """The block with the start's topic-word counts (V_b, K) added (in place),
        kept apart."""
        counts = np.ascontiguousarray(counts, dtype=np.float64)
        lam = _writable(block.lam)
        lam += counts
        seeded = ParamBlock(block.index, block.words, lam, counts)
        return seeded, self._block_report(seeded, -1, 0.0, 0.0, 0.0, 0)

    def drop_start(self, block: ParamBlock) -> tuple[ParamBlock, PartReport]:
        """The block without the start's counts (in place), once every shard has met it."""
        lam = block.lam
        if block.start is not None:
            lam = _writable(lam)
            lam -= block.start
        dropped = ParamBlock(block.index, block.words, lam)
        return dropped, self._block_report(dropped, -1, 0.0, 0.0, 0.0, 0)

    # ---- evaluation without gathering the model
    def block_columns(
        self, block: ParamBlock, words: np.ndarray, pi: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """``E[phi_kv] = lambda_kv / pi_k`` of those of ``words`` (sorted global ids)
        in the block: ``(positions in words, (K, n) columns)``."""
        found, lam = _block_rows(block, words)
        return found, lam.T / pi[:, None]

    def block_log_rows(
        self, block: ParamBlock, words: np.ndarray, pi: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """``E[log phi_kv] = psi(lambda_kv) - psi(pi_k)`` of those of ``words`` (sorted
        global ids) in the block: ``(positions in words, (n, K) rows)``, the rows a
        local step reads (:class:`lsdask.models.dirichlet_logs.SparseDirichletLogs`)."""
        found, lam = _block_rows(block, words)
        return found, digamma(lam) - digamma(pi)

    # ---- checkpoints: shards and blocks as arrays and back
    def shard_state(self, shard: ESVIShard) -> dict[str, np.ndarray]:
        """A shard as named arrays (:meth:`shard_from_state` reads them back)."""
        out = {
            "part": np.array(shard.part), "doc_topic": shard.doc_topic,
            "alloc": np.array(shard.alloc), "n_tokens": np.array(shard.n_tokens),
        }  # fmt: skip
        for b, piece in enumerate(shard.pieces):
            for name in ("indptr", "cols", "counts", "resp", "idx", "rest"):
                out[f"{b}_{name}"] = getattr(piece, name)
            out[f"{b}_H"] = np.array(piece.H)
        return out

    def shard_from_state(self, state: dict[str, np.ndarray]) -> ESVIShard:
        n_blocks = sum(1 for k in state if k.endswith("_indptr"))
        pieces = tuple(
            ShardPiece(
                indptr=state[f"{b}_indptr"], cols=state[f"{b}_cols"], counts=state[f"{b}_counts"],
                resp=state[f"{b}_resp"], idx=state[f"{b}_idx"], rest=state[f"{b}_rest"],
                H=float(state[f"{b}_H"]),
            )
            for b in range(n_blocks)
        )  # fmt: skip
        return ESVIShard(int(state["part"]), state["doc_topic"], pieces, float(state["alloc"]),
                         float(state["n_tokens"]))  # fmt: skip

    def partition_state(self, partition: VocabPartition) -> dict[str, np.ndarray]:
        return {"block_of": partition.block_of, "mass": partition.mass}

    def partition_from_state(self, state: dict[str, np.ndarray]) -> VocabPartition:
        block_of = state["block_of"].astype(np.int32)
        words = tuple(np.flatnonzero(block_of == b) for b in range(state["mass"].size))
        local = np.empty(block_of.size, dtype=np.int32)
        for w in words:
            local[w] = np.arange(w.size, dtype=np.int32)
        return VocabPartition(block_of, local, words, state["mass"])

    def block_state(self, block: ParamBlock) -> dict[str, np.ndarray]:
        return {"index": np.array(block.index), "words": block.words, "lam": block.lam}

    def block_from_state(self, state: dict[str, np.ndarray]) -> ParamBlock:
        return ParamBlock(int(state["index"]), state["words"], state["lam"])

    # ---- a sub-step
    def substep(
        self, shard: ESVIShard, block: ParamBlock, pi: np.ndarray
    ) -> tuple[ESVIShard, ParamBlock, PartReport]:
        """Update the shard's entries in the block's words against the snapshot
        ``(n_d, lambda_block, pi)``; the new shard, the new block and their sums.

        The shard's ``n_d`` and the block are updated in place (the given shard
        and block are spent): a sub-step holds its block once, with the piece's
        new responsibilities and the word factors beside it (at most
        ``word_table_bytes``, or one document's)."""
        piece = shard.pieces[block.index]
        new_resp = np.empty_like(piece.resp)
        new_idx = np.empty_like(piece.idx)
        new_rest = np.empty_like(piece.rest)
        doc_topic = _writable(shard.doc_topic)
        lam = _writable(block.lam)
        used, compact = np.unique(piece.cols, return_inverse=True)
        if used.size * self.n_topics * lam.dtype.itemsize > self.word_table_bytes:
            used = used[:0]  # factors per document, within the kernel
        word_exps = np.empty((used.size, self.n_topics), dtype=lam.dtype)
        block_word_exps(lam, used, word_exps)
        H, passes = esvi_block_update(
            piece.indptr, piece.cols, piece.counts, piece.resp, piece.idx, piece.rest,
            compact.astype(np.int64), word_exps, doc_topic, self.alpha, lam, digamma(pi),
            self.rule == "paper", self.local_iters, self.local_tol, new_resp, new_idx, new_rest,
        )  # fmt: skip
        del word_exps
        new_piece = replace(piece, resp=new_resp, idx=new_idx, rest=new_rest, H=float(H))
        pieces = list(shard.pieces)
        pieces[block.index] = new_piece
        new_shard = ESVIShard(shard.part, doc_topic, tuple(pieces), self.alloc(doc_topic),
                              shard.n_tokens)  # fmt: skip
        new_block = ParamBlock(block.index, block.words, lam, block.start)
        report = self._block_report(
            new_block, shard.part, new_shard.alloc, new_shard.H, shard.n_tokens,
            shard_nbytes(new_shard), int(passes),
        )  # fmt: skip
        return new_shard, new_block, report

    def _block_report(
        self, block: ParamBlock, part: int, alloc: float, H: float, n_tokens: float, nbytes: int,
        passes: int = 0,
    ) -> PartReport:  # fmt: skip
        colsum, lgamma = block_sums(block.lam)
        return PartReport(
            part, block.index, colsum, lgamma, alloc, H, n_tokens, block.nbytes, nbytes, passes
        )  # fmt: skip

    # ---- the objective from partial sums
    def alloc(self, doc_topic: np.ndarray) -> float:
        """``sum_d log B(alpha + n_d) - log B(alpha)`` over a shard's documents."""
        a = self.alpha
        if doc_topic.shape[0] == 0:
            return 0.0
        per_doc = gammaln(a + doc_topic).sum(axis=1) - gammaln(a.sum() + doc_topic.sum(axis=1))
        return float(per_doc.sum() - doc_topic.shape[0] * (gammaln(a).sum() - gammaln(a.sum())))

    def elbo(self, shards: list[PartReport], blocks: list[PartReport], pi: np.ndarray) -> float:
        """The ELBO from every shard's and block's sums and the totals ``pi``."""
        V, eta = self.vocab_size, self.eta
        prior = self.n_topics * (V * gammaln(eta) - gammaln(V * eta))
        topics = sum(r.lgamma for r in blocks) - float(gammaln(pi).sum()) - prior
        return float(sum(r.alloc for r in shards) + sum(r.H for r in shards) + topics)


def shard_nbytes(shard: ESVIShard) -> int:
    """Bytes of a shard's arrays."""
    return int(shard.doc_topic.nbytes + sum(p.nbytes for p in shard.pieces))


def _block_rows(block: ParamBlock, words: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(positions in words, lambda rows (n, K) in float64)`` of those of ``words``
    (sorted global ids) in the block."""
    at = np.searchsorted(block.words, words)
    inside = (at < block.words.size) & (block.words[np.minimum(at, block.words.size - 1)] == words)
    return np.flatnonzero(inside), np.asarray(block.lam[at[inside]], dtype=np.float64)


def _writable(a: np.ndarray) -> np.ndarray:
    """``a`` itself when it can be written in place, else a copy (a read-only buffer)."""
    return a if a.flags.writeable else a.copy()


def block_sums(lam: np.ndarray) -> tuple[np.ndarray, float]:
    """``(sum_v lambda_vk, sum_vk log Gamma(lambda_vk))`` of a block, in float64, a
    chunk of rows at a time (no temporary of the block's size)."""
    n, K = lam.shape
    colsum = np.zeros(K)
    lgamma = 0.0
    step = max(1, _CHUNK_BYTES // (8 * max(K, 1)))
    for lo in range(0, n, step):
        chunk = np.asarray(lam[lo : lo + step], dtype=np.float64)
        colsum += chunk.sum(axis=0)
        lgamma += float(gammaln(chunk).sum())
    return colsum, lgamma


def gather_topics(blocks: list[ParamBlock], vocab_size: int) -> np.ndarray:
    """``lambda`` (K, V) from every block: only when the whole model is asked for."""
    K = blocks[0].lam.shape[1]
    lam = np.empty((K, vocab_size))
    for block in blocks:
        lam[:, block.words] = block.lam.T
    return lam
