# Public Cython surface of packboost (``cimport packboost``).
#
# Deliberately empty for now: the tree struct-of-arrays layout and a nogil
# prediction kernel for downstream Cython code are exposed with the packaging
# work. Everything under packboost/_*.pxd is private and free to change.
