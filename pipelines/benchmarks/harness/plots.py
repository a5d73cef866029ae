"""Plots: heldout score against training seconds, one line per run (lsparse Fig. 2, 4)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

#: colour and marker of each run's line; other labels get matplotlib's next colour
STYLE = {
    "lsdask L=1": ("tab:red", "v"),
    "lsdask L=4": ("tab:orange", "s"),
    "lsdask L=8": ("tab:blue", "o"),
    "lsdask L=K": ("black", "D"),
    "lsdask L=8+kmeans++": ("tab:cyan", "P"),
    "gensim": ("tab:green", "^"),
    "sklearn": ("tab:purple", "x"),
    "tomotopy": ("tab:brown", "+"),
}


def plot_time_to_quality(conf: dict[str, Any], path: Path) -> None:
    """One PNG of a (corpus, K) group of runs: each run's scored snapshots (log x
    axis), the quality threshold, the y range from the best score down to 1 nat
    below it. ``conf`` holds ``runs`` (with ``label`` and scored ``points``),
    ``corpus``, ``K``, ``best`` and ``threshold``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    for r in conf["runs"]:
        pts = [p for p in r["points"] if "score" in p]
        if not pts:
            continue
        color, marker = STYLE.get(r["label"], (None, "."))
        ax.plot(
            [max(p["t"], 1e-2) for p in pts],
            [p["score"] for p in pts],
            marker=marker,
            color=color,
            label=r["label"],
            ms=4,
            lw=1.2,
        )
    if conf.get("threshold") is not None:
        ax.axhline(
            conf["threshold"],
            color="gray",
            ls="--",
            lw=0.8,
            label=f"best - {conf['best'] - conf['threshold']:.2f}",
        )
    ax.set_xscale("log")
    ax.set_xlabel("training wall seconds (scoring excluded)")
    ax.set_ylabel("heldout log-lik. per token (doc. completion)")
    ax.set_title(f"{conf['corpus']}, K={conf['K']}")
    scores = [p["score"] for r in conf["runs"] for p in r["points"] if "score" in p]
    if scores and conf.get("best") is not None:
        lo = max(min(scores), conf["best"] - 1.0)
        ax.set_ylim(lo - 0.02, conf["best"] + 0.05)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
