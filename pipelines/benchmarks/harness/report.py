"""Writing a report: figures, Markdown tables, the header every report starts with, JSON."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any


def check(ok: bool | None) -> str:
    """A target's result: PASS, FAIL, or n/a when not measured."""
    return "n/a" if ok is None else ("PASS" if ok else "FAIL")


def fmt(x: Any, digits: int = 3) -> str:
    """A figure with ``digits`` decimals; "-" for None."""
    if x is None:
        return "-"
    if isinstance(x, float):
        if not math.isfinite(x):
            return str(x)
        return f"{x:.{digits}f}"
    return str(x)


def fmt_s(x: float | None) -> str:
    """Seconds to a target, or "not reached"."""
    if x is None:
        return "not reached"
    return f"{x:.1f} s" if x < 100 else f"{x:.0f} s"


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    """A Markdown table's lines."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]


def pool_text(pool: dict[str, Any]) -> str:
    """One thread pool of ``threadpoolctl``: library, version, architecture, threads."""
    extra = [pool[k] for k in ("architecture", "threading_layer") if pool.get(k)]
    extra.append(f"{pool.get('num_threads')} threads")
    extra.append(Path(pool.get("filepath", "")).name)
    return f"{pool.get('internal_api')} {pool.get('version')} ({', '.join(map(str, extra))})"


def header(res: dict[str, Any], title: str) -> list[str]:
    """The title and what every report says first: the command, when, how long, the
    machine, its thread pools, the versions and commit measured, the load average."""
    m = res["machine"]
    return [
        f"# {title}",
        "",
        f"Command: `{res['command']}`  ",
        f"Started {res['started']}, total wall time {res.get('total_wall_s', 0) / 60:.1f} min.  ",
        f"Machine: {m['cpu']}, {m['cores']} cores ({m['cores_usable']} usable), "
        f"{m['memory_gib']} GiB, {m['platform']}, Python {m['python']}.  ",
        "Thread pools (threadpoolctl): " + "; ".join(map(pool_text, m["threadpools"])) + ".  ",
        "Versions: "
        + ", ".join(f"{k} {v}" for k, v in m["versions"].items() if v)
        + f"; git {m['git_commit']}; lsdask imported from `{m['lsdask_path']}`.  ",
        f"Load average (1, 5, 15 min) at start {res['load_start']}, at end "
        f"{res.get('load_end')} (shared machine: absolute times are noisy, compare the ratios).",
        "",
    ]


def step_times(res: dict[str, Any]) -> str:
    """The wall time of every step of the run, on one line."""
    return (
        "Wall time per step: "
        + ", ".join(f"{k} {v / 60:.1f} min" for k, v in res["step_wall_s"].items())
        + "."
    )


def to_json(obj: Any) -> Any:
    """A JSON-safe copy: string keys, numpy scalars and arrays as Python, non-finite
    floats as strings."""
    import numpy as np

    if isinstance(obj, dict):
        return {str(k): to_json(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [to_json(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return to_json(obj.tolist())
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return str(obj)
    return obj
