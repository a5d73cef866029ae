"""Where numba keeps lsdask's compiled kernels: a per-user folder, never the package.

Every kernel in :mod:`lsdask.kernels` is compiled with ``@numba.njit(cache=True)``.
Left to its defaults, numba writes that cache as ``__pycache__/*.nbi`` and
``*.nbc`` files beside the source file. For an installed lsdask those files land
in ``site-packages/lsdask``, where ``pip uninstall`` does not know about them:
they survive it, and the leftover ``lsdask`` folder (no ``__init__.py`` left)
then imports as a namespace package that shadows a later editable install.

:class:`LsdaskCacheLocator` keeps the cache out of the package. It is put first
in numba's list of cache locators when :mod:`lsdask.kernels` is imported, before
any kernel module is decorated (numba picks a function's cache folder when
``cache=True`` decorates it). It answers only for functions whose source file
lies inside the lsdask package folder and keeps their cache in::

    <root>/<lsdask version>/numba-py<major><minor>-numba<numba version>/<folder>

where ``<folder>`` is the source file's folder relative to the package
(``kernels`` for ``lsdask/kernels/topl.py``), so that two lsdask, Python or
numba versions never share a folder.

Environment
-----------
LSDASK_CACHE_DIR
    The ``<root>`` above. Default: ``$XDG_CACHE_HOME/lsdask``, or
    ``~/.cache/lsdask`` where ``XDG_CACHE_HOME`` is unset (or not an absolute
    path, which the XDG specification says to ignore). Point it at a writable
    folder where the home folder is read-only or shared.

Notes
-----
Numba has no public API to choose where a function's cache goes, so this
module uses its private one: :class:`LsdaskCacheLocator` subclasses
``numba.core.caching._CacheLocator`` and ``_SourceFileBackedLocatorMixin``,
and :func:`install` edits ``CacheImpl._locator_classes``. Those names are
checked against the numba releases that ``pyproject.toml`` allows (its
``numba`` pin), and :func:`install` warns, instead of failing, where the list
is missing.

Functions of other libraries keep numba's default behaviour: the locator
declines them, and ``NUMBA_CACHE_DIR`` is neither set nor read here (for
lsdask's own kernels ``LSDASK_CACHE_DIR`` takes its place). Where the folder
cannot be created or written, the locator declines too and numba falls back to
its own locators. Setting ``NUMBA_CACHE_LOCATOR_CLASSES`` replaces numba's whole
list of locators, this one included.
"""

from __future__ import annotations

import functools
import os
import sys
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numba
from numba.core import caching

from lsdask._version import __version__

__all__ = [
    "LsdaskCacheLocator",
    "cache_dir",
    "cache_path_for",
    "cache_root",
    "install",
    "kernels_compiled",
]

#: The environment variable that overrides the root of lsdask's cache.
ENV_VAR = "LSDASK_CACHE_DIR"

#: The lsdask package folder; only functions defined below it are handled here.
PACKAGE_DIR = Path(__file__).resolve().parent.parent

#: :data:`PACKAGE_DIR` with every link resolved, as the source files are compared with it.
_REAL_PACKAGE_DIR = os.path.realpath(PACKAGE_DIR)


def cache_root() -> Path | None:
    """The root of lsdask's per-user cache, or None where none can be named.

    ``$LSDASK_CACHE_DIR`` where set and not empty, else
    ``$XDG_CACHE_HOME/lsdask``, else ``~/.cache/lsdask``. The environment is
    read on every call, so a change made after import still applies to
    kernels decorated afterwards.

    Returns
    -------
    pathlib.Path or None
        An absolute path; None where the home folder cannot be found and
        neither variable is set.
    """
    override = os.environ.get(ENV_VAR, "")
    if override:
        return Path(os.path.abspath(os.path.expanduser(override)))
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / "lsdask"
    home = os.path.expanduser("~")
    if home.startswith("~"):
        return None
    return Path(home) / ".cache" / "lsdask"


def cache_dir() -> Path | None:
    """The folder for this lsdask, Python and numba version, below :func:`cache_root`.

    The lsdask version is that of the package imported
    (:mod:`lsdask._version`), also where a source tree earlier on ``sys.path``
    shadows an installed distribution of another version.

    Returns
    -------
    pathlib.Path or None
        ``<root>/<lsdask version>/numba-py<major><minor>-numba<numba version>``,
        or None where :func:`cache_root` is None.
    """
    root = cache_root()
    if root is None:
        return None
    python = f"py{sys.version_info[0]}{sys.version_info[1]}"
    return root / __version__ / f"numba-{python}-numba{numba.__version__}"


def kernels_compiled() -> bool:
    """Whether this lsdask, Python and numba version has compiled kernels in its
    cache folder (an index file, ``*.nbi``, of any kernel). False on the first
    run of a version, which compiles each kernel the command uses (minutes on
    two cores), and where no cache folder can be named."""
    folder = cache_dir()
    if folder is None or not folder.is_dir():
        return False
    return any(True for _ in folder.rglob("*.nbi"))


def cache_path_for(py_file: str | os.PathLike[str]) -> Path | None:
    """The cache folder for functions defined in ``py_file``.

    Parameters
    ----------
    py_file : str or os.PathLike
        The source file of a function, as numba sees it
        (``inspect.getfile``).

    Returns
    -------
    pathlib.Path or None
        :func:`cache_dir` joined with the file's folder relative to the lsdask
        package folder; None where the file is not inside the package (another
        library's function, which numba's own locators handle) or no cache
        folder can be named.
    """
    source = os.path.realpath(os.path.abspath(os.fspath(py_file)))
    package = _REAL_PACKAGE_DIR
    try:
        if os.path.commonpath([package, source]) != package:
            return None
    except ValueError:  # different drives, or a relative and an absolute path
        return None
    base = cache_dir()
    if base is None:
        return None
    relative = Path(os.path.relpath(os.path.dirname(source), package))
    return base / relative


class LsdaskCacheLocator(caching._SourceFileBackedLocatorMixin, caching._CacheLocator):
    """Numba cache locator for lsdask's own functions: a per-user folder.

    The source stamp (is the cached code still current?) and the disambiguator
    (the function's first line) are numba's own for source-file-backed
    functions; only the folder differs from numba's in-tree locator.

    Parameters
    ----------
    py_func : function
        The Python function being compiled.
    py_file : str
        Its source file.
    cache_path : str
        The folder its index (``.nbi``) and data (``.nbc``) files go in.
    """

    def __init__(self, py_func: Callable[..., Any], py_file: str, cache_path: str) -> None:
        self._py_file = py_file
        self._lineno = py_func.__code__.co_firstlineno
        self._cache_path = cache_path

    def get_cache_path(self) -> str:
        """The folder this function's cache files go in."""
        return self._cache_path

    def ensure_cache_path(self) -> None:
        """Create the cache folder and check that a file can be written in it.

        The folder is (re)created on every call (numba calls this before it
        saves, and a folder removed meanwhile must come back); whether a file
        can be written in it is tried once per folder and process.

        Raises
        ------
        OSError
            Where the folder cannot be created or written; :meth:`from_function`
            then declines, and numba's default locators take over.
        """
        os.makedirs(self._cache_path, exist_ok=True)
        _check_writable(self._cache_path)

    @classmethod
    def from_function(cls, py_func: Callable[..., Any], py_file: str) -> LsdaskCacheLocator | None:
        """A locator for ``py_func``, or None to let numba's next locator decide.

        Declines functions outside the lsdask package, functions without a
        source file on disk (outside a frozen application), and any case where
        the cache folder cannot be named, created or written (a read-only home
        folder, say); numba then falls back to its default locators, so a
        cache problem never stops a kernel from compiling.
        """
        try:
            path = cache_path_for(py_file)
            if path is None:
                return None
            if not (os.path.exists(py_file) or getattr(sys, "frozen", False)):
                return None
            locator = cls(py_func, py_file, str(path))
            locator.ensure_cache_path()
        except (OSError, ValueError, RuntimeError):
            return None
        return locator


@functools.cache
def _check_writable(folder: str) -> None:
    """Write and remove a temporary file in ``folder``: an OSError where that
    fails. A success is remembered (per folder), a failure tried again."""
    tempfile.TemporaryFile(dir=folder).close()


def _cache_impl_class() -> Any:
    """Numba's base cache implementation, whose ``_locator_classes`` all caches
    share (``CacheImpl`` in the numba releases lsdask supports); None where it
    has no ``_locator_classes`` list."""
    impl = getattr(caching, "CacheImpl", None)
    return impl if isinstance(getattr(impl, "_locator_classes", None), list) else None


def _is_lsdask_locator(cls: object) -> bool:
    """Whether ``cls`` is this module's locator, also from an earlier (reloaded) copy."""
    return (
        getattr(cls, "__module__", None) == __name__
        and getattr(cls, "__qualname__", None) == LsdaskCacheLocator.__qualname__
    )


def install() -> bool:
    """Put :class:`LsdaskCacheLocator` first in numba's locator list, once.

    Idempotent: a second call, or a call after this module was reloaded, leaves
    exactly one copy (the current class) at the front. The list is changed in
    place, so every numba cache (functions, and the library caches built on
    the same implementation) consults it. Call it before any lsdask kernel
    module is imported: numba picks a function's locator when ``cache=True``
    decorates it.

    Returns
    -------
    bool
        True where the locator is in place; False (with a warning) where this
        numba has no locator list to extend, in which case numba's default
        locators apply.
    """
    impl = _cache_impl_class()
    if impl is None:
        warnings.warn(
            f"lsdask could not install its numba cache locator: numba {numba.__version__} "
            "has no numba.core.caching.CacheImpl._locator_classes list, so lsdask's "
            "compiled kernels are cached where numba's defaults put them, which may be "
            "inside the installed package. Set NUMBA_CACHE_DIR to a writable folder "
            "outside the package to keep them out of it.",
            RuntimeWarning,
            stacklevel=2,
        )
        return False
    classes: list[Any] = impl._locator_classes
    if classes and classes[0] is LsdaskCacheLocator:
        return True
    classes[:] = [cls for cls in classes if not _is_lsdask_locator(cls)]
    classes.insert(0, LsdaskCacheLocator)
    return True


install()
