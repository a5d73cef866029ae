"""numba's compiled-kernel cache stays out of the package, installed or not.

Left to its defaults numba writes ``@njit(cache=True)`` caches beside the
source, so a non-editable install gained ``site-packages/lsdask/kernels/
__pycache__/*.nbi`` files that ``pip uninstall`` left behind; the leftover
folder then imported as a namespace package and shadowed a later editable
install. :mod:`lsdask.kernels.cache` sends lsdask's caches to a per-user folder
instead; these tests check the folder, the fallbacks, and the whole
install / run / uninstall / editable-install cycle in a fresh virtualenv.

Anything that compiles a kernel runs in a subprocess with ``LSDASK_CACHE_DIR``
pointed at a temporary folder, so this test process's numba state and the
user's cache are left alone.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import numba
import pytest
from numba.core import caching

import lsdask.kernels
from lsdask.kernels import cache
from lsdask.kernels.entropy import dense_entropy

REPO = Path(__file__).resolve().parents[1]

# Ignored when the working tree is copied for a build: version control, build
# outputs, caches and data (``ROOT_ONLY`` only at the top, e.g. ``/data/``).
IGNORED = {
    ".git",
    "build",
    "dist",
    "__pycache__",
    ".venv",
    ".pytest_cache",
    ".ruff_cache",
    ".mypy_cache",
    ".hypothesis",
    ".benchmarks",
    "dask-worker-space",
}
ROOT_ONLY = {"data", "out", ".gl", ".whl", "lsdask-demo"}
IGNORED_SUFFIXES = (".egg-info", ".zarr", ".pyc", ".nbi", ".nbc")


def _clean_env(cache_dir: Path) -> dict[str, str]:
    """The environment for a child Python: lsdask's cache in ``cache_dir``.

    Drops what would redirect imports or numba's cache (``PYTHONPATH``,
    ``NUMBA_CACHE_DIR``, ``NUMBA_CACHE_LOCATOR_CLASSES``), and lets Python
    write bytecode as it does for a user, so that ``pip uninstall`` has to
    clean up ``__pycache__`` folders as well.
    """
    env = {
        k: v
        for k, v in os.environ.items()
        if k
        not in {
            "PYTHONPATH",
            "PYTHONDONTWRITEBYTECODE",
            "NUMBA_CACHE_DIR",
            "NUMBA_CACHE_LOCATOR_CLASSES",
            "NUMBA_DISABLE_JIT",
        }
    }
    env["LSDASK_CACHE_DIR"] = str(cache_dir)
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    env["PIP_NO_INPUT"] = "1"
    return env


def _run(args: list[str], cwd: Path, env: dict[str, str], timeout: float = 180) -> str:
    """Run ``args``; on failure, fail the test with the command's output."""
    proc = subprocess.run(
        args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    if proc.returncode != 0:
        pytest.fail(
            f"command failed with exit status {proc.returncode}: {' '.join(args)}\n"
            f"--- stdout ---\n{proc.stdout}\n--- stderr ---\n{proc.stderr}"
        )
    return proc.stdout


def _last_json(stdout: str) -> dict:
    """The JSON object a child script printed on its last line."""
    return json.loads(stdout.strip().splitlines()[-1])


def _numba_files(folder: Path, prefix: str = "") -> dict[str, tuple[int, int]]:
    """``{name: (mtime_ns, size)}`` of numba cache files below ``folder``."""
    if not folder.exists():
        return {}
    found = {}
    for path in folder.rglob("*"):
        if path.suffix in {".nbi", ".nbc"} and path.name.startswith(prefix):
            st = path.stat()
            found[str(path.relative_to(folder))] = (st.st_mtime_ns, st.st_size)
    return found


def _expected_cache_dir(root: Path, version: str) -> Path:
    py = f"py{sys.version_info[0]}{sys.version_info[1]}"
    return root / version / f"numba-{py}-numba{numba.__version__}" / "kernels"


# The kernel the child processes compile: small, quick to compile.
RUN_KERNEL = textwrap.dedent(
    """
    import json
    import numpy as np
    import lsdask
    import lsdask.kernels
    from lsdask.kernels import cache
    from lsdask.kernels.entropy import dense_entropy

    out = dense_entropy(np.full((3, 2), 0.5))
    assert np.allclose(out, 1.5 * np.log(2.0)), out
    print(json.dumps({
        "lsdask": lsdask.__file__,
        "kernels": lsdask.kernels.__file__,
        "cache_path": dense_entropy._cache.cache_path,
        "locator": type(dense_entropy._cache._impl.locator).__qualname__,
        "cache_dir": str(cache.cache_dir()),
    }))
    """
)


# --------------------------------------------------------------------- unit


def test_locator_is_first_and_installed_once() -> None:
    impl = cache._cache_impl_class()
    assert impl is not None, "numba.core.caching has no CacheImpl._locator_classes list"
    assert impl._locator_classes[0] is cache.LsdaskCacheLocator
    assert cache.install() is True
    assert cache.install() is True
    assert sum(cache._is_lsdask_locator(c) for c in impl._locator_classes) == 1
    # every numba cache implementation shares the base class's list
    assert caching.FunctionCache._impl_class._locator_classes[0] is cache.LsdaskCacheLocator
    # the kernels were decorated after the install: they use lsdask's locator
    assert isinstance(dense_entropy._cache._impl.locator, cache.LsdaskCacheLocator)


def test_cache_path_is_the_per_user_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    py_file = dense_entropy.py_func.__code__.co_filename
    version = importlib.metadata.version("lsdask")

    monkeypatch.setenv("LSDASK_CACHE_DIR", str(tmp_path / "over"))
    locator = cache.LsdaskCacheLocator.from_function(dense_entropy.py_func, py_file)
    assert locator is not None
    assert Path(locator.get_cache_path()) == _expected_cache_dir(tmp_path / "over", version)
    assert Path(locator.get_cache_path()).is_dir()

    monkeypatch.delenv("LSDASK_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.cache_root() == tmp_path / "xdg" / "lsdask"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/not/allowed")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache.cache_root() == tmp_path / "home" / ".cache" / "lsdask"


def test_locator_declines_other_functions_and_unwritable_folders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def foreign() -> None:
        pass

    monkeypatch.setenv("LSDASK_CACHE_DIR", str(tmp_path))
    # a function outside the lsdask package keeps numba's default locators
    assert cache.LsdaskCacheLocator.from_function(foreign, __file__) is None
    assert cache.cache_path_for(__file__) is None

    # a cache folder that cannot be created: decline, never raise
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("LSDASK_CACHE_DIR", str(blocker / "cache"))
    py_file = dense_entropy.py_func.__code__.co_filename
    assert cache.LsdaskCacheLocator.from_function(dense_entropy.py_func, py_file) is None


def test_cache_folder_is_named_by_the_imported_lsdask(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The version in the folder's name is the imported package's (a source tree
    earlier on sys.path than an install of another version names its own)."""
    monkeypatch.setenv("LSDASK_CACHE_DIR", str(tmp_path))
    folder = cache.cache_dir()
    assert folder is not None and folder.parent == tmp_path / lsdask.__version__


def test_writable_check_is_made_once_per_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    probes: list[str] = []
    real = cache.tempfile.TemporaryFile

    def probe(*args, **kwargs):
        probes.append(kwargs["dir"])
        return real(*args, **kwargs)

    monkeypatch.setattr(cache.tempfile, "TemporaryFile", probe)
    folder = tmp_path / "kernels"
    py_file = dense_entropy.py_func.__code__.co_filename
    locator = cache.LsdaskCacheLocator(dense_entropy.py_func, py_file, str(folder))
    locator.ensure_cache_path()
    locator.ensure_cache_path()
    assert probes == [str(folder)] and folder.is_dir()
    folder.rmdir()  # removed meanwhile: the folder comes back for numba's next save
    locator.ensure_cache_path()
    assert folder.is_dir() and probes == [str(folder)]


def test_kernel_compiles_into_the_per_user_folder(tmp_path: Path) -> None:
    source_pycache = Path(lsdask.kernels.__file__).parent / "__pycache__"
    before = _numba_files(source_pycache, "entropy.dense_entropy-")
    root = tmp_path / "cache"
    out = _last_json(
        _run([sys.executable, "-c", RUN_KERNEL], cwd=tmp_path, env=_clean_env(root), timeout=300)
    )
    expected = _expected_cache_dir(root, importlib.metadata.version("lsdask"))
    assert out["locator"] == "LsdaskCacheLocator"
    assert Path(out["cache_path"]) == expected
    written = _numba_files(expected, "entropy.dense_entropy-")
    assert any(name.endswith(".nbi") for name in written), written
    assert any(name.endswith(".nbc") for name in written), written
    # nothing was written beside the source
    assert _numba_files(source_pycache, "entropy.dense_entropy-") == before


# ------------------------------------------------------------------ install


def _copy_tree(dst: Path) -> Path:
    """Copy the working tree (sources, no build outputs or data) to ``dst``."""

    def ignore(folder: str, names: list[str]) -> set[str]:
        at_root = Path(folder).resolve() == REPO
        return {
            name
            for name in names
            if name in IGNORED or name.endswith(IGNORED_SUFFIXES) or (at_root and name in ROOT_ONLY)
        }

    shutil.copytree(REPO, dst, ignore=ignore)
    return dst


def _lsdask_leftovers(site: Path) -> list[str]:
    """Names in ``site`` that belong to lsdask (package, metadata, editable hooks)."""
    return sorted(p.name for p in site.iterdir() if "lsdask" in p.name.lower())


# Prints 1 where the interpreter's setuptools can build a wheel without
# downloading anything: setuptools 70.1 and later ship bdist_wheel, older ones
# need the ``wheel`` package beside them.
OFFLINE_BUILD_PROBE = textwrap.dedent(
    """
    import importlib.metadata, importlib.util
    try:
        version = importlib.metadata.version("setuptools")
        major, minor = (int(part) for part in version.split(".")[:2])
    except (importlib.metadata.PackageNotFoundError, ValueError):
        major, minor = 0, 0
    print(int((major, minor) >= (70, 1) or importlib.util.find_spec("wheel") is not None))
    """
)


@pytest.mark.timeout(300)
def test_install_run_uninstall_leaves_nothing(tmp_path: Path) -> None:
    """Non-editable install, run a kernel, uninstall, then an editable install.

    The venv sees the site-packages of the environment running the tests
    (numpy, numba, dask, and pip itself: nothing is installed but lsdask), where
    an editable lsdask may already be installed; each step checks that the venv's own install is the
    one imported. Both builds run offline (``--no-build-isolation``); where
    the installed setuptools cannot build wheels by itself, a recent one is
    first installed into the venv from the package index.
    """
    if not (REPO / "pyproject.toml").is_file():
        pytest.fail(f"expected the lsdask source tree with pyproject.toml at {REPO}")
    repo = _copy_tree(tmp_path / "repo")
    venv = tmp_path / "venv"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    cache_root = tmp_path / "cache"
    env = _clean_env(cache_root)

    # --without-pip: this interpreter's pip and setuptools are used through its
    # site-packages (a venv's own bundled setuptools may be too old), which a .pth
    # file puts on the new venv's path: the packages of the environment running the
    # tests, a virtualenv or not (--system-site-packages would see the base
    # interpreter's instead)
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], tmp_path, env)
    bindir = venv / ("Scripts" if os.name == "nt" else "bin")
    python = str(bindir / ("python.exe" if os.name == "nt" else "python"))
    site = Path(
        _run(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            elsewhere,
            env,
        ).strip()
    )
    ours = dict.fromkeys(sysconfig.get_paths()[k] for k in ("purelib", "platlib"))
    (site / "_outer_site.pth").write_text(
        "".join(f"import site; site.addsitedir({path!r})\n" for path in ours)
    )
    if _run([python, "-c", OFFLINE_BUILD_PROBE], elsewhere, env).strip() != "1":
        # once into the venv, instead of an isolated build environment per build
        _run([python, "-m", "pip", "install", "setuptools>=70.1"], elsewhere, env)
    pip = [python, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index"]

    # 1. a non-editable install, and one kernel run from another folder
    _run([*pip, str(repo)], elsewhere, env)
    out = _last_json(_run([python, "-c", RUN_KERNEL], elsewhere, env, timeout=300))
    assert Path(out["lsdask"]).parent == site / "lsdask", out
    assert out["locator"] == "LsdaskCacheLocator", out
    assert Path(out["cache_path"]).is_relative_to(cache_root), out
    assert _numba_files(Path(out["cache_path"])), "the kernel wrote no cache file"
    assert _numba_files(site / "lsdask") == {}, "numba's cache went into site-packages"

    # 2. uninstall: nothing of lsdask is left in the venv's site-packages
    _run([python, "-m", "pip", "uninstall", "-y", "lsdask"], elsewhere, env)
    assert _lsdask_leftovers(site) == []

    # 3. an editable install is what `import lsdask.kernels` then finds
    _run([*pip, "-e", str(repo)], elsewhere, env)
    probe = textwrap.dedent(
        """
        import json
        import lsdask
        import lsdask.kernels
        from lsdask.kernels import dense_weighted_rows

        print(json.dumps({"lsdask": lsdask.__file__, "kernels": lsdask.kernels.__file__}))
        """
    )
    out = _last_json(_run([python, "-c", probe], elsewhere, env, timeout=300))
    assert out["kernels"] is not None, "lsdask.kernels imported as a namespace package"
    assert Path(out["lsdask"]).resolve() == (repo / "lsdask" / "__init__.py").resolve(), out
    assert Path(out["kernels"]).resolve() == (repo / "lsdask" / "kernels" / "__init__.py").resolve()
