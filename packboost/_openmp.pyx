# cython: language_level=3
"""OpenMP facts of the build, and the thread count kernels run with.

Cython's ``prange`` silently runs serially when the extension was compiled
without ``-fopenmp``; :func:`openmp_enabled` makes that visible.
"""

cdef extern from *:
    """
    #ifdef _OPENMP
    #include <omp.h>
    static int packboost_openmp_enabled(void) { return 1; }
    static int packboost_omp_max_threads(void) { return omp_get_max_threads(); }
    #else
    static int packboost_openmp_enabled(void) { return 0; }
    static int packboost_omp_max_threads(void) { return 1; }
    #endif
    """
    int packboost_openmp_enabled() noexcept nogil
    int packboost_omp_max_threads() noexcept nogil


def openmp_enabled():
    """Return True when the Cython kernels were compiled with OpenMP."""
    return bool(packboost_openmp_enabled())


def omp_max_threads():
    """OpenMP's default team size in this process (1 without OpenMP)."""
    return packboost_omp_max_threads()
