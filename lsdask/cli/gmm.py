"""``lsdask fit-gmm``: a Gaussian mixture fitted to the rows of a Zarr array.

The model's options come from :data:`lsdask.estimators.params.GAUSSIAN_PARAMS`
(:mod:`lsdask.cli.params`); the command builds the estimator and runs
:func:`lsdask.jobs.patch_gmm.fit_and_report` on it.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from lsdask.cli.options import add_fit_options, out_path
from lsdask.cli.params import add_params, params_from_args, run_params
from lsdask.estimators.gaussian import GaussianMixture
from lsdask.estimators.params import GAUSSIAN_PARAMS
from lsdask.jobs import commit
from lsdask.jobs.patch_gmm import PATCH_ALPHA, fit_and_report, format_report
from lsdask.persist import check_save_target, save_gmm

__all__ = ["add_parser", "run"]

#: the estimator's options, by their group in --help
MODEL_OPTIONS = ("n_components", "sparsity", "covariance_type", "alpha")
LEARNING_OPTIONS = ("algorithm", "n_laps", "batch_size", "batches_per_update", "random_state")
ESVI_OPTIONS = ("n_blocks", "schedule")
FIT_OPTIONS = (*MODEL_OPTIONS, *LEARNING_OPTIONS, *ESVI_OPTIONS)


def add_parser(sub: Any) -> None:
    fit = sub.add_parser(
        "fit-gmm",
        help="fit a Gaussian mixture to a Zarr array",
        description="Fit an (L-sparse) Gaussian mixture to the rows of a 2-D Zarr array.",
    )
    fit.add_argument("zarr_path", type=Path, metavar="ZARR_PATH", help="training Zarr array")
    output = fit.add_argument_group("output and scoring")
    output.add_argument("--heldout", type=Path, metavar="ZARR_PATH", help="heldout Zarr array")
    output.add_argument("--out", type=out_path, help="folder for elbo.png and clusters.png")
    output.add_argument(
        "--save", type=out_path, metavar="MODEL_DIR",
        help="save the fitted model there (lsdask.persist.load_gmm reads it back)",
    )  # fmt: skip
    output.add_argument(
        "--overwrite", action="store_true", help="replace an existing model at --save"
    )
    add_params(fit.add_argument_group("the model"), GAUSSIAN_PARAMS, MODEL_OPTIONS,
               alpha=PATCH_ALPHA)  # fmt: skip
    add_params(fit.add_argument_group("learning"), GAUSSIAN_PARAMS, LEARNING_OPTIONS)
    add_params(fit.add_argument_group("--algorithm esvi"), GAUSSIAN_PARAMS, ESVI_OPTIONS)
    add_fit_options(
        fit.add_argument_group("checkpoints and where the fit runs"),
        "a finished run gets --laps more laps over the array as it is now (chunks appended "
        "to it are taken in)",
    )


def run(args: argparse.Namespace) -> int:
    for name, path in (("ZARR_PATH", args.zarr_path), ("--heldout", args.heldout)):
        if path is not None and not path.exists():
            raise FileNotFoundError(f"{name}: no Zarr array at {str(path)!r}")
    if args.save is not None:
        check_save_target(args.save, args.overwrite)  # before the fit, not after it
    model = GaussianMixture(**params_from_args(args, FIT_OPTIONS), **run_params(args))
    report = fit_and_report(
        model,
        str(args.zarr_path),
        out_dir=args.out,
        heldout=None if args.heldout is None else str(args.heldout),
        compare_dense=False,
    )
    if args.save is None:
        commit.committed("the fit")
    else:
        with commit.output_step(f"the model in {args.save}"):
            saved = save_gmm(model, args.save, overwrite=args.overwrite)
    print(format_report(report, title=f"lsdask fit-gmm {args.zarr_path}"))
    if args.save is not None:
        print(f"model: saved to {saved}")
    return 0
