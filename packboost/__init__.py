"""PackBoost: gradient-boosted trees that hold up in every era.

Directional Era Splitting (DES) scores a split by its gain in each era --
mean minus risk plus agreement of direction -- and packs grow several trees
per round over one pass of the data. See DESIGN.md for the math.
"""

from packboost._openmp import openmp_enabled
from packboost._version import __version__
from packboost.model_io import load_model
from packboost.sklearn import PackBoostClassifier, PackBoostRegressor

__all__ = [
    "PackBoostClassifier",
    "PackBoostRegressor",
    "__version__",
    "load_model",
    "openmp_enabled",
    "show_config",
]


def show_config() -> dict:
    """Print and return how this build was made (OpenMP, threads, backends)."""
    from packboost._openmp import omp_max_threads
    from packboost._threads import available_cpus

    config = {
        "version": __version__,
        "openmp": openmp_enabled(),
        "omp_max_threads": omp_max_threads(),
        "available_cpus": available_cpus(),
        "cuda": False,
    }
    for key, value in config.items():
        print(f"{key}: {value}")
    return config
