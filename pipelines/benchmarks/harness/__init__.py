"""What the benchmarks of ``pipelines/benchmarks/`` share, written once.

Every ``bench_*.py`` of the folder is a short script on these modules (run
from anywhere: the script's own folder is on ``sys.path``, so ``harness``
imports as a package):

- :mod:`harness.run`: one run of a benchmark: its common options, its record
  (command, start, machine, load average, wall time per step) and its outputs
  (``results/<stem>.md``, ``results/<stem>.json``, a partial JSON meanwhile);
- :mod:`harness.machine`: the machine and the code measured (cores, memory,
  thread pools from ``threadpoolctl``, package versions, git commit, load);
- :mod:`harness.timing`: interleaved repetitions and their medians, wall and
  CPU clocks, lap times from an estimator's traces;
- :mod:`harness.memory`: peak and current resident memory of a process;
- :mod:`harness.cluster`: the LocalCluster lsdask starts itself, and a
  measurement in a fresh process (one JSON line back, a memory guard);
- :mod:`harness.budget`: the clock of a training run under a wall-clock
  budget, with topic snapshots, for lsdask and for the peers;
- :mod:`harness.priors`: the LDA priors every topic-model comparison uses;
- :mod:`harness.corpora`: the AP and 20 Newsgroups corpora and their heldout
  split (80/20 document completion);
- :mod:`harness.patches`: the BSDS500 patch stores of the mixture benchmark;
- :mod:`harness.synthetic`: cached synthetic corpora and patch stores;
- :mod:`harness.peers`: gensim, scikit-learn and tomotopy with their exact
  settings;
- :mod:`harness.scoring`: the heldout score of topics, snapshots scored on the
  Dask workers, the quality threshold and the time to reach it;
- :mod:`harness.report`: Markdown tables, the report's header, JSON;
- :mod:`harness.plots`: heldout score against training seconds.
"""

from pathlib import Path

#: the repository's root
REPO = Path(__file__).resolve().parents[3]
#: where the reports go by default
RESULTS_DIR = Path(__file__).resolve().parents[1] / "results"
#: the shared data folder beside the repository (AP, 20 Newsgroups, BSDS500)
SHARED_DATA = REPO.parent / "shared" / "data"
