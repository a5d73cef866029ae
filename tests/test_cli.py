"""Tests for the ``lsdask`` command line, its jobs and the pipelines."""

from __future__ import annotations

import importlib.util
import logging
import math
import re
import subprocess
import sys
from pathlib import Path

import matplotlib.image
import numpy as np
import pyarrow.parquet as pq
import pytest
from PIL import Image

from lsdask import GaussianMixture
from lsdask.cli import main
from lsdask.io.corpus import Corpus, read_all
from lsdask.io.patches import write_patch_store
from lsdask.jobs.bars_lda import bars_hdp, bars_lda, format_bars_report, run_bars_demo
from lsdask.jobs.patch_gmm import PATCH_ALPHA, fit_and_report, format_report
from lsdask.jobs.split import split_corpus
from lsdask.jobs.topics import UMASS_SCALE, topic_report
from lsdask.jobs.transform import TransformSummary, format_transform_summary, transform_corpus
from lsdask.persist import load_lda
from lsdask.synthetic import make_bars_corpus

REPO_ROOT = Path(__file__).resolve().parents[1]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def synthetic_image(rng: np.random.Generator, height: int = 48, width: int = 56) -> np.ndarray:
    """A uint8 RGB image with smooth structure (edges, gradients) plus noise."""
    y, x = np.mgrid[0:height, 0:width]
    angle = rng.uniform(0, np.pi)
    base = 128 + 80 * np.tanh((np.cos(angle) * x + np.sin(angle) * y - 25) / 3)
    base = base + 30 * np.sin(x / rng.uniform(2, 6)) + rng.normal(0, 8, size=(height, width))
    gray = np.clip(base, 0, 255).astype(np.uint8)
    return np.stack([gray, gray, gray], axis=-1)


def assert_png(path: Path | str) -> None:
    path = Path(path)
    assert path.is_file() and path.stat().st_size > 0
    assert path.read_bytes()[:8] == PNG_MAGIC
    assert float(np.var(matplotlib.image.imread(path)[..., :3])) > 1e-4


@pytest.fixture(scope="module")
def patch_store(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Two small synthetic images cut into patches: one trains, one is held out."""
    rng = np.random.default_rng(7)
    out = tmp_path_factory.mktemp("store") / "patches"
    return write_patch_store(
        [synthetic_image(rng), synthetic_image(rng)],
        out,
        batch_size=50,
        heldout_fraction=0.5,
        progress=False,
    )


def _shown(stderr: str) -> str:
    """``stderr`` without the progress lines (shown where stderr is not a terminal,
    as under capsys): what a test of errors and warnings reads."""
    from tests.lsdask_processes import without_progress

    return "".join(f"{line}\n" for line in without_progress(stderr))


def _load_pipeline(name: str):
    path = REPO_ROOT / "pipelines" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"{name}_pipeline", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # as an import does (dataclasses look their module up)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def pipeline_module():
    return _load_pipeline("patch_gmm")


PIXELS = [f"px{i}" for i in range(25)]


@pytest.fixture(scope="module")
def bars_corpora(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The bars corpus as Parquet: 200 train documents (4 row groups), 40 heldout."""
    root = tmp_path_factory.mktemp("bars")
    X, _ = make_bars_corpus(n_docs=240, doc_topic_prior=0.1, random_state=2)
    Corpus.write(root / "train", X[:200], PIXELS, docs_per_row_group=50)
    heldout = X[200:]
    docs = ((1000 + i, heldout[i].indices, heldout[i].data) for i in range(heldout.shape[0]))
    Corpus.write(root / "heldout", docs, PIXELS, docs_per_row_group=15)
    Corpus.write(root / "other_vocab", X[:20], [w.upper() for w in PIXELS])
    return {"train": root / "train", "heldout": root / "heldout", "other": root / "other_vocab"}


@pytest.fixture(scope="module")
def saved_model(bars_corpora: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``lsdask fit`` on the train corpus (K=10, L=3, 3 laps, in-process)."""
    out = tmp_path_factory.mktemp("model") / "lda"
    code = main(
        ["fit", str(bars_corpora["train"]), "--topics", "10", "--sparsity", "3", "--laps", "3",
         "--alpha", "1", "--out", str(out), "--sync"]
    )  # fmt: skip
    assert code == 0
    return out


# fit-gmm ---------------------------------------------------------------------


def test_fit_gmm_sync(patch_store: dict, tmp_path: Path, capsys) -> None:
    out = tmp_path / "fit"
    code = main(
        [
            "fit-gmm", patch_store["train"]["path"],
            "--components", "3", "--sparsity", "2", "--laps", "2",
            "--heldout", patch_store["heldout"]["path"],
            "--out", str(out), "--sync", "--seed", "1", "--save", str(tmp_path / "model"),
        ]
    )  # fmt: skip
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert f"model: saved to {tmp_path / 'model'}" in captured.out
    from lsdask.persist.gmm import load_gmm

    loaded = load_gmm(tmp_path / "model", client="sync")
    assert (loaded.n_components, loaded.sparsity, loaded.n_laps_) == (3, 2, 2)
    shown = captured.out.split("heldout log-likelihood per patch, L=2: ")[1].split()[0]
    assert loaded.score(patch_store["heldout"]["path"]) == pytest.approx(float(shown), abs=1e-4)
    assert "K=3" in captured.out and "L=2" in captured.out
    assert "heldout log-likelihood per patch, L=2:" in captured.out
    assert f"{patch_store['train']['n_patches']:,} train rows" in captured.out
    assert_png(out / "elbo.png")
    assert_png(out / "clusters.png")  # 64 features from an 8x8 patch store


def _zarr_rows(path: Path, X: np.ndarray, chunk_rows: int) -> str:
    import zarr

    z = zarr.open_array(str(path), mode="w", shape=X.shape, chunks=(chunk_rows, X.shape[1]),
                        dtype="f8")  # fmt: skip
    z[:] = X
    return str(path)


def test_fit_gmm_checkpoint_then_resume_equals_the_straight_run(tmp_path: Path, capsys) -> None:
    """``--checkpoint`` after 2 laps, ``--resume`` for 1 more: the model of a
    straight 3-lap run, bit for bit; then rows appended to the array are taken
    in by a further resume."""
    from lsdask.persist.gmm import load_gmm

    rng = np.random.default_rng(0)
    X = np.concatenate([rng.normal(m, 1.0, size=(200, 3)) for m in (-4.0, 0.0, 4.0)])
    train = _zarr_rows(tmp_path / "x.zarr", X[rng.permutation(600)], 150)
    argv = ["fit-gmm", train, "--components", "3", "--covariance", "full", "--sync",
            "--seed", "3"]  # fmt: skip
    assert main([*argv, "--laps", "3", "--save", str(tmp_path / "straight")]) == 0
    ck = tmp_path / "ck"
    assert main([*argv, "--laps", "2", "--checkpoint", str(ck)]) == 0
    assert (ck / "LATEST").exists()
    capsys.readouterr()
    assert main([*argv, "--laps", "1", "--resume", str(ck), "--save", str(tmp_path / "res")]) == 0
    straight, resumed = load_gmm(tmp_path / "straight"), load_gmm(tmp_path / "res")
    assert resumed.n_laps_ == straight.n_laps_ == 3
    np.testing.assert_array_equal(resumed.weights_, straight.weights_)
    np.testing.assert_array_equal(resumed.means_, straight.means_)
    np.testing.assert_array_equal(resumed.elbo_trace_, straight.elbo_trace_)

    import zarr

    z = zarr.open_array(train, mode="r+")
    z.append(rng.normal(8.0, 1.0, size=(90, 3)))
    capsys.readouterr()
    assert main([*argv, "--laps", "1", "--resume", str(ck)]) == 0
    assert "690 train rows" in capsys.readouterr().out


def test_fit_gmm_checkpoint_refuses_the_dense_comparison(tmp_path: Path) -> None:
    model = GaussianMixture(2, sparsity=1, client="sync", checkpoint_dir=str(tmp_path / "ck"))
    with pytest.raises(ValueError, match="compare_dense=False"):
        fit_and_report(model, np.zeros((10, 2)))
    assert not (tmp_path / "ck").exists()  # refused before the fit


def test_fit_gmm_without_out_writes_nothing(patch_store: dict, tmp_path: Path, capsys) -> None:
    code = main(
        ["fit-gmm", patch_store["train"]["path"], "--components", "2", "--laps", "1",
         "--covariance", "diag", "--algorithm", "vb", "--sync"]
    )  # fmt: skip
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "L=dense" in captured.out
    assert "pictures" not in captured.out


def test_fit_gmm_batches_per_update_reproduces_a_cluster_run_in_process(
    patch_store: dict, tmp_path: Path, capsys
) -> None:
    """--batches-per-update lets a cluster run be redone in this process: its
    default is the number of workers on a cluster and 1 with --sync."""
    from lsdask.persist.gmm import load_gmm

    argv = ["fit-gmm", patch_store["train"]["path"], "--components", "3", "--laps", "3",
            "--batches-per-update", "2", "--seed", "4"]  # fmt: skip
    assert main([*argv, "--workers", "2", "--save", str(tmp_path / "cluster")]) == 0
    assert main([*argv, "--sync", "--save", str(tmp_path / "sync")]) == 0
    capsys.readouterr()
    cluster = load_gmm(tmp_path / "cluster", client="sync")
    local = load_gmm(tmp_path / "sync", client="sync")
    np.testing.assert_allclose(cluster.elbo_trace_, local.elbo_trace_, rtol=1e-10)
    np.testing.assert_allclose(cluster.means_, local.means_, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("which", ["train", "heldout"])
def test_fit_gmm_missing_zarr(patch_store: dict, tmp_path: Path, capsys, which: str) -> None:
    missing = str(tmp_path / "nope.zarr")
    train = missing if which == "train" else patch_store["train"]["path"]
    argv = ["fit-gmm", train, "--components", "2", "--sync"]
    if which == "heldout":
        argv += ["--heldout", missing]
    assert main(argv) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("lsdask: error: ")
    assert "nope.zarr" in lines[0]
    assert "Traceback" not in captured.err
    assert captured.out == ""


def test_fit_gmm_bad_parameter(patch_store: dict, capsys) -> None:
    code = main(
        ["fit-gmm", patch_store["train"]["path"], "--components", "2", "--sparsity", "5", "--sync"]
    )
    assert code == 2
    err = _shown(capsys.readouterr().err)
    assert err.startswith("lsdask: error: sparsity must be an integer in [1, 2]")


def test_argparse_errors_exit_2(capsys) -> None:
    with pytest.raises(SystemExit) as info:
        main(["fit-gmm", "x.zarr", "--components", "2", "--sync", "--workers", "2"])
    assert info.value.code == 2
    with pytest.raises(SystemExit) as info:
        main(["demo", "--laps", "0"])
    assert info.value.code == 2
    assert "positive integer" in capsys.readouterr().err


def test_python_m_lsdask_error_exit_code(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "lsdask", "fit-gmm", str(tmp_path / "missing.zarr"),
         "--components", "2", "--sync"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.startswith("lsdask: error: ")
    assert "Traceback" not in proc.stderr


def test_verbose_logs_and_cleans_up(patch_store: dict, capsys) -> None:
    package_logger = logging.getLogger("lsdask")
    handlers = list(package_logger.handlers)
    level = package_logger.level
    code = main(
        ["-v", "fit-gmm", patch_store["train"]["path"], "--components", "2", "--laps", "1",
         "--sync"]
    )  # fmt: skip
    assert code == 0
    assert "lsdask." in capsys.readouterr().err  # INFO lines name their logger
    assert package_logger.handlers == handlers
    assert package_logger.level == level


def test_model_options_come_from_the_parameter_tables() -> None:
    """`lsdask fit` and `fit-gmm` build their model options from the estimators'
    tables: with none given, the estimator gets the table's defaults (the
    commands seed their runs with 0, and fit-gmm's alpha is the paper's)."""
    from lsdask.cli import gmm, lda
    from lsdask.cli.params import params_from_args
    from lsdask.cli.parser import build_parser
    from lsdask.estimators.params import GAUSSIAN_PARAMS, LDA_PARAMS

    parser = build_parser()
    args = parser.parse_args(["fit", "c", "--topics", "3", "--out", "m"])
    values = params_from_args(args, lda.FIT_OPTIONS)
    expected = {**LDA_PARAMS.defaults(), "n_components": 3, "random_state": 0}
    assert values == {name: expected[name] for name in values}
    args = parser.parse_args(["fit", "c", "--topics", "3", "--out", "m", "--dense",
                              "--no-restarts", "--laps", "4"])  # fmt: skip
    assert (args.sparsity, args.restarts, args.n_laps) == (None, False, 4)
    args = parser.parse_args(["fit-gmm", "x.zarr", "--components", "2", "--covariance", "full"])
    values = params_from_args(args, gmm.FIT_OPTIONS)
    expected = {**GAUSSIAN_PARAMS.defaults(), "n_components": 2, "covariance_type": "full",
                "alpha": PATCH_ALPHA, "random_state": 0}  # fmt: skip
    assert values == {name: expected[name] for name in values}


# patches ---------------------------------------------------------------------


def test_patches_command(tmp_path: Path, capsys) -> None:
    rng = np.random.default_rng(3)
    folder = tmp_path / "images" / "nested"
    folder.mkdir(parents=True)
    for i in range(3):
        Image.fromarray(synthetic_image(rng)).save(folder / f"im{i}.png")
    out = tmp_path / "store"
    code = main(
        ["patches", str(tmp_path / "images"), "--out", str(out), "--batch-size", "40",
         "--heldout-fraction", "0.34", "--stride", "8"]
    )  # fmt: skip
    captured = capsys.readouterr()
    assert code == 0, captured.err
    per_image = (48 // 8) * (56 // 8)
    assert f"{2 * per_image:>10,} patches from 2 images" in captured.out
    assert f"{per_image:>10,} patches from 1 image:" in captured.out
    assert (out / "train.zarr").is_dir() and (out / "heldout.zarr").is_dir()


def test_patches_missing_folder(tmp_path: Path, capsys) -> None:
    assert main(["patches", str(tmp_path / "none"), "--out", str(tmp_path / "o")]) == 2
    assert capsys.readouterr().err.startswith("lsdask: error: image folder")


# library functions and the pipeline -------------------------------------------


def test_fit_and_report_compares_dense(patch_store: dict, tmp_path: Path) -> None:
    model = GaussianMixture(3, sparsity=1, n_laps=2, alpha=PATCH_ALPHA, random_state=0,
                            client="sync")  # fmt: skip
    result = fit_and_report(
        model,
        patch_store["train"]["path"],
        out_dir=tmp_path,
        heldout=patch_store["heldout"]["path"],
        n_top=2,
    )
    assert list(result.runs) == ["L=1", "dense"]
    assert result.main.model is model and result.runs["dense"].model.sparsity is None
    assert model.client == "sync"  # the estimator keeps its own client
    assert result.n_train == patch_store["train"]["n_patches"]
    assert result.n_heldout == patch_store["heldout"]["n_patches"]
    for run in result.runs.values():
        assert math.isfinite(run.heldout_score)
        assert run.laps >= 1
        assert run.seconds > 0
    sparse, dense = result.runs["L=1"].heldout_score, result.runs["dense"].heldout_score
    assert result.heldout_diff_percent == pytest.approx(100 * (sparse - dense) / abs(dense))
    assert len(result.top_weights) == 2
    assert result.top_weights[0] >= result.top_weights[1]
    assert result.top_weights[0] == pytest.approx(
        result.runs["L=1"].model.weights_[result.top_clusters[0]]
    )
    report = format_report(result)
    assert "L=1 vs dense" in report and "%" in report
    assert_png(result.elbo_plot)
    assert_png(result.clusters_plot)


def test_fit_and_report_non_patch_rows(tmp_path: Path, rng: np.random.Generator) -> None:
    """Rows that are not square patches: an ELBO plot but no cluster picture."""
    X = np.concatenate([rng.normal(-3, 1, size=(150, 3)), rng.normal(3, 1, size=(150, 3))])
    model = GaussianMixture(2, n_laps=2, covariance_type="full", client="sync")
    result = fit_and_report(model, X, out_dir=tmp_path)
    assert list(result.runs) == ["dense"]
    assert result.n_heldout == 0 and result.runs["dense"].heldout_score is None
    assert result.heldout_diff_percent is None
    assert result.clusters_plot is None
    assert_png(result.elbo_plot)
    assert "no heldout data" in format_report(result)
    # heldout rows of another width: refused before the fit, naming heldout, with
    # nothing written
    with pytest.raises(ValueError, match=r"^heldout has 4 features per row, but the training"):
        fit_and_report(GaussianMixture(2, n_laps=200, client="sync"), X, out_dir=tmp_path / "b",
                       heldout=np.zeros((5, 4)))  # fmt: skip
    assert not (tmp_path / "b").exists()


def test_pipeline_on_synthetic_images(pipeline_module, tmp_path: Path) -> None:
    rng = np.random.default_rng(11)
    images = [synthetic_image(rng) for _ in range(3)]
    model = GaussianMixture(3, sparsity=2, n_laps=2, alpha=PATCH_ALPHA, client="sync")
    result = pipeline_module.run_patch_gmm(
        images, tmp_path / "run", model, batch_size=60, heldout_fraction=0.34
    )
    fit = result.fit
    assert fit.patches.train.n_images == 2
    assert fit.patches.heldout.n_images == 1
    assert fit.n_train == fit.patches.train.n_patches > 0
    assert set(fit.runs) == {"L=2", "dense"}
    # what the pipeline fitted: K=3 clusters of 8x8 patches, L=2 and its dense twin
    sparse, dense = fit.runs["L=2"].model, fit.runs["dense"].model
    assert sparse.weights_.shape == dense.weights_.shape == (3,)
    assert sparse.n_features_in_ == dense.n_features_in_ == fit.n_features == 64
    assert (sparse.sparsity, dense.sparsity) == (2, None)
    assert fit.runs["L=2"].laps == sparse.n_laps_ >= 1
    assert fit.runs["L=2"].elbo_final == sparse.elbo_trace_[-1]
    assert fit.runs["dense"].elbo_final == dense.elbo_trace_[-1]
    assert all(math.isfinite(run.heldout_score) for run in fit.runs.values())
    assert fit.elbo_plot == str(tmp_path / "run" / "elbo.png")
    assert_png(fit.elbo_plot)
    assert_png(fit.clusters_plot)
    assert result.patch_seconds > 0


def test_pipeline_folder_and_main(pipeline_module, tmp_path: Path, capsys) -> None:
    rng = np.random.default_rng(5)
    folder = tmp_path / "imgs"
    folder.mkdir()
    for i in range(2):
        Image.fromarray(synthetic_image(rng)).save(folder / f"p{i}.jpg")
    code = pipeline_module.main(
        [str(folder), "--out", str(tmp_path / "out"), "--components", "2", "--sparsity", "1",
         "--laps", "1", "--no-dense", "--sync", "--batch-size", "64"]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0
    assert "heldout log-likelihood per patch, L=1:" in out
    assert_png(tmp_path / "out" / "clusters.png")


def test_pipeline_bad_folder(pipeline_module, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="does not exist"):
        pipeline_module.run_patch_gmm(tmp_path / "missing", tmp_path / "out")


# LDA on a Parquet corpus: fit, topics, transform -------------------------------


def test_fit_command(bars_corpora: dict[str, Path], tmp_path: Path, capsys) -> None:
    out = tmp_path / "model"
    code = main(
        ["fit", str(bars_corpora["train"]), "--topics", "10", "--sparsity", "4", "--laps", "2",
         "--alpha", "1", "--eta", "0.2", "--heldout", str(bars_corpora["heldout"]),
         "--out", str(out), "--sync", "--seed", "3", "--batches-per-update", "2"]
    )  # fmt: skip
    captured = capsys.readouterr()
    assert code == 0, captured.err
    text = captured.out
    assert "data: 200 documents, 10,000 tokens, V=25" in text
    assert "model: LDA, K=10, L=4, algorithm=memo" in text
    assert "laps: 2 (" in text and "seconds: " in text and "final ELBO: " in text
    assert "heldout document completion: " in text and "(40 documents of" in text
    assert "top 8 words of the first 10 topics:" in text
    topic_lines = [line for line in text.splitlines() if line.startswith("    ")]
    assert len(topic_lines) == 10
    assert all(len(line.split()) == 9 and "px" in line for line in topic_lines)
    assert sorted(p.name for p in out.iterdir()) == [
        "arrays.npz", "elbo.png", "elbo_time.png", "heldout_time.png", "heldout_trace.json",
        "params.json", "vocab.txt",
    ]  # fmt: skip
    for picture in ("elbo.png", "elbo_time.png", "heldout_time.png"):
        assert_png(out / picture)
    model = load_lda(out)
    assert model.sparsity == 4 and model.alpha == 1.0 and model.eta == 0.2
    assert model.random_state == 3 and model.n_laps_ == 2 and model.batches_per_update == 2
    assert model.vocabulary_ == PIXELS


def test_fit_dense_svi_no_restarts(bars_corpora: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "m"
    code = main(
        ["fit", str(bars_corpora["train"]), "--topics", "4", "--dense", "--algorithm", "svi",
         "--laps", "1", "--no-restarts", "--out", str(out), "--sync"]
    )  # fmt: skip
    assert code == 0
    model = load_lda(out)
    assert model.sparsity is None and model.algorithm == "svi" and model.restarts is False


def test_fit_errors(bars_corpora: dict[str, Path], saved_model: Path, tmp_path: Path, capsys):
    train = str(bars_corpora["train"])
    cases = [
        (["fit", str(tmp_path / "nope"), "--topics", "2", "--out", str(tmp_path / "m")],
         "no corpus at"),
        (["fit", train, "--topics", "2", "--out", str(saved_model)], "a model already exists"),
        (["fit", train, "--topics", "2", "--out", str(tmp_path / "m"), "--heldout",
          str(bars_corpora["other"])], "different vocabulary"),
    ]  # fmt: skip
    for argv, message in cases:
        assert main([*argv, "--sync"]) == 2
        err = _shown(capsys.readouterr().err)
        assert err.startswith("lsdask: error: ") and message in err, err
        assert "Traceback" not in err
    assert not (tmp_path / "m").exists()
    with pytest.raises(SystemExit) as info:
        main(["fit", train, "--topics", "2", "--out", "x", "--dense", "--sparsity", "2"])
    assert info.value.code == 2
    with pytest.raises(SystemExit):
        main(["fit", train, "--topics", "2", "--out", "x", "--alpha", "-1"])
    assert "positive number" in capsys.readouterr().err


def test_fit_from_a_saved_models_topics(
    bars_corpora: dict[str, Path], saved_model: Path, tmp_path: Path
) -> None:
    base = ["fit", str(bars_corpora["train"]), "--topics", "10", "--sparsity", "3", "--laps",
            "1", "--alpha", "1", "--sync"]  # fmt: skip
    out, fresh = tmp_path / "warm", tmp_path / "fresh"
    assert main([*base, "--init", str(saved_model), "--out", str(out)]) == 0
    source, warm = load_lda(saved_model), load_lda(out)
    np.testing.assert_array_equal(warm.init, np.maximum(source.components_ - source.eta, 0.0))
    # one lap from the saved model's topics ends higher than one from k-means++
    assert main([*base, "--out", str(fresh)]) == 0
    assert warm.elbo_trace_[-1] > load_lda(fresh).elbo_trace_[-1]
    # the same counts from a .npy file
    np.save(tmp_path / "counts.npy", warm.init)
    assert main([*base, "--init", str(tmp_path / "counts.npy"), "--out", str(tmp_path / "f")]) == 0
    np.testing.assert_array_equal(load_lda(tmp_path / "f").init, warm.init)


def test_fit_init_errors(
    bars_corpora: dict[str, Path], saved_model: Path, tmp_path: Path, capsys
) -> None:
    other = tmp_path / "other_model"
    assert main(["fit", str(bars_corpora["other"]), "--topics", "10", "--laps", "1",
                 "--out", str(other), "--sync"]) == 0  # fmt: skip
    train = str(bars_corpora["train"])
    np.save(tmp_path / "wrong.npy", np.ones((10, 7)))
    (tmp_path / "junk.npy").write_text("not an array")
    cases = [
        (
            ["--topics", "10", "--init", str(tmp_path / "wrong.npy")],
            "init: expected topic-word counts of shape (n_components, V) = (10, 25); got shape "
            "(10, 7)",
        ),
        (["--topics", "10", "--init", str(tmp_path / "junk.npy")], "cannot be read as a .npy"),
        (["--topics", "4", "--init", str(saved_model)], "has 10 topics; --topics is 4"),
        (["--topics", "10", "--init", str(other)], "different vocabulary"),
        (["--topics", "10", "--init", str(tmp_path / "nope")], "nope' is none of these"),
        (["--topics", "10", "--init", "plusplus"], "'plusplus' is none of these (no such file"),
        (["--topics", "10", "--init", str(bars_corpora["train"])], "params.json is missing"),
    ]
    for extra, message in cases:
        assert main(["fit", train, *extra, "--out", str(tmp_path / "m"), "--sync"]) == 2
        err = _shown(capsys.readouterr().err)
        assert err.startswith("lsdask: error: ") and message in err, err
    assert not (tmp_path / "m").exists()


def test_fit_overwrite(bars_corpora: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "m"
    argv = ["fit", str(bars_corpora["train"]), "--topics", "3", "--laps", "1", "--sparsity", "2",
            "--out", str(out), "--sync"]  # fmt: skip
    assert main(argv) == 0
    assert main([*argv, "--overwrite", "--seed", "9"]) == 0
    assert load_lda(out).random_state == 9


def test_topics_command(saved_model: Path, bars_corpora: dict[str, Path], capsys) -> None:
    assert main(["topics", str(saved_model), "--top", "4"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 11  # header, 10 topics
    assert lines[0].split()[:2] == ["topic", "share"]
    assert lines[1].split()[0] == "0" and len(lines[1].split()) == 6
    shares = [float(line.split()[1].rstrip("%")) for line in lines[1:]]
    assert sum(shares) == pytest.approx(100.0, abs=0.5) and min(shares) > 0  # 10 roundings
    code = main(["topics", str(saved_model), "--top", "5", "--corpus", str(bars_corpora["train"])])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    lines = captured.out.strip().splitlines()
    assert lines[0].split()[:5] == ["topic", "share", "UMass", "per", "pair"]
    # header, 10 topics, mean, then the scale (wrapped)
    assert " ".join(line.strip() for line in lines[12:]) == UMASS_SCALE
    scores = [float(line.split()[2]) for line in lines[1:11]]
    per_pair = [float(line.split()[3]) for line in lines[1:11]]
    assert all(s <= 0 for s in scores)
    np.testing.assert_allclose(per_pair, np.asarray(scores) / 10, atol=0.002)  # 5 words: 10 pairs
    mean = re.fullmatch(
        r"mean UMass coherence of 10 topics \(top 5 words, documents of .*\): "
        r"(-?[0-9.]+) summed over 10 word pairs, (-?[0-9.]+) per pair",
        lines[11],
    )
    assert mean is not None, lines[11]
    assert float(mean[1]) == pytest.approx(np.mean(scores), abs=0.01)
    assert float(mean[2]) == pytest.approx(np.mean(scores) / 10, abs=0.001)
    assert lines[12].startswith("UMass coherence: the sum over the n(n-1)/2 pairs")
    report = topic_report(saved_model, n_top=5, corpus=bars_corpora["train"])
    model = load_lda(saved_model)
    np.testing.assert_allclose(
        report.coherence, model.coherence(read_all(bars_corpora["train"]), 5)
    )


def test_topics_errors(saved_model: Path, bars_corpora: dict[str, Path], tmp_path: Path, capsys):
    assert main(["topics", str(tmp_path / "none")]) == 2
    assert "lsdask: error: no LDA model at" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["topics", str(tmp_path / "empty")]) == 2
    assert "params.json is missing" in capsys.readouterr().err
    assert main(["topics", str(saved_model), "--corpus", str(bars_corpora["other"])]) == 2
    assert "different vocabulary" in capsys.readouterr().err


def test_transform_command(saved_model: Path, bars_corpora: dict[str, Path], tmp_path: Path,
                           capsys) -> None:  # fmt: skip
    """On a 2-process LocalCluster (the default for a corpus of several row
    groups): one row group
    per batch, in corpus order, the in-process transform's weights."""
    out = tmp_path / "sub" / "weights.parquet"
    code = main(["transform", str(saved_model), str(bars_corpora["heldout"]), "--out", str(out)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "lsdask: Dask dashboard: http" in captured.err  # a LocalCluster was started
    assert "of 40 documents in 3 row groups" in captured.out
    one = TransformSummary(path="w.parquet", n_docs=1, n_batches=1, K=10, L=4, seconds=0.1)
    assert " in 1 row group to w.parquet" in format_transform_summary(one)  # not "1 row groups"
    assert sorted(p.name for p in out.parent.iterdir()) == ["weights.parquet"]
    f = pq.ParquetFile(out)
    assert f.num_row_groups == 3  # one per corpus batch (15 + 15 + 10 documents)
    table = f.read()
    assert str(table.schema.field("doc_id").type) == "int64"
    assert str(table.schema.field("topics").type) == "list<element: int32>"
    assert str(table.schema.field("weights").type) == "list<element: float>"
    np.testing.assert_array_equal(table.column("doc_id").to_numpy(), np.arange(1000, 1040))
    topics = table.column("topics").to_pylist()
    weights = table.column("weights").to_pylist()
    for k, w in zip(topics, weights, strict=True):
        assert 1 <= len(k) == len(w) == len(set(k)) <= 3
        assert all(0 <= t < 10 for t in k)
        assert sum(w) == pytest.approx(1.0, abs=1e-5)
        assert w == sorted(w, reverse=True)
    # the same weights as the model's transform of the whole corpus
    expected = load_lda(saved_model).transform(read_all(bars_corpora["heldout"]))
    for d, (k, w) in enumerate(zip(topics, weights, strict=True)):
        row = expected[d]
        got = np.zeros(10)
        got[k] = w
        np.testing.assert_allclose(got, row.toarray().ravel(), rtol=1e-6, atol=1e-7)


def test_transform_and_topics_take_in_part_files_added_since(
    saved_model: Path, bars_corpora: dict[str, Path], tmp_path: Path, capsys
) -> None:
    """As fit does, the other commands rescan the corpus: part files added since
    it was written are taken in, without a warning."""
    import shutil

    corpus = tmp_path / "c"
    shutil.copytree(bars_corpora["heldout"], corpus)
    first = sorted((corpus / "parts").iterdir())[0]
    shutil.copy(first, corpus / "parts" / "zz-new.parquet")  # a partition dropped in
    out = tmp_path / "w.parquet"
    assert main(["transform", str(saved_model), str(corpus), "--out", str(out), "--sync"]) == 0
    captured = capsys.readouterr()
    assert "of 80 documents in 6 row groups" in captured.out, captured.out
    assert "ignored" not in captured.err
    assert pq.ParquetFile(out).metadata.num_rows == 80
    assert main(["topics", str(saved_model), "--corpus", str(corpus)]) == 0
    assert "ignored" not in capsys.readouterr().err


def test_transform_errors(saved_model: Path, bars_corpora: dict[str, Path], tmp_path: Path,
                          capsys) -> None:  # fmt: skip
    out = tmp_path / "w.parquet"
    argv = [
        "transform",
        str(saved_model),
        str(bars_corpora["heldout"]),
        "--out",
        str(out),
        "--sync",
    ]
    assert main(argv) == 0
    assert main(argv) == 2
    assert "exists" in capsys.readouterr().err
    assert main([*argv, "--overwrite"]) == 0
    bad = ["transform", str(saved_model), str(bars_corpora["other"]), "--out", str(tmp_path / "x")]
    assert main(bad) == 2
    assert "different vocabulary" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["w.parquet"]


def test_transform_corpus_on_a_model_in_memory(saved_model: Path, bars_corpora, tmp_path):
    result = transform_corpus(
        load_lda(saved_model), bars_corpora["train"], tmp_path / "t.parquet", client="sync"
    )
    assert result.n_docs == 200 and result.n_batches == 4 and result.L == 3


def test_split_corpus(bars_corpora: dict[str, Path], tmp_path: Path) -> None:
    train, held = split_corpus(bars_corpora["train"], tmp_path / "a", tmp_path / "b",
                               heldout_fraction=0.25, random_state=1)  # fmt: skip
    assert train.n_docs + held.n_docs == 200 and 25 <= held.n_docs <= 75
    ids_a = read_all(train, return_doc_ids=True)[1]
    ids_b = read_all(held, return_doc_ids=True)[1]
    assert sorted([*ids_a, *ids_b]) == list(range(200))
    again = split_corpus(bars_corpora["train"], tmp_path / "c", tmp_path / "d",
                         heldout_fraction=0.25, random_state=1)  # fmt: skip
    np.testing.assert_array_equal(read_all(again[1], return_doc_ids=True)[1], ids_b)
    assert train.vocab == PIXELS
    with pytest.raises(ValueError, match="heldout_fraction must be in"):
        split_corpus(bars_corpora["train"], tmp_path / "e", tmp_path / "f", heldout_fraction=1)


# ingest ------------------------------------------------------------------------

TEXTS = [
    "the cat sat on the mat with another cat",
    "a dog chased the cat around the garden",
    "dogs and cats play in the garden all day",
    "the mat was red and the garden was green",
]


def _ingested(text: str) -> dict[str, str]:
    return dict(line.split(": ", 1) for line in text.strip().splitlines())


def test_ingest_text_folder(tmp_path: Path, capsys) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    for i, text in enumerate(TEXTS):
        (folder / f"d{i}.txt").write_text(f"Subject: x{i}\n\n{text}", encoding="latin-1")
    out = tmp_path / "corpus"
    code = main(["ingest", "text", str(folder), "--out", str(out), "--min-df", "2",
                 "--max-df", "1.0", "--docs-per-row-group", "3", "--strip-headers",
                 "--docs-per-file", "3"])  # fmt: skip
    captured = capsys.readouterr()
    assert code == 0, captured.err
    info = _ingested(captured.out)
    assert info["corpus"] == str(out)
    assert info["documents"] == "4 (0 empty)" and info["batches"] == "2 row groups"
    assert len(list((out / "parts").iterdir())) == 2  # one row group per part file
    corpus = Corpus.open(out)
    assert corpus.n_docs == 4 and "garden" in corpus.vocab and "subject" not in corpus.vocab
    assert "sat" not in corpus.vocab  # in one document only: min_df 2


def test_ingest_tokenizer_options(tmp_path: Path, capsys) -> None:
    csv = tmp_path / "docs.csv"
    csv.write_text("text\n" + "".join(f"{t}\n" for t in TEXTS))
    stop = tmp_path / "stop.txt"
    stop.write_text("the\nand\n\nwas\n")
    out = tmp_path / "a"
    assert main(["ingest", "table", str(csv), "--out", str(out), "--min-df", "1", "--max-df",
                 "1.0", "--stopwords", str(stop), "--add-stopwords", "cat,dog"]) == 0  # fmt: skip
    capsys.readouterr()
    vocab = Corpus.open(out).vocab
    assert "on" in vocab and "a" not in vocab  # not English stopwords: only the file's ...
    assert not {"the", "and", "was", "cat", "dog"} & set(vocab)  # ... and the added words
    tokenizer = Corpus.open(out).ingest_info["tokenizer"]
    assert tokenizer["stopwords"] == ["and", "cat", "dog", "the", "was"]
    # with --vocab CORPUS the corpus's tokenizer is taken: 'on' and 'with' are kept
    assert main(["ingest", "table", str(csv), "--out", str(tmp_path / "b"), "--vocab",
                 str(out)]) == 0  # fmt: skip
    capsys.readouterr()
    assert Corpus.open(tmp_path / "b").n_tokens == Corpus.open(out).n_tokens
    out = tmp_path / "c"
    assert main(["ingest", "table", str(csv), "--out", str(out), "--min-df", "1", "--max-df",
                 "1.0", "--stopwords", "none", "--token-pattern", r"\b\w\b"]) == 0  # fmt: skip
    capsys.readouterr()
    assert Corpus.open(out).vocab == ["a"]  # one-letter words only, and no stopwords
    assert main(["ingest", "table", str(csv), "--out", str(out), "--overwrite", "--min-df", "1",
                 "--add-stopwords", "garden"]) == 0  # fmt: skip
    capsys.readouterr()
    assert "garden" not in Corpus.open(out).vocab and "the" not in Corpus.open(out).vocab
    assert main(["ingest", "table", str(csv), "--out", str(tmp_path / "d"), "--stopwords",
                 str(tmp_path / "missing.txt")]) == 2  # fmt: skip
    err = _shown(capsys.readouterr().err)
    assert "--stopwords: " in err and "is not a file; expected english, none" in err
    assert main(["ingest", "table", str(csv), "--out", str(tmp_path / "d"), "--token-pattern",
                 "(unclosed"]) == 2  # fmt: skip
    assert "pattern must be a valid regular expression" in capsys.readouterr().err
    assert not (tmp_path / "d").exists()


def test_ingest_append_to_a_corpus(tmp_path: Path, capsys) -> None:
    """Retraining data added to a corpus from the command line: its vocabulary and
    tokenizer, a new part, doc_ids after the corpus's (ingesting apart and copying
    the part in numbered them from 0 again)."""
    csv = tmp_path / "docs.csv"
    csv.write_text("text\n" + "".join(f"{t}\n" for t in TEXTS))
    corpus = tmp_path / "c"
    assert main(["ingest", "table", str(csv), "--out", str(corpus), "--min-df", "1",
                 "--max-df", "1.0", "--add-stopwords", "garden"]) == 0  # fmt: skip
    capsys.readouterr()
    new = tmp_path / "new.csv"
    new.write_text("text\nthe cat in the garden\na red dog and a zebra\n")
    assert main(["ingest", "table", str(new), "--append-to", str(corpus)]) == 0
    out = capsys.readouterr().out
    assert f"appended to corpus: {corpus}, as parts/part-00001.parquet" in out
    assert "the corpus now holds 6 documents" in out and "documents: 2 (0 empty)" in out
    grown = Corpus.open(corpus)
    X, ids = read_all(grown, return_doc_ids=True)
    np.testing.assert_array_equal(ids, np.arange(6))
    words = grown.vocab
    assert "garden" not in words  # the corpus's own stopwords, inherited
    assert {words[i] for i in X[4].indices} == {"cat"}  # 'zebra' is outside the vocabulary
    assert {words[i] for i in X[5].indices} == {"red", "dog"}
    # --add-stopwords adds to the corpus's own tokenizer ('garden' stays a stopword)
    more = tmp_path / "more.csv"
    more.write_text("text\nred garden cat\n")
    assert main(["ingest", "table", str(more), "--append-to", str(corpus), "--add-stopwords",
                 "Cat"]) == 0  # fmt: skip
    capsys.readouterr()
    last = read_all(Corpus.open(corpus))[-1]
    assert {words[i] for i in last.indices} == {"red"}
    more.unlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c", "docs.csv", "new.csv"]
    # errors leave the corpus as it was
    before = (corpus / "manifest.json").read_bytes()
    assert main(["ingest", "table", str(new), "--append-to", str(corpus), "--min-df", "1"]) == 2
    assert "min_df prune a vocabulary built from the data" in capsys.readouterr().err
    assert main(["ingest", "table", str(new), "--append-to", str(corpus), "--vocab",
                 str(corpus)]) == 2  # fmt: skip
    assert "drop --vocab" in capsys.readouterr().err
    assert main(["ingest", "table", str(tmp_path / "missing.csv"), "--append-to",
                 str(corpus)]) == 2  # fmt: skip
    capsys.readouterr()
    assert (corpus / "manifest.json").read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c", "docs.csv", "new.csv"]
    with pytest.raises(SystemExit):
        main(["ingest", "table", str(new), "--append-to", str(corpus), "--out", str(corpus)])


def test_ingest_jsonl_table_with_imposed_vocab(tmp_path: Path, capsys) -> None:
    jsonl = tmp_path / "docs.jsonl"
    jsonl.write_text("".join(f'{{"title": "t{i}", "body": "{t}"}}\n' for i, t in enumerate(TEXTS)))
    base = tmp_path / "base"
    assert main(["ingest", "jsonl", str(jsonl), "--out", str(base), "--fields", "body",
                 "--min-df", "1", "--max-df", "1.0"]) == 0  # fmt: skip
    assert _ingested(capsys.readouterr().out)["documents"] == "4 (0 empty)"
    csv = tmp_path / "docs.csv"
    csv.write_text("id,text\n1,the cat and the zebra\n2,unknown words only\n")
    out = tmp_path / "table"
    assert main(["ingest", "table", str(csv), "--out", str(out), "--vocab", str(base)]) == 0
    info = _ingested(capsys.readouterr().out)
    assert info["documents"] == "2 (1 empty)"
    assert info["vocabulary"] == f"{Corpus.open(base).vocab_size} words"
    assert "dropped" in info
    assert Corpus.open(out).vocab == Corpus.open(base).vocab
    vocab_txt = tmp_path / "v.txt"
    vocab_txt.write_text("cat\nzebra\n")
    out2 = tmp_path / "table2"
    assert main(["ingest", "table", str(csv), "--column", "text", "--out", str(out2),
                 "--vocab", str(vocab_txt)]) == 0  # fmt: skip
    capsys.readouterr()
    assert Corpus.open(out2).vocab == ["cat", "zebra"]
    assert Corpus.open(out2).n_tokens == 2
    # pruning options do nothing to an imposed vocabulary: refused, not ignored
    out3 = tmp_path / "table3"
    assert main(["ingest", "table", str(csv), "--out", str(out3), "--vocab", str(base),
                 "--max-vocab", "10", "--min-df", "2"]) == 2  # fmt: skip
    err = _shown(capsys.readouterr().err)
    assert "min_df, max_vocab prune a vocabulary built from the data, but vocab= imposes" in err
    assert "(--vocab or --append-to on the command line), so they would do nothing" in err
    assert not out3.exists()


def test_ingest_table_format_and_delimiter_options(tmp_path: Path, capsys) -> None:
    """The messages name --format and --delimiter, the command line's options."""
    txt = tmp_path / "docs.txt"
    txt.write_text("text;id\nthe cat and the zebra;1\nzebra cat;2\n")
    assert main(["ingest", "table", str(txt), "--out", str(tmp_path / "a")]) == 2
    assert "(lsdask: --format csv|parquet)" in capsys.readouterr().err
    assert main(["ingest", "table", str(txt), "--format", "csv", "--out", str(tmp_path / "b"),
                 "--min-df", "1", "--max-df", "1.0"]) == 2  # fmt: skip
    assert "is the delimiter another than ','? Pass it" in capsys.readouterr().err
    semicolons = ["--format", "csv", "--delimiter", ";", "--min-df", "1", "--max-df", "1.0"]
    assert main(["ingest", "table", str(txt), "--out", str(tmp_path / "c"), *semicolons]) == 0
    assert Corpus.open(tmp_path / "c").vocab == ["cat", "zebra"]
    with pytest.raises(SystemExit):
        main(["ingest", "table", str(txt), "--out", ""])
    assert "argument --out: an empty path" in capsys.readouterr().err


def test_stderr_without_verbose_holds_warnings_and_notices_only(tmp_path: Path, capsys) -> None:
    """Without -v a warning reads ``lsdask: warning: ...`` and INFO lines stay out
    (the notice of the Dask dashboard: ``test_demo_on_local_cluster``)."""
    csv = tmp_path / "docs.csv"
    csv.write_text("id,text\n1,the cat and the zebra\n")
    vocab_txt = tmp_path / "v.txt"
    vocab_txt.write_text("cat\nZebra\n")
    assert main(["ingest", "table", str(csv), "--out", str(tmp_path / "c"),
                 "--vocab", str(vocab_txt)]) == 0  # fmt: skip
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("lsdask: warning: "), lines
    assert "'Zebra'" in lines[0]


def test_ingest_ldac_and_uci(tmp_path: Path, capsys) -> None:
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("alpha\nbeta\ngamma\n")
    dat = tmp_path / "c.dat"
    dat.write_text("2 0:3 2:1\n1 1:2\n3 0:1 1:1 2:1\n")
    assert main(["ingest", "ldac", str(dat), str(vocab), "--out", str(tmp_path / "l")]) == 0
    info = _ingested(capsys.readouterr().out)
    assert info["documents"] == "3 (0 empty)" and info["tokens"] == "9"
    docword = tmp_path / "docword.txt"
    docword.write_text("3\n3\n4\n1 1 3\n1 3 1\n3 2 5\n3 3 1\n")
    code = main(["ingest", "uci", str(docword), str(vocab), "--out", str(tmp_path / "u"),
                 "--max-vocab", "2", "--min-df", "1", "--max-df", "1.0"])  # fmt: skip
    captured = capsys.readouterr()
    assert code == 0, captured.err
    info = _ingested(captured.out)
    assert info["documents"] == "3 (1 empty)" and info["vocabulary"] == "2 words"


def test_ingest_errors(tmp_path: Path, capsys) -> None:
    assert main(["ingest", "ldac", str(tmp_path / "x.dat"), str(tmp_path / "v"),
                 "--out", str(tmp_path / "o")]) == 2  # fmt: skip
    err = _shown(capsys.readouterr().err)
    assert err.startswith("lsdask: error: ") and "x.dat" in err
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.txt").write_text("hello world")
    argv = ["ingest", "text", str(tmp_path / "d"), "--out", str(tmp_path / "o"),
            "--vocab", str(tmp_path / "missing.txt")]  # fmt: skip
    assert main(argv) == 2
    assert "--vocab" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["ingest", "text", str(tmp_path / "d"), "--out", "o", "--min-df", "abc"])
    assert "a document count (5) or a fraction (0.5)" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["ingest", "ldac", "a.dat", "--out", "o"])  # the vocabulary file is missing


# the bars LDA job and the corpus LDA pipeline ---------------------------------------


def test_run_bars_demo_learns_bars(tmp_path: Path) -> None:
    model = bars_lda(n_laps=10).set_params(client="sync")
    result = run_bars_demo(model, tmp_path, n_docs=600)
    assert result.n_docs == 540 and result.n_heldout == 60
    assert result.K == 10 and result.L == 4 and result.laps == 10 and result.alpha == 1.0
    assert result.model.batch_size == 135  # a quarter of the training documents
    assert model.batch_size is None and not hasattr(model, "n_laps_")  # a clone was fitted
    assert result.mean_l1 < 0.15  # every bar found
    assert sorted(result.match.tolist()) == list(range(10))
    assert math.isfinite(result.heldout_score) and result.heldout_score < 0
    assert result.topics_plot == str(tmp_path / "topics.png")
    assert_png(result.topics_plot)
    report = format_bars_report(result, title="bars")
    assert "mean L1 distance" in report and "nats/token" in report


def test_run_bars_demo_with_an_hdp_finds_the_ten_bars_from_thirty(tmp_path: Path) -> None:
    model = bars_hdp(30, n_laps=8).set_params(client="sync")
    result = run_bars_demo(model, tmp_path, n_docs=600)
    assert result.kind == "HDP" and result.start_K == 30 and result.K == 10
    assert result.k_trace[0] == 30 and result.k_trace[-1] == 10
    assert result.mean_l1 < 0.15 and sorted(result.match.tolist()) == list(range(10))
    assert result.k_plot == str(tmp_path / "hdp_k_elbo.png")
    assert_png(result.k_plot)
    assert_png(tmp_path / "hdp_topics.png")
    report = format_bars_report(result)
    assert "model: HDP, L=4, alpha=1; topics by lap: 30 -> " in report
    assert "(started at 30; the corpus has 10 true topics)" in report


def test_corpus_lda_pipeline(tmp_path: Path, capsys) -> None:
    module = _load_pipeline("corpus_lda")
    X, _ = make_bars_corpus(n_docs=120, doc_topic_prior=0.1, random_state=4)
    data = tmp_path / "data"
    data.mkdir()
    (data / "vocab.txt").write_text("".join(w + "\n" for w in PIXELS))
    lines = []
    for d in range(X.shape[0]):
        row = X[d]
        pairs = " ".join(f"{i}:{int(c)}" for i, c in zip(row.indices, row.data, strict=True))
        lines.append(f"{row.nnz} {pairs}\n")
    (data / "ap.dat").write_text("".join(lines))
    code = module.main(
        ["--data", str(data), "--work", str(tmp_path / "work"), "--topics", "6",
         "--sparsity", "2", "--laps", "2", "--sync", "--docs-per-row-group", "40", "--top", "4"]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0
    assert "documents: 120 (0 empty)" in out
    assert "heldout document completion:" in out
    assert "mean UMass coherence of 6 topics (top 4 words" in out
    for name in ("corpus", "train", "heldout"):
        assert Corpus.open(tmp_path / "work" / name).vocab == PIXELS
    assert load_lda(tmp_path / "work" / "model").n_components == 6
    with pytest.raises(SystemExit) as info:
        module.main(["--data", str(tmp_path / "none"), "--work", str(tmp_path / "w2"), "--sync"])
    assert info.value.code == 2


# the demo on a real LocalCluster ------------------------------------------------


def test_demo_on_local_cluster(tmp_path: Path, capsys) -> None:
    code = main(
        ["demo", "--out", str(tmp_path), "--workers", "2", "--laps", "3", "--components", "10",
         "--bars-laps", "8"]
    )  # fmt: skip
    captured = capsys.readouterr()
    assert code == 0, captured.err
    out = captured.out
    assert "local Dask cluster of 2 workers" in out
    # the dashboard's address is a notice, not a warning; other INFO lines stay out
    assert captured.err.count("lsdask: Dask dashboard: http") == 1, captured.err
    assert "warning: Dask" not in captured.err and "starting a Dask" not in captured.err
    assert "heldout log-likelihood per patch, L=4 vs dense" in out
    assert "9,387 train patches" in out and "9,387 heldout patches" in out
    assert "heaviest 5 clusters" in out
    assert "[2/3] LDA on the synthetic bars corpus" in out
    assert "1,800 train documents" in out and "model: LDA, K=10, L=4" in out
    assert "heldout document completion:" in out and "nats/token" in out
    assert "learned vs true bars: mean L1 distance" in out
    assert "[3/3] HDP on the same bars" in out
    assert re.search(r"topics by lap: 40 -> (\d+ -> )*10 \(started at 40", out), out
    for name in ("elbo.png", "clusters.png", "topics.png", "hdp_topics.png", "hdp_k_elbo.png"):
        assert str(tmp_path / name) in out
        assert_png(tmp_path / name)


def test_fit_init_gibbs(bars_corpora: dict[str, Path], tmp_path: Path, capsys) -> None:
    out = tmp_path / "gibbs_model"
    args = ["fit", str(bars_corpora["train"]), "--topics", "10", "--laps", "1", "--init", "gibbs"]
    start = ["--gibbs-sweeps", "5", "--gibbs-tokens", "900"]
    assert main([*args, *start, "--out", str(out), "--sync"]) == 0
    capsys.readouterr()
    model = load_lda(out)
    assert (model.init, model.gibbs_sweeps, model.gibbs_tokens) == ("gibbs", 5, 900)
    with pytest.raises(SystemExit):
        main([*args, "--gibbs-sweeps", "0", "--out", str(tmp_path / "m"), "--sync"])
    assert "--gibbs-sweeps" in capsys.readouterr().err


def test_ingest_keeps_the_records_own_ids(tmp_path: Path, capsys) -> None:
    jsonl = tmp_path / "docs.jsonl"
    jsonl.write_text(
        "".join(f'{{"n": {100 + 7 * i}, "body": "{t}"}}\n' for i, t in enumerate(TEXTS))
    )
    out = tmp_path / "c"
    argv = ["ingest", "jsonl", str(jsonl), "--out", str(out), "--fields", "body", "--id", "n",
            "--min-df", "1", "--max-df", "1.0"]  # fmt: skip
    assert main(argv) == 0, capsys.readouterr().err
    _, ids = read_all(out, return_doc_ids=True)
    assert ids.tolist() == [100 + 7 * i for i in range(len(TEXTS))]
    assert Corpus.open(out).ingest_info["id_field"] == "n"


def test_ingest_help_shows_the_functions_defaults() -> None:
    import inspect

    from lsdask import config
    from lsdask.cli.ingest import INGEST_DF_DEFAULTS
    from lsdask.io import ingest

    functions = {"text": ingest.ingest_text_folder, "jsonl": ingest.ingest_jsonl,
                 "table": ingest.ingest_table, "ldac": ingest.import_ldac,
                 "uci": ingest.import_uci}  # fmt: skip
    for kind, function in functions.items():
        params = inspect.signature(function).parameters
        shown = INGEST_DF_DEFAULTS.get(kind, {"min_df": "none", "max_df": "none"})
        for name in ("min_df", "max_df"):
            assert params[name].default is None, (kind, name)  # None: the defaults shown
        if kind in INGEST_DF_DEFAULTS:
            assert shown == {"min_df": config.DEFAULT_MIN_DF, "max_df": config.DEFAULT_MAX_DF}


def test_out_dot_is_a_path_with_a_name(tmp_path, monkeypatch, capsys) -> None:
    """`--out .` and `--out ..` name a folder with a name (outputs are renamed into place)."""
    from lsdask.cli.options import out_path

    monkeypatch.chdir(tmp_path)
    assert out_path(".") == tmp_path and out_path("..") == tmp_path.parent
    assert out_path("models/m") == Path("models/m")
    (tmp_path / "keep.txt").write_text("x")
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.txt").write_text("apple pie")
    assert main(["ingest", "text", str(folder), "--out", ".", "--min-df", "1"]) == 2
    assert "already exists" in capsys.readouterr().err


# fit --model hdp -------------------------------------------------------------


def test_fit_hdp_then_topics(bars_corpora: dict[str, Path], tmp_path: Path, capsys) -> None:
    """`lsdask fit --model hdp` saves an HDP folder (with k_elbo.png) that `lsdask
    topics` reads, printing each topic's weight E[beta_k], heaviest first."""
    from lsdask import HDP
    from lsdask.persist import load_model

    out = tmp_path / "hdp"
    code = main(
        ["fit", str(bars_corpora["train"]), "--model", "hdp", "--topics", "8", "--sparsity",
         "3", "--laps", "2", "--gamma", "4", "--moves", "none", "--out", str(out), "--sync"]
    )  # fmt: skip
    captured = capsys.readouterr()
    assert code == 0, captured.err
    text = captured.out
    assert "model: HDP, K=8 topics at the end (at most 8), L=3, algorithm=memo" in text
    assert "top 8 words of the 8 heaviest topics, by weight E[beta_k]:" in text
    shown = [float(line.split()[1]) for line in text.splitlines() if line.startswith("    ")]
    assert len(shown) == 8 and shown == sorted(shown, reverse=True)
    assert f"picture: {out / 'k_elbo.png'}" in text
    for picture in ("elbo.png", "k_elbo.png"):
        assert_png(out / picture)
    model = load_model(out)
    assert isinstance(model, HDP) and model.gamma == 4.0 and model.max_components == 8
    assert model.moves == ()
    assert main(["topics", str(out), "--top", "3"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].split()[:3] == ["topic", "E[beta]", "share"]
    assert len(lines) == 10  # header, 8 topics, the weights' total
    weights = [float(line.split()[1]) for line in lines[1:9]]
    np.testing.assert_allclose(weights, model.topic_weights_, atol=1e-4)
    assert weights == sorted(weights, reverse=True)
    assert lines[-1].startswith("HDP: 8 topics by weight E[beta_k]")


def test_fit_hdp_with_moves_ends_with_fewer_topics(
    bars_corpora: dict[str, Path], tmp_path: Path, capsys
) -> None:
    from lsdask.persist import load_model

    out = tmp_path / "hdp"
    code = main(
        ["fit", str(bars_corpora["train"]), "--model", "hdp", "--topics", "30", "--sparsity",
         "3", "--laps", "6", "--alpha", "1", "--out", str(out), "--sync"]
    )  # fmt: skip
    captured = capsys.readouterr()
    assert code == 0, captured.err
    model = load_model(out)
    assert model.moves == ("delete", "merge") and model.max_components == 30
    K = model.n_components_
    assert K < 30 and model.n_components_trace_[-1] == K
    assert f"model: HDP, K={K} topics at the end (at most 30)" in captured.out
    assert main(["topics", str(out), "--top", "3"]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith(f"HDP: {K} topics")


def test_fit_hdp_refuses_the_options_it_does_not_take(
    bars_corpora: dict[str, Path], tmp_path: Path, capsys
) -> None:
    train = str(bars_corpora["train"])
    cases = [
        (["--model", "hdp", "--algorithm", "svi"], "--model hdp does not take --algorithm svi"),
        (["--model", "hdp", "--alpha", "auto"], "--model hdp does not take --alpha auto"),
        (["--gamma", "2"], "--gamma: an option of --model hdp, not taken by --model lda"),
        (["--moves", "delete"], "--moves: an option of --model hdp, not taken by --model lda"),
    ]
    for extra, message in cases:
        argv = ["fit", train, "--topics", "4", "--out", str(tmp_path / "m"), "--sync", *extra]
        assert main(argv) == 2
        err = _shown(capsys.readouterr().err)
        assert err.startswith("lsdask: error: ") and message in err, err
        assert "Traceback" not in err
    assert not (tmp_path / "m").exists()
    with pytest.raises(SystemExit) as info:
        main(["fit", train, "--model", "hdp", "--topics", "4", "--moves", "split", "--out",
              str(tmp_path / "m"), "--sync"])  # fmt: skip
    assert info.value.code == 2
    assert (
        "expected delete, merge (comma-separated) or none; got 'split'" in capsys.readouterr().err
    )


def test_transform_dashboard_address(
    saved_model: Path, bars_corpora: dict[str, Path], tmp_path: Path, capsys, monkeypatch
) -> None:
    """`--dashboard-address` puts the started LocalCluster's dashboard where asked."""
    import lsdask.engine.dask_executor as dask_executor

    start = dask_executor.start_local_cluster
    bound: list[tuple[str, int]] = []

    def recording(n_workers: int, dashboard_address: str | None = None):
        cluster = start(n_workers, dashboard_address=dashboard_address)
        server = cluster.scheduler.http_server
        bound.extend(s.getsockname()[:2] for s in server._sockets.values())
        return cluster

    monkeypatch.setattr(dask_executor, "start_local_cluster", recording)
    out = tmp_path / "weights.parquet"
    code = main(
        ["transform", str(saved_model), str(bars_corpora["heldout"]), "--out", str(out),
         "--workers", "1", "--dashboard-address", "127.0.0.2:0"]
    )  # fmt: skip
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert bound and all(host == "127.0.0.2" and port > 0 for host, port in bound)
    assert pq.ParquetFile(out).metadata.num_rows == 40


@pytest.mark.parametrize(
    ("where", "other"),
    [(["--sync"], "--sync"), (["--scheduler", "tcp://127.0.0.1:1"], "--scheduler")],
)
def test_dashboard_address_refused_without_a_local_cluster(
    saved_model: Path, bars_corpora: dict[str, Path], tmp_path: Path, capsys, monkeypatch,
    where: list[str], other: str,
) -> None:  # fmt: skip
    import lsdask.engine.dask_executor as dask_executor

    def fail(*args, **kwargs):
        raise AssertionError("no cluster is started")

    monkeypatch.setattr(dask_executor, "start_local_cluster", fail)
    monkeypatch.setattr(dask_executor, "connect", fail)
    out = tmp_path / "weights.parquet"
    code = main(
        ["transform", str(saved_model), str(bars_corpora["heldout"]), "--out", str(out),
         *where, "--dashboard-address", "127.0.0.2:0"]
    )  # fmt: skip
    err = _shown(capsys.readouterr().err)
    assert code == 2
    assert err.startswith("lsdask: error: --dashboard-address") and other in err
    assert len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_fit_hdp_then_transform(bars_corpora: dict[str, Path], tmp_path: Path, capsys) -> None:
    """`lsdask transform` reads an HDP folder; its topic ids are the columns of
    HDP.transform (the fitted attributes' order, by E[beta_k])."""
    from lsdask import HDP
    from lsdask.persist import load_model

    model_dir = tmp_path / "hdp"
    code = main(
        ["fit", str(bars_corpora["train"]), "--model", "hdp", "--topics", "8", "--sparsity",
         "3", "--laps", "2", "--out", str(model_dir), "--sync"]
    )  # fmt: skip
    assert code == 0, capsys.readouterr().err
    out = tmp_path / "weights.parquet"
    code = main(
        ["transform", str(model_dir), str(bars_corpora["heldout"]), "--out", str(out), "--sync"]
    )  # fmt: skip
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "(K=8) of 40 documents" in captured.out
    table = pq.read_table(out)
    assert table.num_rows == 40
    model = load_model(model_dir)
    assert isinstance(model, HDP)
    expected = model.transform(read_all(bars_corpora["heldout"]))
    for d, (k, w) in enumerate(
        zip(table.column("topics").to_pylist(), table.column("weights").to_pylist(), strict=True)
    ):
        got = np.zeros(expected.shape[1])
        got[k] = w
        np.testing.assert_allclose(got, expected[d].toarray().ravel(), rtol=1e-6, atol=1e-7)


# every failure is one line ------------------------------------------------------


def test_a_manifest_that_is_a_folder_is_one_line_with_status_2(tmp_path: Path, capsys) -> None:
    corpus = tmp_path / "corpus"
    (corpus / "manifest.json").mkdir(parents=True)
    code = main(["fit", str(corpus), "--topics", "3", "--out", str(tmp_path / "m"), "--sync"])
    err = _shown(capsys.readouterr().err)
    assert code == 2, err
    assert err.startswith("lsdask: error: ") and err.count("\n") == 1 and "Traceback" not in err


def test_a_deeply_nested_manifest_is_one_line_with_status_2(
    bars_corpora: dict[str, Path], tmp_path: Path, capsys
) -> None:
    import shutil

    corpus = tmp_path / "corpus"
    shutil.copytree(bars_corpora["train"], corpus)
    (corpus / "manifest.json").write_text("[" * 100_000 + "]" * 100_000)
    code = main(["fit", str(corpus), "--topics", "3", "--out", str(tmp_path / "m"), "--sync"])
    err = _shown(capsys.readouterr().err)
    assert code == 2, err
    assert err.startswith("lsdask: error: ") and "Traceback" not in err


@pytest.mark.parametrize(
    ("error", "status", "text"),
    [
        (OSError(28, "No space left on device", "/data/out/arrays.npz"), 1,
         "No space left on device (/data/out/arrays.npz): free space on that file system"),
        (OSError(30, "Read-only file system", "/ro/m"), 1,
         "Read-only file system (/ro/m): the file system is read-only"),
        (MemoryError(), 1, "out of memory. Use smaller batches"),
        (FloatingPointError("overflow encountered in multiply"), 2,
         "the arithmetic overflowed (overflow encountered in multiply)"),
    ],
)  # fmt: skip
def test_environment_failures_are_one_line_with_their_status(
    bars_corpora: dict[str, Path], tmp_path: Path, capsys, monkeypatch, error, status, text
) -> None:
    """The failure is raised where the fit writes its model: the mapping of
    ``main`` is what is tested (a full disk cannot be made on demand here)."""
    import lsdask.cli.lda as lda_cli

    def fail(*args: object, **kwargs: object) -> None:
        raise error

    monkeypatch.setattr(lda_cli, "fit_corpus_lda", fail)
    code = main(["fit", str(bars_corpora["train"]), "--topics", "3", "--out",
                 str(tmp_path / "m"), "--sync"])  # fmt: skip
    err = _shown(capsys.readouterr().err)
    assert code == status, err
    assert err == f"lsdask: error: {err[len('lsdask: error: ') :]}" and err.count("\n") == 1
    assert text in err


def test_an_endless_line_is_refused_before_it_fills_the_memory(tmp_path: Path, capsys) -> None:
    from lsdask.errors import DataError

    """/dev/zero as JSON lines: one line without end. The reader stops at the limit
    and names the file and the line."""
    from lsdask.io.ingest.inputs import numbered_lines

    with open("/dev/zero", "rb") as f, pytest.raises(DataError, match=r"/dev/zero, line 1: longer"):
        list(numbered_lines(f, Path("/dev/zero"), limit=1 << 20))
    code = main(["ingest", "jsonl", "/dev/zero", "--out", str(tmp_path / "c")])
    err = _shown(capsys.readouterr().err)
    assert code == 2 and "line 1: longer than 67,108,864 bytes" in err, err


def test_a_picture_that_fails_leaves_no_model_and_no_empty_file(
    bars_corpora: dict[str, Path], tmp_path: Path, capsys, monkeypatch
) -> None:
    """The pictures are written inside the model's atomic swap: when one fails
    (the disk fills while writing it), nothing is left at --out, not even a 0-byte
    PNG, and no staging folder beside it."""
    import lsdask.plotting as plotting

    real = plotting.plot_elbo_trace

    def failing(values, path, **kwargs):
        if Path(path).name == "elbo_time.png":
            Path(path).write_bytes(b"")
            raise OSError(28, "No space left on device", str(path))
        return real(values, path, **kwargs)

    monkeypatch.setattr(plotting, "plot_elbo_trace", failing)
    out = tmp_path / "m"
    code = main(["fit", str(bars_corpora["train"]), "--topics", "3", "--laps", "1",
                 "--out", str(out), "--sync"])  # fmt: skip
    err = _shown(capsys.readouterr().err)
    assert code == 1 and "No space left on device" in err, err
    assert not out.exists() and list(tmp_path.iterdir()) == []
    monkeypatch.setattr(plotting, "plot_elbo_trace", real)
    assert main(["fit", str(bars_corpora["train"]), "--topics", "3", "--laps", "1",
                 "--out", str(out), "--sync"]) == 0  # fmt: skip
    assert {"elbo.png", "elbo_time.png", "params.json"} <= {p.name for p in out.iterdir()}


@pytest.mark.parametrize(
    ("command", "groups"),
    [
        ("fit", {"the model:": "--sparsity", "--model hdp:": "--gamma", "learning:": "--laps",
                 "the start (--init):": "--gibbs-tokens", "--algorithm svi-gibbs:":
                 "--gibbs-burnin", "--algorithm esvi:": "--blocks",
                 "checkpoints, locks and where the fit runs:": "--no-lock"}),
        ("fit-gmm", {"the model:": "--covariance", "learning:": "--laps",
                     "--algorithm esvi:": "--blocks",
                     "checkpoints and where the fit runs:": "--resume"}),
    ],
)  # fmt: skip
def test_help_groups_the_options_by_model_and_algorithm(command, groups, capsys) -> None:
    from lsdask.cli.parser import build_parser

    with pytest.raises(SystemExit):
        build_parser().parse_args([command, "--help"])
    text = capsys.readouterr().out
    sections = {}
    for block in text.split("\n\n"):
        title, _, body = block.partition("\n")
        sections[title.strip()] = body
    for title, option in groups.items():
        assert title in sections, (title, list(sections))
        assert f"  {option}" in sections[title], (title, option)


def test_a_fit_logged_to_a_file_says_each_start_phase_and_lap(tmp_path) -> None:
    from tests.lsdask_processes import PROGRESS_LINE, run_lsdask, without_progress

    X, _ = make_bars_corpus(n_docs=120, doc_length=30, random_state=0)
    Corpus.write(tmp_path / "c", X, [f"w{i}" for i in range(X.shape[1])], docs_per_row_group=40)
    done = run_lsdask("fit", tmp_path / "c", "--topics", "4", "--laps", "2", "--sync",
                      "--gibbs-sweeps", "20", "--out", tmp_path / "m")  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    # stderr is a pipe: no bar, one line per phase and lap instead of silence
    progress = [line[len("lsdask [00:00:00] ") :] for line in lines if PROGRESS_LINE.match(line)]
    assert any(line.startswith("fitting LDA K=4") for line in progress), lines
    assert any(line.startswith("Gibbs init: 20 sweeps") for line in progress), lines
    assert [line.split(":")[0] for line in progress if ": ELBO " in line] == ["lap 1", "lap 2"]
    assert without_progress(done.stderr) == [], lines


def test_progress_lines_stay_off_a_terminal_without_v(monkeypatch) -> None:
    from lsdask.cli import app
    from lsdask.config import NOTICE, PROGRESS

    def record(**extra):
        rec = logging.LogRecord("lsdask.learn", logging.INFO, __file__, 1, "m", None, None)
        rec.__dict__.update(extra)
        return rec

    monkeypatch.setattr(app, "_stderr_is_terminal", lambda: True)
    assert not app._warnings_and_notices(record(**PROGRESS))
    assert app._warnings_and_notices(record(**NOTICE))
    assert not app._warnings_and_notices(record())
    monkeypatch.setattr(app, "_stderr_is_terminal", lambda: False)
    assert app._warnings_and_notices(record(**PROGRESS))
    assert not app._warnings_and_notices(record())


def test_the_first_run_of_a_version_says_that_it_compiles(tmp_path, monkeypatch, capsys) -> None:
    from lsdask.cli import app
    from lsdask.kernels import cache

    monkeypatch.setenv("LSDASK_CACHE_DIR", str(tmp_path / "cache"))
    assert not cache.kernels_compiled()
    missing = tmp_path / "none"
    assert main(["fit", str(missing), "--topics", "2", "--out", str(tmp_path / "m")]) == 2
    err = _shown(capsys.readouterr().err)
    assert "first run of this lsdask version: compiling its numba kernels once" in err
    assert str(cache.cache_dir()) in err
    kernels = cache.cache_dir() / "kernels"
    kernels.mkdir(parents=True)
    (kernels / "topl.topl_rows-40.py311.nbi").write_bytes(b"")
    assert cache.kernels_compiled()
    assert main(["fit", str(missing), "--topics", "2", "--out", str(tmp_path / "m")]) == 2
    assert "compiling" not in capsys.readouterr().err
    assert "ingest" not in app.COMPILING
