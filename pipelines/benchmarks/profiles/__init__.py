"""Where the time of lsdask's local step goes, reported below a benchmark's table.

- :mod:`profiles.mixture`: one batch's local step of a Gaussian mixture, stage
  by stage, dense vs L-sparse (``bench_mixture.py``);
- :mod:`profiles.lda`: the L-sparse LDA step's parts (restarts, selection,
  exp, digamma), one memoized-VI update's pieces and the cost of ``exp``
  (``bench_lda.py``, below row 1).

These are what the diagnosis of a failing row rests on.
"""
