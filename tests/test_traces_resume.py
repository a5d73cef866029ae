"""The traces a fit's pictures are drawn from span the whole fit across resumes."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from lsdask.cli import main
from lsdask.io.corpus import Corpus
from lsdask.jobs.corpus_lda import CHECKPOINT_HELDOUT_FILE, HELDOUT_TRACE_FILE
from lsdask.persist import load_lda
from lsdask.synthetic import make_bars_corpus

PIXELS = [f"px{i}" for i in range(25)]


@pytest.fixture(scope="module")
def corpora(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The bars corpus: 200 train documents (4 row groups), two heldout corpora."""
    root = tmp_path_factory.mktemp("bars")
    X, _ = make_bars_corpus(n_docs=280, doc_topic_prior=0.1, random_state=2)
    Corpus.write(root / "train", X[:200], PIXELS, docs_per_row_group=50)
    Corpus.write(root / "heldout", X[200:240], PIXELS, docs_per_row_group=20)
    Corpus.write(root / "other", X[240:], PIXELS, docs_per_row_group=20)
    return {"train": root / "train", "heldout": root / "heldout", "other": root / "other"}


def _fit(corpora: dict[str, Path], out: Path, *extra: str, heldout: str = "heldout") -> None:
    argv = [
        "fit", str(corpora["train"]), "--topics", "6", "--sparsity", "3", "--alpha", "1",
        "--laps", "2", "--heldout", str(corpora[heldout]), "--out", str(out), "--sync",
        "--no-early-stopping", *extra,
    ]  # fmt: skip
    assert main(argv) == 0


def _heldout_trace(model_dir: Path) -> dict[str, Any]:
    return json.loads((model_dir / HELDOUT_TRACE_FILE).read_text())


def test_a_resumed_fits_traces_span_every_lap(corpora: dict[str, Path], tmp_path: Path) -> None:
    """2 laps with a checkpoint, resumed to 4: the heldout trace and the ELBO traces
    (the data of heldout_time.png, elbo.png and elbo_time.png) cover laps 1..4, in
    increasing wall time continuing from the first run's end."""
    ck = tmp_path / "ck"
    _fit(corpora, tmp_path / "m2", "--checkpoint", str(ck))
    _fit(corpora, tmp_path / "m4", "--resume", str(ck))
    first, whole = _heldout_trace(tmp_path / "m2"), _heldout_trace(tmp_path / "m4")
    assert first["laps"] == [1, 2]
    assert whole["laps"] == [1, 2, 3, 4]
    seconds = np.asarray(whole["seconds"])
    assert np.all(np.diff(seconds) > 0) and seconds[0] > 0
    # the first run's points, as it recorded them; the resumed run's after its end
    assert whole["seconds"][:2] == first["seconds"]
    assert whole["scores"][:2] == first["scores"]
    assert all(np.isfinite(whole["scores"]))
    early, model = load_lda(tmp_path / "m2"), load_lda(tmp_path / "m4")
    assert model.n_laps_ == 4
    assert model.lap_trace_[-1] == 4.0 and model.lap_trace_[0] <= 1.0
    assert np.all(np.diff(model.lap_trace_) > 0)
    assert np.all(np.diff(model.time_trace_) > 0)
    n = len(early.time_trace_)
    np.testing.assert_array_equal(model.time_trace_[:n], early.time_trace_)
    assert model.time_trace_[n] > early.time_trace_[-1]
    # the heldout points are at the fit's times of the laps' ends
    ends = [float(model.time_trace_[np.flatnonzero(model.lap_trace_ == lap)[0]]) for lap in (2, 4)]
    assert whole["seconds"][1] == pytest.approx(ends[0], abs=1e-9)
    assert whole["seconds"][3] >= ends[1]


def test_a_checkpoint_without_the_heldout_trace_still_resumes(
    corpora: dict[str, Path], tmp_path: Path
) -> None:
    """A checkpoint written before the heldout trace was kept in it resumes; the
    heldout trace then holds the resumed laps alone."""
    ck = tmp_path / "ck"
    _fit(corpora, tmp_path / "m2", "--checkpoint", str(ck))
    (ck / CHECKPOINT_HELDOUT_FILE).unlink()
    _fit(corpora, tmp_path / "m4", "--resume", str(ck))
    assert _heldout_trace(tmp_path / "m4")["laps"] == [3, 4]
    assert load_lda(tmp_path / "m4").n_laps_ == 4


@pytest.mark.parametrize("damage", ["other heldout", "not json", "laps backwards"])
def test_an_earlier_trace_of_other_documents_or_damaged_is_not_continued(
    corpora: dict[str, Path], tmp_path: Path, caplog: pytest.LogCaptureFixture, damage: str
) -> None:
    ck = tmp_path / "ck"
    _fit(corpora, tmp_path / "m2", "--checkpoint", str(ck))
    kept = ck / CHECKPOINT_HELDOUT_FILE
    if damage == "not json":
        kept.write_text("{")
    elif damage == "laps backwards":
        record = json.loads(kept.read_text())
        record["laps"] = [2, 1]
        kept.write_text(json.dumps(record))
    with caplog.at_level(logging.WARNING, logger="lsdask.jobs.corpus_lda"):
        _fit(corpora, tmp_path / "m4", "--resume", str(ck),
             heldout="other" if damage == "other heldout" else "heldout")  # fmt: skip
    assert "the heldout trace starts with this run" in caplog.text
    assert _heldout_trace(tmp_path / "m4")["laps"] == [3, 4]


def test_a_fresh_fit_drops_a_trace_left_without_its_checkpoint(
    corpora: dict[str, Path], tmp_path: Path
) -> None:
    """A folder whose checkpoints were removed but not its heldout trace: a fresh
    fit's trace is its own (a stop after its first checkpoint would otherwise
    resume the older fit's points)."""
    ck = tmp_path / "ck"
    ck.mkdir()
    stale = {"heldout": "x", "laps": [1, 2, 3], "seconds": [1.0, 2.0, 3.0], "scores": [0, 0, 0]}
    (ck / CHECKPOINT_HELDOUT_FILE).write_text(json.dumps(stale))
    _fit(corpora, tmp_path / "m", "--checkpoint", str(ck))
    kept = json.loads((ck / CHECKPOINT_HELDOUT_FILE).read_text())
    assert kept["laps"] == [1, 2] and kept == _heldout_trace(tmp_path / "m")


def test_the_pictures_axes_say_their_units(
    corpora: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every picture of `lsdask fit` is drawn with labelled axes and units."""
    import lsdask.plotting as plotting

    drawn: dict[str, tuple[str, str]] = {}
    real = plotting.plot_elbo_trace

    def recording(traces: Any, path: Any, **kwargs: Any) -> Path:
        drawn[Path(path).name] = (kwargs["xlabel"], kwargs["ylabel"])
        return real(traces, path, **kwargs)

    monkeypatch.setattr(plotting, "plot_elbo_trace", recording)
    _fit(corpora, tmp_path / "m")
    assert set(drawn) == {"elbo.png", "elbo_time.png", "heldout_time.png"}
    assert drawn["elbo.png"] == (plotting.LAPS_LABEL, "ELBO per training token (nats/token)")
    assert drawn["elbo_time.png"] == ("wall time of the fit (s)", drawn["elbo.png"][1])
    assert drawn["heldout_time.png"] == (
        "wall time of the fit (s)", "heldout log-likelihood (nats/token)",
    )  # fmt: skip
