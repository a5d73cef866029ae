"""``lsdask demo``: the patch GMM and the bars LDA on one Dask client, no download.

:func:`run_full_demo` starts (or connects to) one cluster with
:func:`lsdask.jobs.cluster.on_shared_client` and runs both jobs on it:
:func:`lsdask.jobs.patch_gmm.run_demo` (L-sparse vs dense Gaussian mixture
of 8x8 patches of a sample photograph) and
:func:`lsdask.jobs.bars_lda.run_bars_demo` (L-sparse LDA on the synthetic
bars corpus). :func:`format_demo_report` prints both reports.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from lsdask.estimators.gaussian import GaussianMixture
from lsdask.estimators.hdp import HDP
from lsdask.estimators.lda import LDA
from lsdask.jobs.bars_lda import BarsReport, format_bars_report, run_bars_demo
from lsdask.jobs.cluster import on_shared_client
from lsdask.jobs.patch_gmm import PatchFitReport, format_report, run_demo

__all__ = ["DemoReport", "format_demo_report", "run_full_demo"]

PATCH_TITLE = (
    "[1/3] zero-mean Gaussian mixture of 8x8 patches of a photograph (matplotlib's sample) "
    "(Hughes & Sudderth, Sec. 4)"
)
BARS_TITLE = "[2/3] LDA on the synthetic bars corpus (Griffiths & Steyvers 2004)"
HDP_TITLE = (
    "[3/3] HDP on the same bars: the number of topics learned by delete and merge moves "
    "(Hughes, Kim & Sudderth 2015)"
)


@dataclass
class DemoReport:
    """Both jobs' reports, and the ``seconds`` of both (cluster start included)."""

    patch_gmm: PatchFitReport
    bars_lda: BarsReport
    seconds: float
    bars_hdp: BarsReport | None = None


def run_full_demo(
    gmm: GaussianMixture,
    lda: LDA,
    out_dir: str | os.PathLike[str] = "lsdask-demo",
    *,
    random_state: int = 0,
    hdp: HDP | None = None,
) -> DemoReport:
    """Run both demo jobs on one Dask client: ``gmm``'s (its ``client`` and
    ``n_workers``), which ``lda`` shares for the time of the demo.

    Parameters
    ----------
    gmm : lsdask.GaussianMixture
        The patch GMM (:func:`lsdask.jobs.patch_gmm.run_demo`).
    lda : lsdask.LDA
        The bars LDA (:func:`lsdask.jobs.bars_lda.bars_lda`).
    out_dir : str or os.PathLike, default "lsdask-demo"
        ``patches/``, ``elbo.png`` and ``clusters.png`` of the patch GMM and
        ``topics.png`` of the bars LDA.
    random_state : int, default 0
        Seed of the patch split and of the bars corpus.
    hdp : lsdask.HDP or None
        The bars HDP (:func:`lsdask.jobs.bars_lda.bars_hdp`), run last on the same
        corpus and client (``hdp_topics.png``, ``hdp_k_elbo.png``); None: not run.

    Returns
    -------
    DemoReport
    """
    start = time.perf_counter()
    out = Path(out_dir)
    shared = (gmm, lda) if hdp is None else (gmm, lda, hdp)
    with on_shared_client(*shared):
        patches = run_demo(gmm, out, random_state=random_state)
        bars = run_bars_demo(lda, out, random_state=random_state)
        learned_k = None if hdp is None else run_bars_demo(hdp, out, random_state=random_state)
    return DemoReport(patches, bars, time.perf_counter() - start, learned_k)


def format_demo_report(report: DemoReport) -> str:
    """Both reports of :func:`run_full_demo`, separated by a blank line."""
    return "\n\n".join(
        [
            format_report(report.patch_gmm, title=PATCH_TITLE),
            format_bars_report(report.bars_lda, title=BARS_TITLE),
            *(
                [format_bars_report(report.bars_hdp, title=HDP_TITLE)]
                if report.bars_hdp is not None
                else []
            ),
        ]
    )
