"""PackBoost: gradient-boosted trees that hold up in every era.

Directional Era Splitting (DES) scores a split by its gain in each era --
mean minus risk plus agreement of direction -- and packs grow several trees
per round over one pass of the data. See docs/des.md and docs/packs.md for the math.
"""

from packboost._config import get_include, show_config
from packboost._device import CudaError, cuda_available
from packboost._openmp import openmp_enabled
from packboost._version import __version__
from packboost.model_io import load_model

# The estimators subclass scikit-learn's BaseEstimator (when it is installed),
# and importing scikit-learn costs about a second: ``import packboost`` stays
# light, and packboost.sklearn (with scikit-learn) is imported on the first
# access to an estimator (PEP 562), e.g. ``from packboost import
# PackBoostRegressor``. pandas and matplotlib are likewise imported only where
# used (tests/test_packaging.py checks all three).
_LAZY = {"PackBoostClassifier": "packboost.sklearn", "PackBoostRegressor": "packboost.sklearn"}


def __getattr__(name):
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value  # later accesses are plain attribute lookups
        return value
    raise AttributeError(f"module 'packboost' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))

__all__ = [
    "PackBoostClassifier",
    "PackBoostRegressor",
    "CudaError",
    "__version__",
    "cuda_available",
    "get_include",
    "load_model",
    "openmp_enabled",
    "show_config",
]

