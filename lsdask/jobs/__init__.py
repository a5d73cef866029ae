"""Jobs: what the ``lsdask`` commands and the pipelines run, as importable functions.

A job takes a configured estimator (its parameters say how to fit, and where:
``client``, ``n_workers``) and the job's own inputs, and returns a dataclass
report; ``format_*`` functions turn reports into text.

- :mod:`lsdask.jobs.cluster`: one Dask client shared by several fits;
- :mod:`lsdask.jobs.patches`: images cut into train/heldout Zarr arrays of patches;
- :mod:`lsdask.jobs.patch_gmm`: image patches -> L-sparse vs dense Gaussian mixture;
- :mod:`lsdask.jobs.bars_lda`: LDA on the synthetic bars corpus, with a picture;
- :mod:`lsdask.jobs.demo`: both of the above on one client (``lsdask demo``);
- :mod:`lsdask.jobs.corpus_lda`: LDA on a Parquet corpus: fit, score, save;
- :mod:`lsdask.jobs.topics`, :mod:`lsdask.jobs.transform`, :mod:`lsdask.jobs.split`:
  a saved model's topics, its document-topic weights in Parquet, a corpus
  split into train and heldout documents;
- :mod:`lsdask.jobs.ingest`: raw text and bag-of-words files -> Parquet corpus.

Jobs log with :mod:`logging`; only :mod:`lsdask.cli` and the pipelines print.
"""
