"""The traces a fit's pictures are drawn from span the whole fit across resumes."""

from __future__ import annotations

import json
import logging
import os
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
    """A checkpoint folder without its heldout trace (removed, or its fit ran
    without heldout documents) resumes; the heldout trace then holds the resumed
    laps alone."""
    ck = tmp_path / "ck"
    _fit(corpora, tmp_path / "m2", "--checkpoint", str(ck))
    (ck / CHECKPOINT_HELDOUT_FILE).unlink()
    _fit(corpora, tmp_path / "m4", "--resume", str(ck))
    assert _heldout_trace(tmp_path / "m4")["laps"] == [3, 4]
    assert load_lda(tmp_path / "m4").n_laps_ == 4


def _strict_json(text: str) -> Any:
    """``text`` parsed as strict JSON: NaN, Infinity and -Infinity refused."""

    def refuse(name: str) -> Any:
        raise ValueError(f"not strict JSON: {name}")

    return json.loads(text, parse_constant=refuse)


DAMAGES = ["other heldout", "not json", "laps backwards", "NaN score", "1e400 score",
           "huge seconds", "seconds backwards", "negative seconds", "symlink", "FIFO"]  # fmt: skip


@pytest.mark.parametrize("damage", DAMAGES)
def test_an_earlier_trace_of_other_documents_or_damaged_is_not_continued(
    corpora: dict[str, Path], tmp_path: Path, caplog: pytest.LogCaptureFixture, damage: str
) -> None:
    """A damaged or crafted trace in the checkpoint folder is warned of and not
    continued; the resume goes on, and the trace it writes is strict JSON in a
    regular file (a link or FIFO in its place replaced, never written through)."""
    ck = tmp_path / "ck"
    _fit(corpora, tmp_path / "m2", "--checkpoint", str(ck))
    kept = ck / CHECKPOINT_HELDOUT_FILE
    text = kept.read_text()
    record = json.loads(text)
    elsewhere = tmp_path / "elsewhere.json"
    if damage == "not json":
        kept.write_text("{")
    elif damage == "laps backwards":
        kept.write_text(json.dumps({**record, "laps": [2, 1]}))
    elif damage == "NaN score":
        kept.write_text(json.dumps({**record, "scores": [float("nan"), -1.0]}))
    elif damage == "1e400 score":
        kept.write_text(text.replace(str(record["scores"][0]), "1e400", 1))
    elif damage == "huge seconds":
        kept.write_text(json.dumps({**record, "seconds": [1, 10**400]}))
    elif damage == "seconds backwards":
        kept.write_text(json.dumps({**record, "seconds": [5.0, 1.0]}))
    elif damage == "negative seconds":
        kept.write_text(json.dumps({**record, "seconds": [-2.0, 1.0]}))
    elif damage == "symlink":
        elsewhere.write_text(text)
        kept.unlink()
        kept.symlink_to(elsewhere)
    elif damage == "FIFO":
        kept.unlink()
        os.mkfifo(kept)
    with caplog.at_level(logging.WARNING, logger="lsdask.jobs.corpus_lda"):
        _fit(corpora, tmp_path / "m4", "--resume", str(ck),
             heldout="other" if damage == "other heldout" else "heldout")  # fmt: skip
    assert "the heldout trace starts with this run" in caplog.text
    assert _heldout_trace(tmp_path / "m4")["laps"] == [3, 4]
    assert not kept.is_symlink() and kept.is_file()
    assert _strict_json(kept.read_text())["laps"] == [3, 4]
    if damage == "symlink":
        assert elsewhere.read_text() == text  # the link's target untouched


def test_a_trace_is_written_as_strict_json(tmp_path: Path) -> None:
    """A score that is not finite is written as null, and read back as NaN."""
    from lsdask.jobs.corpus_lda import HeldoutTrace, _read_trace

    trace = HeldoutTrace.__new__(HeldoutTrace)
    trace.stamp, trace.laps = "s", [1, 2, 3]
    trace.seconds, trace.scores = [0.5, 1.0, 1.0], [-7.0, float("-inf"), float("nan")]
    record = _strict_json(trace.json())
    assert record["scores"] == [-7.0, None, None]
    back = _read_trace(record)
    assert back is not None and back["seconds"] == [0.5, 1.0, 1.0]
    assert back["scores"][0] == -7.0 and np.isnan(back["scores"][1:]).all()
    for bad in ({"seconds": [0.5, 1.0, True]}, {"scores": [1, 2, "3"]}, {"laps": [1, 2, 2]},
                {"laps": [0, 1, 2]}, {"seconds": [0.5, 1.0]}, {"heldout": 3}):  # fmt: skip
        assert _read_trace({**record, **bad}) is None, bad


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


def test_a_refused_checkpoint_folder_keeps_its_trace(
    corpora: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A folder the fit refuses (no checkpoint, but other files): nothing in it is
    removed, the hidden trace included."""
    ck = tmp_path / "ck"
    ck.mkdir()
    (ck / "notes.txt").write_text("mine")
    stale = json.dumps({"heldout": "x", "laps": [1], "seconds": [1.0], "scores": [0.0]})
    (ck / CHECKPOINT_HELDOUT_FILE).write_text(stale)
    argv = [
        "fit", str(corpora["train"]), "--topics", "6", "--laps", "1", "--heldout",
        str(corpora["heldout"]), "--out", str(tmp_path / "m"), "--sync", "--checkpoint", str(ck),
    ]  # fmt: skip
    assert main(argv) == 2
    assert "holds no checkpoint but other things" in capsys.readouterr().err
    assert sorted(p.name for p in ck.iterdir()) == [CHECKPOINT_HELDOUT_FILE, "notes.txt"]
    assert (ck / CHECKPOINT_HELDOUT_FILE).read_text() == stale


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
