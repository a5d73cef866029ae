"""Estimator options built from the estimators' parameter tables.

A command names the parameters it takes (:func:`add_params`): each
:class:`~lsdask.estimators.params.Param` with an
:class:`~lsdask.estimators.params.Option` becomes an argparse argument with
the table's flag, type, default and help, stored under the parameter's name,
so that :func:`params_from_args` reads them back as the estimator's keyword
arguments. :func:`run_params` gives the parameters of the shared options
(where the fit runs, its log, its checkpoints).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from lsdask.cli.options import client_from_args
from lsdask.estimators.params import SAME, ParamTable

__all__ = ["add_params", "params_from_args", "run_params"]


def add_params(
    parser: argparse._ActionsContainer, table: ParamTable, names: Sequence[str], **defaults: Any
) -> None:
    """Add the options of the parameters ``names`` of ``table``, in that order;
    ``defaults`` replaces a parameter's default where the command has its own."""
    for name in names:
        param = table[name]
        option = param.option
        if option is None:
            raise ValueError(f"the parameter {name!r} has no command-line option")
        default = param.default if option.default is SAME else option.default
        default = defaults.get(name, default)
        text = param.help.format(default=default)
        if option.off:
            parser.add_argument(  # the parameter's default otherwise ("auto" too)
                option.flag, action="store_const", const=False, dest=name, default=default,
                help=f"no {text}",
            )  # fmt: skip
            continue
        target: Any = parser.add_mutually_exclusive_group() if option.none_flag else parser
        settings: dict[str, Any] = {"dest": name, "help": text}
        if option.required:
            settings["required"] = True
        else:
            settings["default"] = default
        if option.type is not None:
            settings["type"] = option.type
        if option.choices is not None:
            settings["choices"] = option.choices
        else:
            name_of_flag = option.flag.lstrip("-").upper().replace("-", "_")
            settings["metavar"] = option.metavar or name_of_flag
        target.add_argument(option.flag, **settings)
        if option.none_flag:
            target.add_argument(
                option.none_flag, action="store_const", const=None, dest=name,
                default=argparse.SUPPRESS, help=option.none_help,
            )  # fmt: skip


def params_from_args(args: argparse.Namespace, names: Sequence[str]) -> dict[str, Any]:
    """The values of the options :func:`add_params` added for ``names``."""
    return {name: getattr(args, name) for name in names}


def run_params(args: argparse.Namespace) -> dict[str, Any]:
    """The estimator parameters of the shared options: ``client`` and
    ``n_workers`` (``--scheduler``/``--workers``/``--sync``), ``verbose``
    (``-v``), ``progress`` (a bar on a terminal), and ``checkpoint_dir`` and
    ``resume`` (``--checkpoint DIR`` or ``--resume DIR``)."""
    client, n_workers = client_from_args(args)
    folder = args.resume or args.checkpoint
    return {
        "client": client,
        "n_workers": n_workers,
        "verbose": 1 if args.verbose else 0,
        "progress": None,
        "checkpoint_dir": None if folder is None else str(folder),
        "resume": args.resume is not None,
    }
