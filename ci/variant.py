#!/usr/bin/env python3
"""Turn a copy of the source tree into the source of one PackBoost distribution.

PackBoost ships as two distributions that install the same ``import packboost``:

* ``packboost``      -- CPU kernels (Cython + OpenMP). The tree as committed.
* ``packboost-cu13`` -- the same package built with ``-Dcuda=enabled`` against
  CUDA 13 (libpackboost_cuda.so + packboost._cuda), for ``device="cuda"``.

Why two names and one import: user code and model files stay the same on both
(``device="cpu"`` works everywhere, ``device="cuda"`` raises a clear error
when the backend is missing or no GPU is usable), pip picks the variant by
name (``pip install packboost-cu13``), and a CPU-only install never pulls in a
CUDA-sized wheel. The price: the two are alternatives, not add-ons -- installing
both overwrites one with the other (``packboost.show_config()`` then lists two
distributions; uninstall one). An add-on wheel would avoid that but would need
the CUDA extension built and versioned apart from the kernels it mirrors.

A wheel's distribution name comes from ``[project] name`` in pyproject.toml and
meson-python cannot override it at build time, so the CUDA variant is built
from a copy renamed by this script (the release workflow and ci/check_wheel.sh
run it on their own checkout or copy, never on a developer's tree):

    python ci/variant.py cu13 --root DIR    # rewrite DIR/pyproject.toml in place

The renamed tree also carries ``-Dcuda=enabled`` in ``[tool.meson-python.args]``,
so any build of ``packboost-cu13`` -- wheel or sdist -- has the CUDA backend or
fails, never a silent CPU-only package under the CUDA name.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

VARIANTS = {
    "cpu": {"name": "packboost", "meson_setup_args": []},
    "cu13": {"name": "packboost-cu13", "meson_setup_args": ["-Dcuda=enabled"]},
}
NAME_LINE = re.compile(r'^name = "packboost(?:-[a-z0-9]+)?"$', re.M)


def apply_variant(root: Path, variant: str) -> str:
    """Rewrite ``root/pyproject.toml`` for ``variant``; return the distribution name."""
    spec = VARIANTS[variant]
    path = root / "pyproject.toml"
    text = path.read_text()
    names = NAME_LINE.findall(text)
    if len(names) != 1:
        raise SystemExit(f"variant: expected one 'name = \"packboost...\"' line in {path}, "
                         f"found {len(names)}")
    text = NAME_LINE.sub(f'name = "{spec["name"]}"', text)
    if spec["meson_setup_args"]:
        if "[tool.meson-python.args]" in text:
            raise SystemExit(f"variant: {path} already has [tool.meson-python.args]")
        args = ", ".join(f'"{arg}"' for arg in spec["meson_setup_args"])
        text += (f"\n# Added by ci/variant.py {variant}: this tree builds {spec['name']}.\n"
                 f"[tool.meson-python.args]\nsetup = [{args}]\n")
    path.write_text(text)
    return spec["name"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("variant", choices=sorted(VARIANTS))
    parser.add_argument("--root", type=Path, required=True,
                        help="source tree to rewrite in place (a CI checkout or a copy)")
    args = parser.parse_args(argv)
    name = apply_variant(args.root, args.variant)
    print(f"variant: {args.root / 'pyproject.toml'} builds the distribution {name!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
