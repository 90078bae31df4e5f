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
# used (tests/test_packaging.py checks all three). The public submodules load
# the same way on first access (``packboost.datasets.make_sign_flip(...)``), and
# so do the plotting functions LightGBM users call from the top level
# (``packboost.plot_importance(model)``, as ``lightgbm.plot_importance``).
_LAZY = {"PackBoostClassifier": "packboost.sklearn", "PackBoostRegressor": "packboost.sklearn",
         "plot_era_correlation": "packboost.plotting", "plot_era_report": "packboost.plotting",
         "plot_era_scores": "packboost.plotting", "plot_importance": "packboost.plotting",
         "plot_metric": "packboost.plotting"}
_SUBMODULES = ("binning", "booster", "callback", "dask", "datasets", "ensemble", "grower",
               "metrics", "model_file", "model_io", "model_selection", "objectives",
               "plotting", "reports", "sklearn", "standalone")


def __getattr__(name):
    import importlib

    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
    elif name in _SUBMODULES:
        value = importlib.import_module(f"packboost.{name}")
    else:
        raise AttributeError(f"module 'packboost' has no attribute {name!r}")
    globals()[name] = value  # later accesses are plain attribute lookups
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY) | set(_SUBMODULES))

__all__ = [
    "PackBoostClassifier",
    "PackBoostRegressor",
    "plot_era_correlation",
    "plot_era_report",
    "plot_era_scores",
    "plot_importance",
    "plot_metric",
    "CudaError",
    "__version__",
    "cuda_available",
    "get_include",
    "load_model",
    "openmp_enabled",
    "show_config",
]

