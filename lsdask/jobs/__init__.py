"""Jobs: what the ``lsdask`` commands and the pipelines run, as importable functions.

- :mod:`lsdask.jobs.cluster`: one Dask client shared by several fits;
- :mod:`lsdask.jobs.patch_gmm`: image patches -> L-sparse vs dense Gaussian mixture;
- :mod:`lsdask.jobs.bars_lda`: LDA on the synthetic bars corpus, with a picture;
- :mod:`lsdask.jobs.demo`: both of the above on one client (``lsdask demo``);
- :mod:`lsdask.jobs.corpus_lda`: LDA on a Parquet corpus: fit, save, topics, transform;
- :mod:`lsdask.jobs.ingest`: raw text and bag-of-words files -> Parquet corpus.

Jobs log with :mod:`logging` and return dicts; only :mod:`lsdask.cli` and the
pipelines print.
"""
