"""Tests for the ``lsdask`` command line and the patch-GMM pipeline."""

from __future__ import annotations

import importlib.util
import logging
import math
import subprocess
import sys
from pathlib import Path

import matplotlib.image
import numpy as np
import pytest
from PIL import Image

from lsdask.cli import fit_and_report, format_report, main
from lsdask.io.patches import write_patch_store

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


@pytest.fixture(scope="module")
def pipeline_module():
    path = REPO_ROOT / "pipelines" / "patch_gmm.py"
    spec = importlib.util.spec_from_file_location("patch_gmm_pipeline", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# fit-gmm ---------------------------------------------------------------------


def test_fit_gmm_sync(patch_store: dict, tmp_path: Path, capsys) -> None:
    out = tmp_path / "fit"
    code = main(
        [
            "fit-gmm", patch_store["train"]["path"],
            "--components", "3", "--sparsity", "2", "--laps", "2",
            "--heldout", patch_store["heldout"]["path"],
            "--out", str(out), "--sync", "--seed", "1",
        ]
    )  # fmt: skip
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "K=3" in captured.out and "L=2" in captured.out
    assert "heldout log-likelihood per patch, L=2:" in captured.out
    assert f"{patch_store['train']['n_patches']:,} train rows" in captured.out
    assert_png(out / "elbo.png")
    assert_png(out / "clusters.png")  # 64 features from an 8x8 patch store


def test_fit_gmm_without_out_writes_nothing(patch_store: dict, tmp_path: Path, capsys) -> None:
    code = main(
        ["fit-gmm", patch_store["train"]["path"], "--components", "2", "--laps", "1",
         "--covariance", "diag", "--algorithm", "vb", "--sync"]
    )  # fmt: skip
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "L=dense" in captured.out
    assert "pictures" not in captured.out


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
    err = capsys.readouterr().err
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
    result = fit_and_report(
        patch_store["train"]["path"],
        tmp_path,
        heldout=patch_store["heldout"]["path"],
        n_components=3,
        sparsity=1,
        n_laps=2,
        random_state=0,
        client="sync",
        n_top=2,
    )
    assert result["runs"] == ["L=1", "dense"]
    assert result["n_train"] == patch_store["train"]["n_patches"]
    assert result["n_heldout"] == patch_store["heldout"]["n_patches"]
    for label in result["runs"]:
        assert math.isfinite(result["heldout_score"][label])
        assert result["laps"][label] >= 1
        assert result["seconds"][label] > 0
    sparse, dense = result["heldout_score"]["L=1"], result["heldout_score"]["dense"]
    assert result["heldout_diff_percent"] == pytest.approx(100 * (sparse - dense) / abs(dense))
    assert len(result["top_weights"]) == 2
    assert result["top_weights"][0] >= result["top_weights"][1]
    assert result["top_weights"][0] == pytest.approx(
        result["models"]["L=1"].weights_[result["top_clusters"][0]]
    )
    report = format_report(result)
    assert "L=1 vs dense" in report and "%" in report
    assert_png(result["elbo_plot"])
    assert_png(result["clusters_plot"])


def test_fit_and_report_non_patch_rows(tmp_path: Path, rng: np.random.Generator) -> None:
    """Rows that are not square patches: an ELBO plot but no cluster picture."""
    X = np.concatenate([rng.normal(-3, 1, size=(150, 3)), rng.normal(3, 1, size=(150, 3))])
    result = fit_and_report(
        X, tmp_path, n_components=2, sparsity=None, n_laps=2, covariance_type="full",
        client="sync",
    )  # fmt: skip
    assert result["runs"] == ["dense"]
    assert result["n_heldout"] == 0 and result["heldout_score"]["dense"] is None
    assert result["heldout_diff_percent"] is None
    assert result["clusters_plot"] is None
    assert_png(result["elbo_plot"])
    assert "no heldout data" in format_report(result)


def test_pipeline_on_synthetic_images(pipeline_module, tmp_path: Path) -> None:
    rng = np.random.default_rng(11)
    images = [synthetic_image(rng) for _ in range(3)]
    result = pipeline_module.run_patch_gmm(
        images,
        tmp_path / "run",
        n_components=3,
        sparsity=2,
        n_laps=2,
        client="sync",
        batch_size=60,
        heldout_fraction=0.34,
    )
    assert result["patches"]["train"]["n_images"] == 2
    assert result["patches"]["heldout"]["n_images"] == 1
    assert result["n_train"] == result["patches"]["train"]["n_patches"] > 0
    assert result["n_components"] == 3 and result["sparsity"] == 2
    assert set(result["seconds"]) == {"L=2", "dense"}
    assert all(math.isfinite(v) for v in result["heldout_score"].values())
    assert result["elbo_plot"] == str(tmp_path / "run" / "elbo.png")
    assert_png(result["elbo_plot"])
    assert_png(result["clusters_plot"])


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
        pipeline_module.run_patch_gmm(tmp_path / "missing", tmp_path / "out", client="sync")


# the demo on a real LocalCluster ------------------------------------------------


def test_demo_on_local_cluster(tmp_path: Path, capsys) -> None:
    code = main(["demo", "--out", str(tmp_path), "--workers", "2", "--laps", "3"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    out = captured.out
    assert "local Dask cluster of 2 workers" in out
    assert "heldout log-likelihood per patch, L=4 vs dense" in out
    assert "16,695 train patches" in out
    assert "heaviest 5 clusters" in out
    for name in ("elbo.png", "clusters.png"):
        assert str(tmp_path / name) in out
        assert_png(tmp_path / name)
