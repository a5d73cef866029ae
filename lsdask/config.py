"""One place for lsdask's defaults and tunables.

Nothing here is read at import time by the kernels: the Python layers pass
these values in, so tests can override them per call.
"""

from __future__ import annotations

#: Rows of a batch processed at once by a model's local step. Bounds the
#: memory of per-row temporaries (log weights, outer-product features) to
#: ``BLOCK_ROWS * max(K, D * (D + 1) / 2)`` float64 values.
BLOCK_ROWS = 256

#: Default number of rows per memoized batch for in-memory inputs.
DEFAULT_BATCH_SIZE = 10_000

#: Documents per Parquet row group (one memoized batch) and per part file of
#: a corpus written by lsdask.
DEFAULT_DOCS_PER_ROW_GROUP = 1000
DEFAULT_DOCS_PER_FILE = 100_000

#: Vocabulary pruning of text ingestion when no vocabulary is imposed: drop
#: words in fewer than ``DEFAULT_MIN_DF`` documents or in more than a
#: ``DEFAULT_MAX_DF`` share of them (``min_df``/``max_df``, ``--min-df``/``--max-df``).
DEFAULT_MIN_DF = 5
DEFAULT_MAX_DF = 0.5

#: Phrase detection of text ingestion (``phrases=True``, ``--phrases``), as the
#: defaults of gensim's Phrases: a pair of words is joined when seen more than
#: ``DEFAULT_PHRASE_MIN_COUNT`` times and scoring above
#: ``DEFAULT_PHRASE_THRESHOLD``; at most ``DEFAULT_PHRASE_MAX_PAIRS`` distinct
#: pairs are held while counting (about 1 GB), the rarest dropped beyond.
DEFAULT_PHRASE_MIN_COUNT = 5
DEFAULT_PHRASE_THRESHOLD = 10.0
DEFAULT_PHRASE_MAX_PAIRS = 5_000_000

#: Binary files in a folder or archive of text are told by a NUL byte in their
#: first ``BINARY_SNIFF_BYTES`` bytes (or a known magic number) and skipped.
BINARY_SNIFF_BYTES = 8192

#: The zero-mean Gaussian warns when its initialization sample's mean lies
#: farther from 0 than this many times the rows' root-mean-square distance
#: from that mean (data that is not centered, as its model assumes).
ZERO_MEAN_OFFSET_WARNING = 0.5

#: Sparsity levels at or below this use the insertion top-L selection;
#: above it a stable sort is faster.
TOPL_INSERTION_MAX = 32

#: Relative ELBO change between laps below which a run has converged.
DEFAULT_TOL = 1e-6

#: Rows sampled from the data to set data-dependent prior defaults and to
#: choose initial clusters (k-means++ or random examples).
INIT_SAMPLE_ROWS = 10_000

#: Collapsed Gibbs sweeps of LDA's Gibbs start (``init="gibbs"`` or "auto"):
#: the sampled topics' heldout score still rises after several hundred sweeps,
#: and memoized VI keeps what the sampler reached; MALLET's default is also 1,000.
GIBBS_SWEEPS = 1_000

#: Where the prior is learned, the Gibbs start stops before ``GIBBS_SWEEPS`` once
#: its joint log-likelihood per token, averaged over 50 sweeps, rose by less than this
#: (nats) over the 50 sweeps before (``LDA(gibbs_tol=)``). A chain that fits its prior
#: settles within a few hundred sweeps; under a small fixed prior it mixes slowly, and
#: its topics still improve after its likelihood flattens, so there the default makes
#: every sweep. A looser rule (0.01) stopped twice as early and cost memoized VI's
#: final heldout score 0.013 nats/token on AP at K = 100; this one cost 0.004.
GIBBS_TOL_LEARNED = 0.003

#: Where ``LDA(alpha="auto")`` is learned, the Gibbs start samples from this prior per
#: topic (tomotopy's default) and fits it to the sampled documents every 10 sweeps from
#: sweep 20 on, as MALLET's and tomotopy's samplers do (``optim_interval``);
#: ``algorithm="svi-gibbs"`` starts its learned prior there too.
GIBBS_LEARNED_ALPHA_START = 0.1

#: Documents LDA's Gibbs start samples: the whole corpus when it holds at most
#: ``GIBBS_SAMPLE_TOKENS`` tokens (``LDA(gibbs_tokens=)``) and as many documents
#: as ``GIBBS_SAMPLE_DOC_TOPIC_BYTES`` of document-topic counts hold (4 bytes per
#: document and topic), else whole documents drawn at random up to those bounds
#: (from batches read in random order until they hold that many documents).
#: Sampling all documents gives better topics than sampling a part of them,
#: also after memoized VI; on far larger corpora the bounds keep the memory that
#: grows with the sample (16 bytes per token, 4 per document and topic: 256 MiB
#: each at the bounds) and the start's time in check; the word-topic counts and
#: the mean of the chain's recent samples take about 32 bytes per word and topic at the
#: end of the start, whatever the sample.
GIBBS_SAMPLE_TOKENS = 16_000_000
GIBBS_SAMPLE_DOC_TOPIC_BYTES = 256 * 2**20

#: While the Gibbs start runs, its topics so far are scored on the validation
#: documents of early stopping and handed to ``fit``'s callback (as lap 0) about
#: this often (seconds), where there is either.
GIBBS_SNAPSHOT_SECONDS = 30.0

#: Early stopping of topic models (``LDA(early_stopping=)``): the share of the
#: batches held out as validation documents (at least one, see also
#: ``VALIDATION_MAX_DOCS``), the laps without a
#: better validation score after which a fit ends, and the fewest batches on
#: which ``early_stopping="auto"`` holds any out (on fewer, a held-out batch is
#: too large a share of the data).
VALIDATION_FRACTION = 0.02
#: ... and at most as many batches as hold about this many documents: more
#: would not tell laps apart better, and they are scored in the driver.
VALIDATION_MAX_DOCS = 5_000
EARLY_STOPPING_PATIENCE = 3
EARLY_STOPPING_MIN_BATCHES = 20

#: Default SVI learning-rate schedule rho_t = (delay + t) ** (-kappa).
SVI_DELAY = 1.0
SVI_KAPPA = 0.6

#: ``extra=`` of an INFO log record that the command line shows even without
#: ``-v`` (the Dask dashboard's address): ``logger.info(..., extra=NOTICE)``.
NOTICE = {"notice": True}

#: ``extra=`` of an INFO log record that marks a fit's progress (a start phase, a
#: lap): where stderr is not a terminal (a scheduler's log, no progress bar) the
#: command line shows these lines even without ``-v``.
PROGRESS = {"progress": True}

#: How many times in a row the Dask executor sends lost data again and reruns a
#: wave after losing workers before it gives up (each time is logged).
LOST_WORKER_RETRIES = 5

#: Seconds the Dask executor waits for a worker when the cluster has none (after
#: losing its workers, or an external scheduler started without any).
WORKER_WAIT_SECONDS = 120


# -- the HDP's delete and merge moves (lsdask.models.hdp_moves) ---------------------
#: a topic is a delete candidate when at most this many documents use it
HDP_DELETE_MAX_DOCS = 1000
#: delete candidates prepared per lap
HDP_MAX_DELETES = 10
#: the most target documents (of all delete candidates) a lap keeps in the memo
HDP_MAX_TARGET_DOCS = 20000
#: merge pairs prepared per lap
HDP_MAX_MERGE_PAIRS = 20
#: the most documents a lap's delete judgements rerun, as a fraction of the corpus's
HDP_DELETE_WORK = 0.1
#: the least such fraction: after laps whose deletes were all rejected the budget
#: halves down to it (MoveSettings.next_budget)
HDP_DELETE_WORK_FLOOR = 0.01

#: the most bytes an ESVI sub-step's table of word factors may take; a piece
#: whose words need more takes each document's factors on its own instead
#: (the same numbers, so a sub-step never adds a block's worth of memory)
ESVI_WORD_TABLE_BYTES = 128 << 20

#: the longest line an ingest reader takes (a JSON record, a line of a
#: bag-of-words file): longer ones are refused before they are read whole
MAX_LINE_BYTES = 64 << 20

#: SVI-Gibbs (``LDA(algorithm="svi-gibbs")``): documents per minibatch, burn-in
#: and kept Gibbs sweeps per document (Mimno, Hoffman & Blei find 3-5 sweeps
#: enough), and minibatches between checkpoints (one is also written at the end
#: of every epoch and when a fit is stopped).
SVI_GIBBS_MINIBATCH = 100
SVI_GIBBS_BURNIN = 3
SVI_GIBBS_SAMPLES = 2
#: how svi-gibbs's kept sweeps make N-hat (lsdask.models.sparse_topics.ESTIMATORS)
SVI_GIBBS_ESTIMATOR = "rao-blackwell"
#: what svi-gibbs samples documents against (lsdask.models.sparse_topics.WEIGHTS)
SVI_GIBBS_WEIGHTS = "mean"
#: svi-gibbs drops the topic-word entries that decayed below this times eta
#: (lsdask.models.sparse_topics.SparseTopics.prune): a word whose count in a
#: topic is under a third of the prior's pseudo-count is one the topic knows
#: little of beyond the prior
SVI_GIBBS_PRUNE = 0.3
SVI_GIBBS_CHECKPOINT_EVERY = 50

#: Bytes of corpus row groups a process keeps read for minibatches drawn
#: across row groups (:mod:`lsdask.io.doc_stream`).
STREAM_CACHE_BYTES = 512 * 2**20
