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
from packboost.sklearn import PackBoostClassifier, PackBoostRegressor

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

