"""The ``lsdask`` command line: argument parsing and dispatch to :mod:`lsdask.jobs`.

Subcommands::

    lsdask demo [--out DIR] [--components K] [--sparsity L] [--laps N] [--workers N | --sync]
    lsdask patches IMAGE_DIR... --out DIR [--patch-size ...] [--stride ...] ...
    lsdask fit-gmm ZARR_PATH --components K [--sparsity L] [--heldout ZARR_PATH] ...
    lsdask ingest {text,jsonl,table,ldac,uci} INPUT... --out DIR [--min-df ...] ...
    lsdask fit CORPUS --topics K --out MODEL_DIR [--sparsity L | --dense] ...
    lsdask topics MODEL_DIR [--top 10] [--corpus CORPUS]
    lsdask transform MODEL_DIR CORPUS --out weights.parquet

``demo`` needs no download and no data files: it fits an L-sparse and a dense
Gaussian mixture to 8x8 patches of the two halves of a photograph shipped
with matplotlib, then LDA to the synthetic "bars" corpus, on one local Dask
cluster, and reports heldout scores and pictures.

Each command's module adds its parser and runs it: the options of a model
come from the estimator's parameter table (:mod:`lsdask.cli.params`); the
command builds the estimator, calls one job (:mod:`lsdask.jobs`, which does
the work and never prints) and prints its report. :mod:`lsdask.cli.app`
runs a command and reports bad input as one line ``lsdask: error:
<message>`` on stderr with exit status 2.
"""

from lsdask.cli.app import main
from lsdask.cli.parser import build_parser

__all__ = ["build_parser", "main"]
