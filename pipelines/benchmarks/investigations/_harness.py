"""Puts ``pipelines/benchmarks`` on ``sys.path``, so that the investigations
(run as scripts from this folder) import ``harness`` like the benchmarks do."""

import sys
from pathlib import Path

BENCHMARKS = str(Path(__file__).resolve().parents[1])
if BENCHMARKS not in sys.path:
    sys.path.insert(0, BENCHMARKS)
