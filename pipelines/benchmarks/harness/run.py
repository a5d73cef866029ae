"""One run of a benchmark: its common options, its record, its steps and its outputs.

A benchmark script builds a :class:`Run` at its start. The run's record
``run.res`` (a dict that becomes ``results/<stem>.json``) starts with the
command, the start time, the load average and the machine
(:func:`harness.machine.describe`); :meth:`Run.step` times one step of the
benchmark into ``step_wall_s`` and saves the record so far to
``<stem>.partial.json`` (a crash late in a long run loses nothing);
:meth:`Run.finish` adds the end, writes ``<stem>.md`` and ``<stem>.json``,
deletes the partial file and prints the report.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness import REPO, RESULTS_DIR


def log(msg: str) -> None:
    """A progress line with the time of day."""
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def options(doc: str, quick_help: str) -> argparse.ArgumentParser:
    """A parser with the options every benchmark takes: ``--quick`` (small sizes,
    results under another name) and ``--out`` (the results folder); its description
    is the first paragraph of ``doc``."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help=quick_help)
    parser.add_argument("--out", type=Path, default=RESULTS_DIR, help="results folder")
    return parser


def command_line(script: str, argv: list[str] | None) -> str:
    """How the benchmark was started, from the repository's root."""
    path = Path(script).resolve()
    shown = path.relative_to(REPO) if path.is_relative_to(REPO) else path
    args = argv if argv is not None else sys.argv[1:]
    return " ".join(["python", str(shown), *args])


class Run:
    """The record and the outputs of one benchmark run (see the module's docstring)."""

    def __init__(
        self, script: str, stem: str, out_dir: Path, argv: list[str] | None, **record: Any
    ) -> None:
        from harness.machine import describe, load_avg

        self.stem = stem
        self.out_dir = out_dir
        self.t0 = time.perf_counter()
        out_dir.mkdir(parents=True, exist_ok=True)
        self.res: dict[str, Any] = {
            "command": command_line(script, argv),
            "started": time.strftime("%Y-%m-%d %H:%M:%S"),
            "load_start": load_avg(),
            **record,
            "machine": describe(),
            "step_wall_s": {},
            "json_name": f"{stem}.json",
        }

    @property
    def partial_path(self) -> Path:
        return self.out_dir / f"{self.stem}.partial.json"

    def step(self, name: str, fn: Callable[[], Any]) -> Any:
        """``fn()``, its wall time recorded as step ``name``; the record saved so far."""
        t0 = time.perf_counter()
        out = fn()
        self.res["step_wall_s"][name] = time.perf_counter() - t0
        self.save_partial()
        return out

    def save_partial(self) -> None:
        from harness.report import to_json

        self.partial_path.write_text(json.dumps(to_json(self.res), indent=1) + "\n")

    def finish(self, render: Callable[[dict[str, Any]], str]) -> str:
        """Record the end, write ``<stem>.md`` (``render(res)``) and ``<stem>.json``,
        print the report and return it."""
        from harness.machine import load_avg
        from harness.report import to_json

        self.res["load_end"] = load_avg()
        self.res["total_wall_s"] = time.perf_counter() - self.t0
        md = render(self.res)
        (self.out_dir / f"{self.stem}.md").write_text(md)
        (self.out_dir / self.res["json_name"]).write_text(
            json.dumps(to_json(self.res), indent=1) + "\n"
        )
        self.partial_path.unlink(missing_ok=True)
        print(md)
        return md
