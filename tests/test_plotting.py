"""Tests for lsdask.plotting: PNG output and shape checks."""

from __future__ import annotations

from pathlib import Path

import matplotlib.image
import numpy as np
import pytest

from lsdask.plotting import (
    _eigen_tiles,
    _peak_signs,
    plot_covariance_eigenvectors,
    plot_elbo_trace,
    plot_topic_images,
)
from lsdask.synthetic import bars_topics

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def assert_png_with_content(path: Path) -> None:
    """A non-empty PNG whose pixels are not all the same."""
    path = Path(path)
    assert path.is_file()
    assert path.read_bytes()[:8] == PNG_MAGIC
    pixels = matplotlib.image.imread(path)
    assert pixels.ndim == 3 and pixels.shape[0] > 50 and pixels.shape[1] > 50
    assert float(np.var(pixels[..., :3])) > 1e-4


def random_covariances(rng: np.random.Generator, K: int, D: int) -> np.ndarray:
    A = rng.normal(size=(K, D, D))
    return A @ np.swapaxes(A, 1, 2) / D + 0.1 * np.eye(D)


def test_elbo_trace_png(tmp_path: Path) -> None:
    laps = np.arange(1, 11) / 2
    traces = {
        "L=4": (laps, -100 + np.log(laps)),
        "dense": (laps, -100.5 + np.log(laps)),
    }
    out = plot_elbo_trace(traces, tmp_path / "sub" / "elbo.png", title="test")
    assert out == tmp_path / "sub" / "elbo.png"
    assert_png_with_content(out)


def test_elbo_trace_single_point_and_lists(tmp_path: Path) -> None:
    out = plot_elbo_trace({"heldout": ([1.0], [2.5])}, tmp_path / "h.png", ylabel="heldout")
    assert_png_with_content(out)


@pytest.mark.parametrize(
    ("traces", "match"),
    [
        ({}, "traces is empty"),
        ({"a": ([1, 2, 3], [1, 2])}, r"traces\['a'\].*same length.*expected 3 values, got 2"),
        ({"a": ([[1, 2]], [[1, 2]])}, r"traces\['a'\].*1-D"),
        ({"a": ([], [])}, r"traces\['a'\] is empty"),
        ({"a": (1, 2, 3)}, r"traces\['a'\] must be a pair"),
        ([([1], [1])], "traces must be a dict"),
    ],
)
def test_elbo_trace_errors(tmp_path: Path, traces, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        plot_elbo_trace(traces, tmp_path / "x.png")
    assert not (tmp_path / "x.png").exists()


def test_covariance_eigenvectors_png(tmp_path: Path, rng: np.random.Generator) -> None:
    K, P = 5, 4
    cov = random_covariances(rng, K, P * P)
    weights = rng.dirichlet(np.ones(K))
    out = plot_covariance_eigenvectors(
        cov, weights, tmp_path / "clusters.png", n_clusters=16, n_vectors=3, patch_size=P
    )
    assert out == tmp_path / "clusters.png"
    assert_png_with_content(out)


def test_eigen_tiles_order_and_orientation() -> None:
    """Rows are the heaviest clusters first; a cluster whose covariance is a
    horizontal gradient shows that gradient as its leading tile."""
    P = 8
    ramp = np.tile(np.linspace(-1, 1, P), P)  # varies along x only
    ramp /= np.linalg.norm(ramp)
    cov = np.stack([np.eye(P * P), np.eye(P * P) * 0.01 + 5.0 * np.outer(ramp, ramp)])
    order, tiles, shares = _eigen_tiles(cov, np.array([0.1, 0.9]), 16, 2, P)
    np.testing.assert_array_equal(order, [1, 0])
    assert tiles.shape == (2, 2, P, P)
    lead = tiles[0, 0]
    np.testing.assert_allclose(lead, lead[:1].repeat(P, axis=0), atol=1e-8)  # same every row
    np.testing.assert_allclose(np.abs(lead.ravel()), np.abs(ramp), atol=1e-8)
    # sign fixed: the largest-magnitude pixel positive; the ramp's two ends tie
    # (up to the eigensolver's rounding, which differs between machines): the first
    assert lead[0, 0] > 0 > lead[0, -1]
    assert shares[0, 0] == pytest.approx(5.01 / (5.0 + 0.64), rel=1e-6)
    assert shares[0, 0] > 0.8 > shares[0, 1]


def test_peak_signs_take_the_first_of_magnitudes_tied_up_to_rounding() -> None:
    v = np.array([[-1.0, 0.5, 0.0], [0.2, -0.9, 3.0], [1.0 + 1e-12, 0.9, -3.0]])
    # column 0: |-1| and |1 + 1e-12| tie up to rounding, the first is negative;
    # column 1: -0.9 and 0.9 tie exactly, the first is negative; column 2 likewise
    np.testing.assert_array_equal(_peak_signs(v), [-1.0, -1.0, 1.0])
    v[2, 0] = 1.001  # a clear peak wins wherever it is
    np.testing.assert_array_equal(_peak_signs(v), [1.0, -1.0, 1.0])


@pytest.mark.parametrize(
    ("cov_shape", "weights_shape", "kwargs", "match"),
    [
        ((3, 64), (3,), {}, r"covariances must have shape \(K, D, D\); got \(3, 64\)"),
        ((3, 16, 16), (3,), {}, r"covariances must have shape \(K, 64, 64\).*got \(3, 16, 16\)"),
        ((3, 64, 64), (4,), {}, r"weights must have shape \(3,\).*got \(4,\)"),
        ((3, 64, 64), (3, 1), {}, r"weights must have shape \(3,\).*got \(3, 1\)"),
        ((3, 64, 64), (3,), {"n_clusters": 0}, "n_clusters must be a positive integer"),
        ((3, 64, 64), (3,), {"n_vectors": 2.5}, "n_vectors must be a positive integer"),
    ],
)
def test_covariance_eigenvectors_errors(
    tmp_path: Path, cov_shape, weights_shape, kwargs, match: str
) -> None:
    cov = np.ones(cov_shape)
    with pytest.raises(ValueError, match=match):
        plot_covariance_eigenvectors(cov, np.ones(weights_shape), tmp_path / "x.png", **kwargs)
    assert not (tmp_path / "x.png").exists()


def test_covariance_eigenvectors_rejects_nan(tmp_path: Path) -> None:
    cov = np.stack([np.eye(4), np.full((4, 4), np.nan)])
    with pytest.raises(ValueError, match="non-finite"):
        plot_covariance_eigenvectors(cov, [0.5, 0.5], tmp_path / "x.png", patch_size=2)


# topics as images ------------------------------------------------------------


def test_topic_images_png(tmp_path: Path, rng: np.random.Generator) -> None:
    true = bars_topics(4)
    learned = 5.0 * true[rng.permutation(8)] + rng.uniform(0, 0.1, size=true.shape)
    out = plot_topic_images(true, learned, tmp_path / "sub" / "topics.png", 4, title="bars")
    assert out == tmp_path / "sub" / "topics.png"
    assert_png_with_content(out)
    pixels = matplotlib.image.imread(out)
    assert pixels.shape[1] > pixels.shape[0]  # one column per topic: wide


def test_topic_images_fewer_or_more_learned_topics(tmp_path: Path) -> None:
    true = bars_topics(3)
    assert_png_with_content(plot_topic_images(true, true[:4], tmp_path / "few.png", 3))
    more = np.vstack([true, np.ones((2, 9))])
    assert_png_with_content(plot_topic_images(true, more, tmp_path / "more.png", 3))


@pytest.mark.parametrize(
    ("true_shape", "learned_shape", "side", "match"),
    [
        ((10, 25), (10, 24), 5, r"learned_topics must have shape \(K, 25\) for side=5.*\(10, 24\)"),
        ((10, 16), (10, 16), 5, r"true_topics must have shape \(K, 25\).*got \(10, 16\)"),
        ((25,), (10, 25), 5, r"true_topics must have shape \(K, 25\).*got \(25,\)"),
        ((0, 25), (10, 25), 5, r"true_topics must have shape \(K, 25\).*got \(0, 25\)"),
        ((10, 25), (10, 25), 0, "side must be a positive integer"),
        ((10, 25), (10, 25), 5.0, "side must be a positive integer"),
    ],
)
def test_topic_images_shape_errors(
    tmp_path: Path, true_shape, learned_shape, side, match: str
) -> None:
    with pytest.raises(ValueError, match=match):
        plot_topic_images(np.ones(true_shape), np.ones(learned_shape), tmp_path / "x.png", side)
    assert not (tmp_path / "x.png").exists()


def test_topic_images_rejects_negative_topics(tmp_path: Path) -> None:
    learned = -bars_topics(2)
    with pytest.raises(ValueError, match="learned_topics must hold finite, non-negative"):
        plot_topic_images(bars_topics(2), learned, tmp_path / "x.png", 2)


def test_elbo_trace_figure_axes_say_their_units() -> None:
    """The default labels name the axes' units; given ones are used as given."""
    from lsdask.plotting import LAPS_LABEL, elbo_trace_figure

    ax = elbo_trace_figure({"L=4": ([1, 2], [-3.0, -2.5])}).axes[0]
    assert ax.get_xlabel() == LAPS_LABEL == "lap (passes through the training data)"
    assert ax.get_ylabel() == "ELBO (nats)"
    fig = elbo_trace_figure(
        {"L=4": ([0.5, 1.0], [-3.0, -2.5])},
        xlabel="wall time (s)",
        ylabel="heldout log-likelihood (nats/token)",
    )
    ax = fig.axes[0]
    assert ax.get_xlabel() == "wall time (s)"
    assert ax.get_ylabel() == "heldout log-likelihood (nats/token)"


def test_k_elbo_figure_axes_say_their_units(tmp_path: Path) -> None:
    from lsdask.plotting import LAPS_LABEL, k_elbo_figure, plot_k_elbo_trace

    top, bottom = k_elbo_figure(([1, 2, 3], [8, 7, 7]), ([1, 2, 3], [-3.0, -2.9, -2.8])).axes
    assert top.get_ylabel() == "K (topics)"
    assert bottom.get_ylabel() == "surrogate ELBO (nats)"
    assert bottom.get_xlabel() == LAPS_LABEL
    _, bottom = k_elbo_figure(
        ([1, 2], [8, 7]), ([1, 2], [-3.0, -2.9]), ylabel="surrogate ELBO (nats/token)"
    ).axes
    assert bottom.get_ylabel() == "surrogate ELBO (nats/token)"
    out = plot_k_elbo_trace(([1, 2], [8, 7]), ([1, 2], [-3.0, -2.9]), tmp_path / "k.png")
    assert_png_with_content(out)
