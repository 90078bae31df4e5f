"""Test oracles: slow, obvious implementations the kernels are checked against.

Never installed with packboost (the wheel holds the library only); the tests
import this package as ``oracles`` because pytest puts ``tests/`` on
``sys.path`` (``tests/conftest.py``, rootdir-less), from the source tree and
from a copy of ``tests/`` run against an installed wheel alike.

* :mod:`oracles.reference`: one round in naive NumPy (histograms, DES scoring,
  a whole tree), the oracle of the CPU kernels;
* :func:`cuda_emulate`: ``_cuda_emulate.pyx``, the GPU's tile scoring of
  csrc/pbc_split.h run lane by lane on the host, compiled at test time against
  the installed packboost (see :mod:`oracles._build`).
"""

from __future__ import annotations

from ._build import cuda_emulate

__all__ = ["cuda_emulate"]
