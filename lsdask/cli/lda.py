"""``lsdask fit``, ``topics`` and ``transform``: LDA (or the HDP) on a Parquet corpus.

``fit`` takes the model's options from :data:`lsdask.estimators.params.LDA_PARAMS`
(:mod:`lsdask.cli.params`), and with ``--model hdp`` those of
:data:`~lsdask.estimators.params.HDP_PARAMS`: the options both tables have are
added once (LDA's) and their values checked against the HDP's option, the
HDP's own (``--gamma``) are added too and refused with ``--model lda``. It
builds the estimator and runs :func:`lsdask.jobs.corpus_lda.fit_corpus_lda`
on it; ``topics`` and ``transform`` read a saved model
(:mod:`lsdask.jobs.topics`, :mod:`lsdask.jobs.transform`).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import sys
from typing import Any

from lsdask.cli.ingest import add_lock_options
from lsdask.cli.options import (
    add_execution,
    add_fit_options,
    add_verbose,
    client_from_args,
    out_path,
    path_or_url,
)
from lsdask.cli.params import add_params, params_from_args, run_params
from lsdask.cli.tables import add_table_options, table_from_args
from lsdask.estimators.hdp import HDP
from lsdask.estimators.lda import LDA
from lsdask.estimators.params import HDP_PARAMS, LDA_PARAMS, Param
from lsdask.io.locks import lock_settings
from lsdask.io.stores import is_store_url
from lsdask.jobs.corpus_lda import fit_corpus_lda, format_fit_report
from lsdask.jobs.score import format_score, score_model
from lsdask.jobs.table_lda import fit_table_lda
from lsdask.jobs.topics import FORMATS, topic_report, write_report
from lsdask.jobs.transform import format_transform_summary, transform_corpus
from lsdask.persist.on_store import staged_for_store
from lsdask.persist.resume import store_checkpoints
from lsdask.validation import parse_nonnegative_int, parse_positive_int

__all__ = [
    "add_fit",
    "add_score",
    "add_topics",
    "add_transform",
    "run_fit",
    "run_score",
    "run_topics",
    "run_transform",
]

#: ``fit``'s estimator options, by their group in --help
MODEL_OPTIONS = ("n_components", "sparsity", "alpha", "eta", "restarts")
LEARNING_OPTIONS = ("algorithm", "n_laps", "batches_per_update", "random_state", "early_stopping")
START_OPTIONS = ("init", "gibbs_sweeps", "gibbs_tol", "gibbs_tokens")
#: every model option of `lsdask fit` that both models take
FIT_OPTIONS = (*MODEL_OPTIONS, *LEARNING_OPTIONS, *START_OPTIONS)
#: the HDP's parameters whose option ``fit --model lda`` does not take
HDP_ONLY = ("gamma", "moves")
#: LDA's parameters of ``--algorithm svi-gibbs`` and of ``esvi``, whose options
#: ``fit --model hdp`` does not take
SVI_GIBBS_ONLY = (
    "gibbs_burnin", "gibbs_samples", "gibbs_estimator", "gibbs_weights", "gibbs_prune",
    "minibatch_size",
)  # fmt: skip
ESVI_ONLY = (
    "n_blocks", "topk", "topk_rule", "esvi_iters", "esvi_tol", "esvi_dtype", "pi_sync",
    "schedule",
)  # fmt: skip
LDA_ONLY = (*SVI_GIBBS_ONLY, *ESVI_ONLY)


def add_fit(sub: Any) -> None:
    fit = sub.add_parser(
        "fit",
        help="fit LDA (or the HDP) to a Parquet corpus and save the model",
        description=(
            "Fit L-sparse LDA to a Parquet corpus (one batch per row group), save the model "
            "and elbo.png in MODEL_DIR, and print the top words of the first topics. With "
            "--model hdp, fit the HDP topic model with at most --topics topics instead: it "
            "also saves k_elbo.png and reports each topic's weight E[beta_k]."
        ),
    )
    fit.add_argument(
        "corpus", type=path_or_url, nargs="?", metavar="CORPUS",
        help="Parquet corpus directory (or --table: a table read in place)",
    )  # fmt: skip
    add_table_options(fit.add_argument_group("a table read in place (docs/tables.md)"))
    output = fit.add_argument_group("output and scoring")
    output.add_argument(
        "--out", type=out_path, required=True, metavar="MODEL_DIR", help="model folder"
    )
    output.add_argument("--overwrite", action="store_true", help="replace an existing MODEL_DIR")
    output.add_argument(
        "--heldout", type=path_or_url, metavar="CORPUS", help="heldout corpus to score"
    )
    model = fit.add_argument_group("the model")
    model.add_argument(
        "--model", choices=("lda", "hdp"), default="lda",
        help="lda (default) or hdp, the HDP topic model (--topics is then its most topics)",
    )  # fmt: skip
    add_params(model, LDA_PARAMS, MODEL_OPTIONS)
    # the HDP's own: absent from the namespace unless given
    add_params(fit.add_argument_group("--model hdp"), HDP_PARAMS, HDP_ONLY)
    add_params(fit.add_argument_group("learning"), LDA_PARAMS, LEARNING_OPTIONS)
    add_params(fit.add_argument_group("the start (--init)"), LDA_PARAMS, START_OPTIONS)
    add_params(fit.add_argument_group("--algorithm svi-gibbs"), LDA_PARAMS, SVI_GIBBS_ONLY)
    add_params(fit.add_argument_group("--algorithm esvi"), LDA_PARAMS, ESVI_ONLY)
    for action in fit._actions:
        if action.dest in HDP_ONLY + LDA_ONLY:
            action.default = argparse.SUPPRESS
    runs = fit.add_argument_group("checkpoints, locks and where the fit runs")
    add_fit_options(
        runs,
        "a finished run gets --laps more laps over the corpus as it is now (part files added "
        "to or removed from it are taken in), none where the same command finished over the "
        "same corpus; replaces the model in --out",
    )
    add_lock_options(runs, "with --checkpoint/--resume: ")


def _option_value(param: Param, value: Any) -> Any:
    """``value``, as the LDA option of the same flag parsed it, checked against the
    HDP's option ``param``: one of its choices, and of its type."""
    option = param.option
    assert option is not None
    shared = LDA_PARAMS[param.name if param.name != "max_components" else "n_components"]
    assert shared.option is not None and shared.option.flag == option.flag
    try:
        if option.choices is not None and value not in option.choices:
            raise ValueError(f"choose from {', '.join(option.choices)}")
        if option.type is not None and option.type is not shared.option.type:
            value = option.type(str(value))
    except (ValueError, TypeError, argparse.ArgumentTypeError) as err:
        text = param.help.format(default=param.default)
        raise ValueError(
            f"--model hdp does not take {option.flag} {value} ({err}); "
            f"the HDP's {option.flag} is the {text}"
        ) from None
    return value


def _hdp_params(args: argparse.Namespace) -> dict[str, Any]:
    """``fit --model hdp``'s parameters: the shared options' values (checked against
    the HDP's options) and the HDP's own, their table's defaults where not given."""
    values = params_from_args(args, FIT_OPTIONS)
    values["max_components"] = values.pop("n_components")
    params = {name: _option_value(HDP_PARAMS[name], value) for name, value in values.items()}
    for name in HDP_ONLY:
        params[name] = getattr(args, name, HDP_PARAMS[name].default)
    return params


def build_fit_model(args: argparse.Namespace) -> LDA:
    """The estimator of ``lsdask fit``'s options: an :class:`LDA`, or with
    ``--model hdp`` an :class:`HDP`. An option of the other model (``--gamma``
    with LDA, ``--algorithm svi`` or ``--alpha auto`` with the HDP) is a
    ``ValueError``."""
    if args.model == "hdp":
        lda_only = [LDA_PARAMS[name].option for name in LDA_ONLY if hasattr(args, name)]
        if lda_only:
            flags = ", ".join(option.flag for option in lda_only if option is not None)
            raise ValueError(
                f"{flags}: an option of LDA's --algorithm svi-gibbs or esvi, not taken by "
                "--model hdp"
            )
        return HDP(**_hdp_params(args), **run_params(args))
    given = [HDP_PARAMS[name].option for name in HDP_ONLY if hasattr(args, name)]
    if given:
        flags = ", ".join(option.flag for option in given if option is not None)
        raise ValueError(f"{flags}: an option of --model hdp, not taken by --model lda")
    own = {name: getattr(args, name, LDA_PARAMS[name].default) for name in LDA_ONLY}
    return LDA(**params_from_args(args, FIT_OPTIONS), **own, **run_params(args))


def run_fit(args: argparse.Namespace) -> int:
    """``lsdask fit``; a store URL as ``--out`` or checkpoint folder is written
    through a local folder committed to the store (docs/storage.md)."""
    out_url = args.out if is_store_url(args.out) else None
    with contextlib.ExitStack() as stack:
        if out_url is not None:
            overwrite = args.overwrite or args.resume is not None
            args.out = stack.enter_context(staged_for_store(out_url, overwrite=overwrite))
        folder = args.resume or args.checkpoint
        if is_store_url(folder):
            algorithm = getattr(args, "algorithm", "memo")
            local = stack.enter_context(store_checkpoints(str(folder), None, algorithm))
            given = (args.resume, args.checkpoint)  # what messages name
            stack.callback(lambda: setattr(args, "resume", given[0]))
            stack.callback(lambda: setattr(args, "checkpoint", given[1]))
            if args.resume is not None:
                args.resume = local
            else:
                args.checkpoint = local
        report, title = _fit(args)
    if out_url is not None:
        report.model_dir = out_url
    print(format_fit_report(report, title=title))
    return 0


def _fit(args: argparse.Namespace) -> tuple[Any, str]:
    """Run the fit job of ``args``: its report and the report's title."""
    table = table_from_args(args, args.corpus)
    model = build_fit_model(args)
    if table is not None:
        if args.heldout is not None:
            raise ValueError("--heldout scores a corpus; it does not go with --table yet")
        with lock_settings(wait=args.wait, enabled=not args.no_lock):
            try:
                report = fit_table_lda(
                    model,
                    table,
                    out_dir=args.out,
                    overwrite=args.overwrite or args.resume is not None,
                )
            except ImportError as err:  # a store's or deltalake's package: one line
                raise ValueError(str(err)) from err
        return report, f"lsdask fit --table {args.table}"
    # the checkpoint folder's lock: another fit on it is waited for or refused
    with lock_settings(wait=args.wait, enabled=not args.no_lock):
        report = fit_corpus_lda(
            model,
            args.corpus,
            out_dir=args.out,
            heldout=args.heldout,
            overwrite=args.overwrite or args.resume is not None,
            command_id=command_id(getattr(args, "command_line", None)),
        )
    return report, f"lsdask fit {args.corpus}"


def command_id(argv: list[str] | None) -> str | None:
    """A hash of the command's arguments: the same command rerun has the same id.
    ``--checkpoint DIR`` counts as ``--resume DIR`` (an interrupted run is continued
    with the latter)."""
    if argv is None:
        return None
    words = ["--resume" if w == "--checkpoint" else w for w in argv]
    return hashlib.sha256("\0".join(words).encode("utf-8")).hexdigest()[:16]


def add_topics(sub: Any) -> None:
    topics = sub.add_parser(
        "topics",
        help="print or export a saved LDA or HDP model's topics (with coherence over a corpus)",
        description=(
            "Print each topic's top words; with --corpus, UMass coherence too: summed over "
            "the n(n-1)/2 pairs of the top n words, and per pair (comparable across --top). "
            "--format json or csv exports the topics with their words' probabilities."
        ),
    )
    topics.add_argument("model_dir", type=path_or_url, metavar="MODEL_DIR", help="saved model")
    topics.add_argument(
        "--top", type=parse_positive_int, default=10, help="words per topic (default 10)"
    )
    topics.add_argument("--corpus", type=path_or_url, metavar="CORPUS", help="corpus for coherence")
    topics.add_argument(
        "--format", choices=tuple(FORMATS), default="text",
        help="text (default: a table), json (one object) or csv (one row per topic)",
    )  # fmt: skip
    topics.add_argument(
        "--out", type=out_path, metavar="FILE", help="write to FILE (replaced) instead of stdout"
    )
    add_verbose(topics, argparse.SUPPRESS)


def run_topics(args: argparse.Namespace) -> int:
    report = topic_report(args.model_dir, n_top=args.top, corpus=args.corpus)
    text = FORMATS[args.format](report)
    if args.out is None:
        sys.stdout.write(text)
    else:
        write_report(text, args.out)
    return 0


def add_score(sub: Any) -> None:
    score = sub.add_parser(
        "score",
        help="score a saved LDA or HDP model on heldout documents (nats/token, perplexity)",
        description=(
            "Score a saved model on HELDOUT_CORPUS by heldout document completion, the "
            "score `lsdask fit --heldout` reports: each document's word types are split "
            "80/20 at random, its topic weights fit on the 80% and the 20% predicted. "
            "Prints the log-likelihood per scored token (nats/token), the perplexity "
            "exp(-nats/token), the documents and tokens scored, and the model's K and "
            "document-topic prior (its learned alpha_k where it learned them)."
        ),
    )
    score.add_argument("model_dir", type=path_or_url, metavar="MODEL_DIR", help="saved model")
    score.add_argument(
        "heldout",
        type=path_or_url,
        metavar="HELDOUT_CORPUS",
        help="Parquet corpus over its vocabulary",
    )
    score.add_argument(
        "--seed", type=parse_nonnegative_int, default=0,
        help="seed of the 80/20 split (default 0, that of fit --heldout)",
    )  # fmt: skip
    add_verbose(score, argparse.SUPPRESS)


def run_score(args: argparse.Namespace) -> int:
    print(format_score(score_model(args.model_dir, args.heldout, seed=args.seed)))
    return 0


def add_transform(sub: Any) -> None:
    transform = sub.add_parser(
        "transform",
        help="write each document's top-L topic weights to Parquet",
        description=(
            "Write one row per document of CORPUS: doc_id, topics and weights (its top-L "
            "document-topic weights under the saved model), one row group per corpus batch. "
            "The batches are transformed on a Dask cluster (a local one of --workers "
            "processes by default, for a corpus of more than one row group)."
        ),
    )
    transform.add_argument(
        "model_dir", type=path_or_url, metavar="MODEL_DIR", help="saved model (LDA or HDP)"
    )
    transform.add_argument("corpus", type=path_or_url, metavar="CORPUS", help="Parquet corpus")
    transform.add_argument(
        "--out", type=out_path, required=True, help="Parquet file (or store URL) to write"
    )
    transform.add_argument("--overwrite", action="store_true", help="replace an existing file")
    add_execution(transform, scheduler=True)
    add_verbose(transform, argparse.SUPPRESS)


def run_transform(args: argparse.Namespace) -> int:
    client, n_workers = client_from_args(args)
    summary = transform_corpus(
        args.model_dir, args.corpus, args.out, overwrite=args.overwrite, client=client,
        n_workers=n_workers,
    )  # fmt: skip
    print(format_transform_summary(summary))
    return 0
