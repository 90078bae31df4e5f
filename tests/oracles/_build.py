"""Compile the ``_cuda_emulate`` oracle at test time, against the packboost under test.

``_cuda_emulate.pyx`` (next to this file) runs the GPU's tile scoring of
csrc/pbc_split.h lane by lane on the host. It is a test oracle, so packboost
does not build or install it; :func:`cuda_emulate` builds it the way
tests/test_cimport.py builds a downstream ``cimport packboost`` project: a
one-module meson-python project written to a directory, installed with
``pip install --no-build-isolation --target``, Cython's include path from
``packboost.get_include()`` (it cimports ``packboost/_split_params.pxd``) and
the C headers from ``<get_include()>/packboost/include`` (pbc_split.h, des.h,
split_params.h: installed there by packboost/meson.build), or from the
source tree's csrc/ with an editable install.

The result is cached in ``$PACKBOOST_ORACLE_CACHE`` (default:
``<tempdir>/packboost-oracles-<uid>``) under a hash of everything that goes
into it (the .pyx, the .pxd files, the headers, this file's build recipe, the
Python ABI), so a session builds it at most once and later sessions reuse it
until a source changes. Without a C compiler or the build tools, or when the
build fails, the tests that need it fail under ``CI=true`` and skip, saying
why, otherwise.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "_cuda_emulate.pyx"
SOURCE_TREE_HEADERS = HERE.parents[1] / "csrc"  # present in a source checkout only
HEADERS = ("pbc_split.h", "des.h", "split_params.h")
MODULE = "_cuda_emulate"

PYPROJECT = """\
[build-system]
build-backend = "mesonpy"
requires = ["meson-python>=0.16", "Cython>=3.0.10"]

[project]
name = "packboost-test-oracles"
version = "0.0.1"
"""

# The flags and directives of packboost's own kernels (meson.build), c11 included:
# ISO C does not contract multiply-adds, like the GPU library's --fmad=false.
MESON_BUILD = """\
project('packboost_test_oracles', 'c', 'cython', meson_version: '>=1.1',
        default_options: ['buildtype=release', 'b_ndebug=if-release', 'c_std=c11'])
py = import('python').find_installation(pure: false)
py.extension_module(
  '@MODULE@', '@MODULE@.pyx',
  c_args: ['-O3', '-Wno-unused-function', '-Wno-maybe-uninitialized'],
  cython_args: ['-X', 'language_level=3', '-X', 'boundscheck=False',
                '-X', 'wraparound=False', '-X', 'initializedcheck=False',
                '-X', 'cdivision=True', '-I', '@PXD_ROOT@'],
  include_directories: include_directories('@HEADERS@'),
  install: true,
)
"""


class OracleUnavailable(RuntimeError):
    """The oracle could not be built or imported here."""


def _meson_string(path: Path) -> str:
    return str(path).replace("\\", "\\\\").replace("'", "\\'")


def _have_c_compiler() -> bool:
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    return any(shutil.which(name) for name in (compiler, "cc", "gcc", "clang"))


def _inputs() -> tuple[Path, Path]:
    """(Cython include root, C header directory) of the packboost under test."""
    try:
        import packboost
    except ImportError as error:
        raise OracleUnavailable(f"packboost does not import: {error}") from error
    pxd_root = Path(packboost.get_include())
    if not (pxd_root / "packboost" / "_split_params.pxd").is_file():
        raise OracleUnavailable(f"packboost/_split_params.pxd is not under {pxd_root}")
    for headers in (pxd_root / "packboost" / "include", SOURCE_TREE_HEADERS):
        if all((headers / name).is_file() for name in HEADERS):
            return pxd_root, headers
    raise OracleUnavailable(f"{', '.join(HEADERS)} are neither in "
                            f"{pxd_root / 'packboost' / 'include'} nor in {SOURCE_TREE_HEADERS}")


def _digest(pxd_root: Path, headers: Path) -> str:
    digest = hashlib.sha256()
    files = [SOURCE, Path(__file__).resolve(), *(headers / name for name in HEADERS),
             *sorted((pxd_root / "packboost").glob("*.pxd"))]
    for path in files:
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    for fact in (sys.version, sysconfig.get_config_var("EXT_SUFFIX") or "", sys.platform):
        digest.update(fact.encode() + b"\0")
    return digest.hexdigest()[:16]


def _build(destination: Path, pxd_root: Path, headers: Path) -> float:
    """Build into a fresh directory next to ``destination``, then rename it there."""
    if not _have_c_compiler():
        raise OracleUnavailable("no C compiler found")
    for tool in ("mesonpy", "Cython"):
        if importlib.util.find_spec(tool) is None:
            raise OracleUnavailable(f"{tool} is not installed (the [test] extra has it)")
    destination.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=destination.name + ".", dir=destination.parent))
    try:
        source = staging / "src"
        source.mkdir()
        (source / "pyproject.toml").write_text(PYPROJECT)
        (source / "meson.build").write_text(
            MESON_BUILD.replace("@MODULE@", MODULE)
            .replace("@PXD_ROOT@", _meson_string(pxd_root))
            .replace("@HEADERS@", _meson_string(headers)))
        shutil.copyfile(SOURCE, source / SOURCE.name)
        # The build tools of this interpreter (cython, meson, ninja in a venv's bin).
        env = dict(os.environ)
        env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
        command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-build-isolation",
                   "--no-deps", "--no-cache-dir", "--disable-pip-version-check",
                   "--target", str(staging / "site"), f"-Cbuild-dir={staging / 'build'}",
                   str(source)]
        start = time.perf_counter()
        result = subprocess.run(command, capture_output=True, text=True, timeout=600, env=env)
        seconds = time.perf_counter() - start
        if result.returncode != 0:
            raise OracleUnavailable(f"building {SOURCE.name} failed:\n"
                                    + result.stdout + result.stderr)
        shutil.rmtree(staging / "build", ignore_errors=True)
        try:
            staging.rename(destination)
        except OSError:
            if not destination.is_dir():  # else another session finished first: use its
                raise
        return seconds
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _load(destination: Path):
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    built = sorted((destination / "site").glob(MODULE + "*" + suffix))
    if not built:
        raise OracleUnavailable(f"no {MODULE}{suffix} in {destination / 'site'}")
    spec = importlib.util.spec_from_file_location(MODULE, built[0])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build_cuda_emulate():
    """Build (or reuse) and import the module; raises OracleUnavailable."""
    pxd_root, headers = _inputs()
    uid = os.getuid() if hasattr(os, "getuid") else 0
    root = Path(os.environ.get("PACKBOOST_ORACLE_CACHE")
                or Path(tempfile.gettempdir()) / f"packboost-oracles-{uid}")
    destination = root / f"{MODULE}-{_digest(pxd_root, headers)}"
    if not destination.is_dir():
        seconds = _build(destination, pxd_root, headers)
        print(f"oracles: built {MODULE} in {seconds:.1f} s into {destination}", file=sys.stderr)
    return _load(destination)


_module = None
_failure: str | None = None


def cuda_emulate():
    """The compiled ``_cuda_emulate`` module, built at most once per session.

    Where it cannot be built: a failed test under ``CI=true``, a skipped test
    otherwise (pytest), or OracleUnavailable outside pytest.
    """
    global _module, _failure
    if _module is None and _failure is None:
        try:
            _module = build_cuda_emulate()
        except (OracleUnavailable, ImportError, OSError, subprocess.SubprocessError) as error:
            _failure = f"cannot build the test oracle {SOURCE.name}: {error}"
    if _failure is not None:
        if "pytest" not in sys.modules:
            raise OracleUnavailable(_failure)
        import pytest

        if os.environ.get("CI", "").strip().lower() in ("1", "true", "yes"):
            pytest.fail(_failure, pytrace=False)
        pytest.skip(_failure)
    return _module
