# How the kernels' loops over rows hand work to the threads (docs/cpu-kernels.md §9).
#
# ROWS_PER_TASK rows at a time, taken by the threads as they come
# (schedule='dynamic'): on a shared machine one core is often slowed by
# other work, and with a static split every thread then waits for the slow
# one at the loop's end (RESULTS.md, 2026-11-27 d523973). A task is large
# enough that taking it costs nothing measurable. Loops whose sums must not
# depend on the threads keep their fixed chunks (SUM_CHUNKS) and take those
# dynamically instead: who sums a chunk does not change its sum.

cdef enum:
    ROWS_PER_TASK = 4096
