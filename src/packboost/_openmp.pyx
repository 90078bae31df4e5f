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
    static void packboost_omp_serial(void) { omp_set_max_active_levels(0); }
    static int packboost_omp_max_active_levels(void) { return omp_get_max_active_levels(); }
    #else
    static int packboost_openmp_enabled(void) { return 0; }
    static int packboost_omp_max_threads(void) { return 1; }
    static void packboost_omp_serial(void) { }
    static int packboost_omp_max_active_levels(void) { return 0; }
    #endif
    """
    int packboost_openmp_enabled() noexcept nogil
    int packboost_omp_max_threads() noexcept nogil
    void packboost_omp_serial() noexcept nogil
    int packboost_omp_max_active_levels() noexcept nogil


def openmp_enabled():
    """Return True when the Cython kernels were compiled with OpenMP."""
    return bool(packboost_openmp_enabled())


def omp_max_threads():
    """OpenMP's default team size in this process (1 without OpenMP)."""
    return packboost_omp_max_threads()


def make_serial():
    """Make every later parallel region of this process run on one thread.

    Sets OpenMP's max-active-levels to 0, so a region is inactive whatever
    its ``num_threads``. Called in a forked child (packboost._threads): GNU
    libgomp's thread pool does not survive ``fork``, and a parallel region of
    more than one thread there waits forever for the parent's threads.
    """
    packboost_omp_serial()


def omp_max_active_levels():
    """OpenMP's max-active-levels (0: every parallel region runs serially)."""
    return packboost_omp_max_active_levels()
