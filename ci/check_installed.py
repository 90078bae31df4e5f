#!/usr/bin/env python3
"""Check an installed PackBoost wheel: what it is, and that it fails cleanly without a GPU.

    python ci/check_installed.py --variant cpu    # distribution packboost
    python ci/check_installed.py --variant cu13   # distribution packboost-cu13

Run from outside the source tree (the wheel under test must be what
``import packboost`` finds; ci/check_wheel.sh and cibuildwheel's test step do).
Checks: the distribution name and version, OpenMP compiled in, the public
``.pxd`` files installed, a tiny fit/predict on the CPU; then CUDA: the CPU
variant reports CUDA as not built, the cu13 variant reports it built; where no
GPU is usable, ``device="cuda"`` must raise an exception that says so -- in a
child process, so that a crash (a CUDA error turned into an abort) fails the
check instead of passing silently. On a machine with a GPU it predicts on the
GPU and compares with the CPU. Exits non-zero with the reason on any failure.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import textwrap
from importlib import metadata
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

EXPECTED_DISTRIBUTION = {"cpu": "packboost", "cu13": "packboost-cu13"}

# Trains with device="cuda" and prints how it ended (exception type and message).
CUDA_FIT = textwrap.dedent("""
    import numpy as np
    from packboost import PackBoostRegressor
    from packboost.datasets import make_numerai_like
    data = make_numerai_like(n_rows=2000, n_features=6, n_eras=8, random_state=0)
    model = PackBoostRegressor(n_estimators=3, max_depth=3, device="cuda", random_state=0)
    try:
        model.fit(data.X, data.y, era=data.era)
    except Exception as error:
        print(f"RAISED {type(error).__name__}: {error}")
    else:
        cpu = PackBoostRegressor(n_estimators=3, max_depth=3, random_state=0)
        cpu.fit(data.X, data.y, era=data.era)
        gap = float(np.max(np.abs(model.predict(data.X) - cpu.predict(data.X))))
        print(f"FITTED max |cuda - cpu| = {gap:.3g}")
""")


def fail(message: str) -> None:
    print(f"check_installed: FAIL: {message}", file=sys.stderr)
    sys.exit(1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variant", choices=sorted(EXPECTED_DISTRIBUTION), required=True)
    parser.add_argument("--version", help="expected packboost.__version__")
    args = parser.parse_args(argv)

    import numpy as np

    import packboost
    from packboost import PackBoostRegressor
    from packboost.datasets import make_numerai_like

    location = Path(packboost.__file__).resolve().parent
    print(f"check_installed: packboost {packboost.__version__} from {location}")
    from packboost import _predict
    if not _predict.__file__.endswith(tuple(EXTENSION_SUFFIXES)):
        fail(f"packboost._predict is {_predict.__file__}, not a compiled extension")
    config = packboost.show_config()

    expected = EXPECTED_DISTRIBUTION[args.variant]
    if config["distribution"] != expected:
        fail(f"distribution is {config['distribution']!r}, expected {expected!r}")
    if metadata.version(expected) != packboost.__version__:
        fail(f"metadata version {metadata.version(expected)} != __version__ "
             f"{packboost.__version__}")
    if args.version and packboost.__version__ != args.version:
        fail(f"__version__ is {packboost.__version__}, expected {args.version}")
    if not config["openmp"]:
        fail("the kernels were compiled without OpenMP")
    for name in ("__init__.pxd", "tree.pxd", "_types.pxd"):
        if not (Path(packboost.get_include()) / "packboost" / name).is_file():
            fail(f"packboost/{name} is not installed (cimport packboost would fail)")

    data = make_numerai_like(n_rows=2000, n_features=6, n_eras=8, random_state=0)
    model = PackBoostRegressor(n_estimators=5, max_depth=3, random_state=0)
    prediction = model.fit(data.X, data.y, era=data.era).predict(data.X)
    if not np.isfinite(prediction).all() or prediction.std() == 0:
        fail("a CPU fit/predict gave non-finite or constant predictions")
    print("check_installed: CPU fit/predict ok")

    if args.variant == "cpu" and config["cuda"]:
        fail("the CPU variant reports a CUDA backend")
    if args.variant == "cu13" and not config["cuda"]:
        fail("the cu13 variant was built without the CUDA backend (-Dcuda=enabled missing?)")

    child = subprocess.run([sys.executable, "-c", CUDA_FIT], capture_output=True, text=True,
                           timeout=600)
    outcome = (child.stdout.strip().splitlines() or [""])[-1]
    if child.returncode != 0:
        fail(f"device='cuda' crashed the process (exit {child.returncode}):\n"
             f"{child.stdout}{child.stderr}")
    print(f"check_installed: device='cuda' -> {outcome}")
    if outcome.startswith("RAISED"):
        if config["cuda_device"]:
            fail("a GPU is usable, yet device='cuda' raised")
        message = outcome.lower()
        if not any(word in message for word in ("cuda", "gpu")):
            fail(f"the device='cuda' error does not say what is missing: {outcome}")
    elif not outcome.startswith("FITTED"):
        fail(f"unexpected output of the device='cuda' fit:\n{child.stdout}{child.stderr}")
    elif not config["cuda"]:
        fail("device='cuda' trained although no CUDA backend was built")
    print(f"check_installed: {expected} {packboost.__version__} ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
