"""A path or URL, with its ``storage_options``, and the fsspec filesystem that reaches it.

Every place lsdask reads or writes may be a local path or an fsspec URL
(``s3://bucket/prefix``, ``gs://``, ``abfs://``, ``memory://``, ``file://``).
Credentials and endpoints travel as ``storage_options`` (``--storage-option
KEY=VALUE`` on the command line), never inside the URL that lsdask prints.
A :class:`Location` pickles with its options, so a Dask task opens its own
objects on the worker that runs it.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
import posixpath
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

#: fsspec's names for the local file system
LOCAL_PROTOCOLS = frozenset({"file", "local"})

#: the options of store URLs opened without options of their own (``--storage-option``)
_DEFAULT_OPTIONS: contextvars.ContextVar[Mapping[str, Any] | None] = contextvars.ContextVar(
    "lsdask_storage_options", default=None
)


@contextlib.contextmanager
def storage_settings(options: Mapping[str, Any] | None) -> Iterator[None]:
    """Use ``options`` for the store URLs opened inside the block without options
    of their own (in this thread): the command line's ``--storage-option``s."""
    token = _DEFAULT_OPTIONS.set(dict(options or {}))
    try:
        yield
    finally:
        _DEFAULT_OPTIONS.reset(token)


#: a name below a location: no separators, no dot names, nothing that could climb out
_PLAIN_NAME = re.compile(r"^(?!\.{1,2}$)[^/\\\x00\n]+$")


@dataclass(frozen=True)
class Location:
    """A folder or prefix in some file system or object store.

    ``fs`` is the fsspec filesystem, ``root`` the path in it (no trailing
    slash), ``url`` what the user gave with any credentials removed, and
    ``storage_options`` the options it was opened with."""

    fs: Any
    root: str
    url: str
    storage_options: Mapping[str, Any] = field(default_factory=dict)

    @property
    def protocol(self) -> str:
        """The file system's main protocol name (``"s3"``, ``"memory"``, ``"file"``)."""
        names = self.fs.protocol
        return str(names if isinstance(names, str) else names[0])

    @property
    def is_local(self) -> bool:
        return self.protocol in LOCAL_PROTOCOLS

    def path(self, *names: str) -> str:
        """The path of ``names`` below the root, each a plain name (no ``/``,
        ``..`` or ``.``): what is below a location stays below it."""
        for name in names:
            if not isinstance(name, str) or not _PLAIN_NAME.match(name):
                raise ValueError(
                    f"{self.url}: {name!r} is not a plain name below the location "
                    "(no '/', '\\', '..' or '.', not empty)"
                )
        return posixpath.join(self.root, *names) if names else self.root

    def child(self, name: str) -> Location:
        """The location of the folder or prefix ``name`` below this one."""
        return Location(
            self.fs, self.path(name), f"{self.url.rstrip('/')}/{name}", self.storage_options
        )


def is_store_url(path: Any) -> bool:
    """Whether ``path`` is the URL of a store (``s3://``, ``memory://``, ...),
    not a local path or ``file://`` URL, which lsdask writes with its local
    protocol."""
    if not isinstance(path, str) or "://" not in path:
        return False
    return path.split("://", 1)[0].lower() not in LOCAL_PROTOCOLS


def redact(url: str) -> str:
    """``url`` without a ``user:password@`` part, fit to print."""
    return re.sub(r"^([a-zA-Z][a-zA-Z0-9+.-]*://)[^/@]*@", r"\1", url)


def open_location(
    url: str | os.PathLike[str],
    storage_options: Mapping[str, Any] | None = None,
    *,
    parameter: str = "path",
) -> Location:
    """The :class:`Location` of a local path or fsspec URL.

    ``parameter`` names the argument in error messages: an unknown protocol,
    a protocol whose package is not installed, or options the file system
    does not take are reported as a ValueError or ImportError that says how
    to fix them. ``storage_options`` None: those of :func:`storage_settings`."""
    import fsspec.core

    text = os.fspath(url)
    if not isinstance(text, str) or not text:
        raise ValueError(f"{parameter}: expected a path or URL; got {url!r}")
    chosen = _DEFAULT_OPTIONS.get() if storage_options is None else storage_options
    options = dict(chosen or {})
    shown = redact(text)
    protocol = text.split("://", 1)[0] if "://" in text else "file"
    try:
        fs, root = fsspec.core.url_to_fs(text, **options)
    except ImportError as exc:
        raise ImportError(
            f"{parameter}: {shown} needs fsspec's driver for {protocol}://, which is not "
            f"installed ({exc}). Install it, e.g. `pip install s3fs` for s3://, gcsfs for "
            "gs://, adlfs for abfs://"
        ) from None
    except ValueError as exc:
        raise ValueError(
            f"{parameter}: {shown}: {exc}. Give a local path or an fsspec URL such as "
            "s3://bucket/prefix, gs://bucket/prefix, abfs://container/prefix or memory://name"
        ) from None
    except TypeError as exc:
        raise ValueError(
            f"storage_options for {shown}: the {protocol}:// file system does not take "
            f"them ({exc}); see its documentation for the options it knows"
        ) from None
    root = root.rstrip("/") or "/"
    return Location(fs, root, shown, options)


def parse_storage_options(pairs: Iterable[str]) -> dict[str, Any]:
    """``KEY=VALUE`` pairs (``--storage-option``) as fsspec ``storage_options``.

    A dotted key nests (``client_kwargs.endpoint_url=http://...`` gives
    ``{"client_kwargs": {"endpoint_url": ...}}``); a value that reads as JSON
    ``true``, ``false``, ``null`` or a number is that, anything else a string."""
    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        keys = key.strip().split(".")
        if not sep or not all(k.strip() for k in keys):
            raise ValueError(
                f"--storage-option expects KEY=VALUE (e.g. anon=true or "
                f"client_kwargs.endpoint_url=http://host:9000); got {pair!r}"
            )
        value = _scalar(raw)
        node = options
        for k in keys[:-1]:
            node = node.setdefault(k.strip(), {})
            if not isinstance(node, dict):
                raise ValueError(f"--storage-option {pair!r}: {k!r} was given a value already")
        last = keys[-1].strip()
        if last in node:
            raise ValueError(f"--storage-option {pair!r}: {key.strip()!r} is given twice")
        node[last] = value
    return options


def _scalar(raw: str) -> Any:
    try:
        value = json.loads(raw)
    except ValueError:
        return raw
    return value if value is None or isinstance(value, bool | int | float) else raw
