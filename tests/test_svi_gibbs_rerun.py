"""``lsdask fit --algorithm svi-gibbs`` reruns: an interrupted command finishes
exactly what it asked for; a finished command rerun over the same corpus finds its
work done; another command trains n more epochs."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import lsdask
from lsdask.io.corpus import Corpus
from lsdask.jobs import corpus_lda
from lsdask.learn.svi_gibbs import SviGibbs
from lsdask.persist.svi_gibbs import load_stream_state


class Killed(Exception):
    """Stands for the process being killed (what it left on disk stays)."""


def _fit(corpus, ckpt, out, laps, command, resume):
    model = lsdask.LDA(
        4, algorithm="svi-gibbs", alpha=1.0, eta=0.3, n_laps=laps, minibatch_size=60,
        gibbs_burnin=1, gibbs_samples=1, random_state=0, client="sync",
        checkpoint_dir=str(ckpt), resume=resume,
    )  # fmt: skip
    report = corpus_lda.fit_corpus_lda(
        model, str(corpus), out_dir=out, overwrite=True, command_id=command
    )
    return report.model


def _command(ckpt):
    loaded = load_stream_state(ckpt)
    assert loaded is not None
    assert isinstance(loaded[0].command.get("data"), str)  # the corpus stamp, recorded
    command = {k: v for k, v in loaded[0].command.items() if k != "data"}
    return loaded[0].epoch, command


def test_an_interrupted_command_rerun_trains_exactly_what_it_asked(tmp_path, monkeypatch):
    rng = np.random.default_rng(2)
    X = sp.csr_matrix(rng.poisson(0.6, size=(300, 30)).astype(float))  # 5 minibatches an epoch
    corpus, ckpt, out = tmp_path / "c", tmp_path / "ck", tmp_path / "m"
    Corpus.write(corpus, X, [f"w{i}" for i in range(30)], docs_per_row_group=100)

    # command A (2 epochs) killed after training, before its output is written
    def killed_saving(*args, **kwargs):
        raise Killed

    with monkeypatch.context() as m:
        m.setattr(corpus_lda, "_save_with_pictures", killed_saving)
        with pytest.raises(Killed):
            _fit(corpus, ckpt, out, 2, "A", resume=False)
    assert _command(ckpt) == (2, {"id": "A", "target": 2, "done": False})
    # A again: nothing left to train, the output written; A is done
    again = _fit(corpus, ckpt, out, 2, "A", resume=True)
    assert again.n_laps_ == 2 and again.n_steps_ == 10
    assert _command(ckpt) == (2, {"id": "A", "target": 2, "done": True})
    # A once more, over the same corpus: its work is done, nothing is trained
    assert _fit(corpus, ckpt, out, 2, "A", resume=True).n_laps_ == 2
    assert _command(ckpt) == (2, {"id": "A", "target": 2, "done": True})

    # command B (2 more epochs, 4 in all) killed in its second epoch: the checkpoint
    # holds epoch 3 of B's 4; B rerun trains the one epoch left, not 2 more nor none
    run = SviGibbs._minibatch

    def killed_in_epoch_4(self, stream, executor, state, refs, task):
        if state.step == 17:
            raise Killed
        run(self, stream, executor, state, refs, task)

    with monkeypatch.context() as m:
        m.setattr(SviGibbs, "_minibatch", killed_in_epoch_4)
        with pytest.raises(Killed):
            _fit(corpus, ckpt, out, 2, "B", resume=True)
    assert _command(ckpt) == (3, {"id": "B", "target": 4, "done": False})
    b = _fit(corpus, ckpt, out, 2, "B", resume=True)
    assert b.n_laps_ == 4 and b.n_steps_ == 20
    # the same as a run never killed
    straight = _fit(corpus, tmp_path / "ck2", tmp_path / "m2", 4, None, resume=False)
    np.testing.assert_array_equal(b.components_, straight.components_)
