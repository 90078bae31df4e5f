# cython: language_level=3
"""Raw feature values to bin codes (docs/data-layout.md §1), the kernel behind BinMapper.

# Notes:
A value x of feature k gets the code "number of cut points of k below x"
(``np.searchsorted(cuts_k, x, side="left")``), so ``code <= t`` exactly when
``x <= cuts_k[t]``: the raw-value predictor and the binned trainer agree. NaN
gets the missing code ``n_bins[k]`` (one past the last non-missing bin).

The output is feature-major (n_features, n_rows_out) and rows may be taken in
any order (``row_order``, e.g. era-sorted), so binning and the era sort are one
pass. The loop order follows the input layout so that reads stay in cache:

* columns contiguous (F order, e.g. a pandas int8 block): threads take whole
  features; one column is read (gathered, with ``row_order``) while it is hot;
* rows contiguous (C order): threads take blocks of output rows and walk the
  features inside the block, which stays in cache: a block holds about
  ROW_BLOCK_BYTES of input rows (with ``row_order`` they are scattered rows,
  each read once per feature: a block of 2,048 rows of 500 uint8 features
  left L2 between two features and took 2.7 s per million rows).

Codes of integers into a pre-binned mapper whose values are all in range
are the values themselves (``codes_are_values``): the kernel is then a
gather and transpose, without the count of cuts.

Codes come from a branch-free linear count for short cut lists (Numerai's 4
cuts; no mispredicted branches) and a binary search above that.
"""

from cython.parallel cimport prange
from libc.stdint cimport int64_t

from packboost.tree cimport raw_value_t, bin_code_t, bin_index_t

cdef enum:
    ROW_BLOCK = 2048
    MIN_ROW_BLOCK = 64
    ROW_BLOCK_BYTES = 64 * 1024
    # Up to this many cuts a linear count beats a binary search.
    LINEAR_SEARCH_MAX_CUTS = 16


cdef inline Py_ssize_t count_cuts_below(const double* cuts, Py_ssize_t n_cuts,
                                        double value) noexcept nogil:
    """Number of ``cuts`` (ascending) strictly below ``value``."""
    cdef Py_ssize_t low = 0, high = n_cuts, middle
    if n_cuts <= LINEAR_SEARCH_MAX_CUTS:
        for middle in range(n_cuts):
            low += cuts[middle] < value
        return low
    while low < high:
        middle = (low + high) >> 1
        if cuts[middle] < value:
            low = middle + 1
        else:
            high = middle
    return low


def map_to_bins(
        const raw_value_t[:, :] X,                 # IN  (n_rows, n_features), any strides
        const double[::1] cuts,                # IN  all features' cuts, concatenated
        const int64_t[::1] cut_offsets,        # IN  (n_features + 1,)
        const bin_index_t[::1] n_bins,           # IN  (n_features,) = missing code
        const int64_t[::1] row_order,          # IN  (n_rows_out,) or empty: all rows
        bin_code_t[:, ::1] out,                # OUT (n_features, n_rows_out)
        int n_threads,
        bint codes_are_values=False,           # IN  every value is its own code
        const int64_t[::1] out_columns=None,   # IN  (n_rows_out,) or None: i
):
    """Fill ``out[k, c]`` with the code of ``X[row_order[i], k]``, where
    ``c = out_columns[i]`` (``i`` without ``out_columns``: then ``out`` has
    one column per output row; with them, a shard's rows binned into their
    places, packboost.dask)."""
    cdef Py_ssize_t n_features = X.shape[1]
    cdef bint placed = out_columns is not None
    cdef Py_ssize_t n_rows_out = out_columns.shape[0] if placed else out.shape[1]
    cdef bint ordered = row_order.shape[0] > 0
    cdef Py_ssize_t i
    if placed:
        if ordered and row_order.shape[0] != n_rows_out:
            raise ValueError("map_to_bins: row_order and out_columns differ in length")
        for i in range(n_rows_out):
            if out_columns[i] < 0 or out_columns[i] >= out.shape[1]:
                raise ValueError(f"map_to_bins: column {out_columns[i]} outside "
                                 f"0..{out.shape[1] - 1}")
    cdef bint columns_contiguous = X.strides[0] == sizeof(raw_value_t)
    # Output rows per block (C order): their input rows stay in L2 while
    # every feature is read from them.
    cdef Py_ssize_t rows_per_block = max(<Py_ssize_t>MIN_ROW_BLOCK, min(
        <Py_ssize_t>ROW_BLOCK, ROW_BLOCK_BYTES // max(1, n_features * <Py_ssize_t>sizeof(raw_value_t))))
    cdef Py_ssize_t n_blocks = (n_rows_out + rows_per_block - 1) // rows_per_block
    cdef Py_ssize_t block, feature
    if n_blocks == 0 or n_features == 0:
        return
    if columns_contiguous:
        for feature in prange(n_features, nogil=True, schedule='dynamic',
                              num_threads=max(1, min(n_threads, n_features))):
            bin_rows(X, cuts, cut_offsets, n_bins, row_order, ordered, out_columns, placed,
                     out, feature, 0, n_rows_out, codes_are_values)
    else:
        for block in prange(n_blocks, nogil=True, schedule='static',
                            num_threads=max(1, min(n_threads, n_blocks))):
            for feature in range(n_features):
                bin_rows(X, cuts, cut_offsets, n_bins, row_order, ordered, out_columns,
                         placed, out, feature, block * rows_per_block,
                         min((block + 1) * rows_per_block, n_rows_out), codes_are_values)


cdef inline void bin_rows(
        const raw_value_t[:, :] X, const double[::1] cuts, const int64_t[::1] cut_offsets,
        const bin_index_t[::1] n_bins, const int64_t[::1] row_order, bint ordered,
        const int64_t[::1] out_columns, bint placed, bin_code_t[:, ::1] out,
        Py_ssize_t feature, Py_ssize_t start, Py_ssize_t end,
        bint codes_are_values) noexcept nogil:
    """Codes of output rows [start, end) of one feature."""
    cdef Py_ssize_t position, row, column
    if codes_are_values:
        for position in range(start, end):
            row = row_order[position] if ordered else position
            column = out_columns[position] if placed else position
            out[feature, column] = <bin_code_t>X[row, feature]
        return
    cdef Py_ssize_t n_cuts = cut_offsets[feature + 1] - cut_offsets[feature]
    cdef const double* feature_cuts = (&cuts[0] + cut_offsets[feature]
                                       if cuts.shape[0] > 0 else NULL)
    cdef double value
    for position in range(start, end):
        row = row_order[position] if ordered else position
        column = out_columns[position] if placed else position
        value = <double>X[row, feature]
        if value != value:  # NaN; compiled away for integer inputs
            out[feature, column] = <bin_code_t>n_bins[feature]
        else:
            out[feature, column] = <bin_code_t>count_cuts_below(feature_cuts, n_cuts, value)


def place_columns(
        const bin_code_t[:, ::1] piece,        # IN  (n_features, m) codes of m rows
        const int64_t[::1] rows,               # IN  (m,) their rows in ``out``
        bin_code_t[:, ::1] out,                # OUT (n_features, n_rows) rows ``rows`` set
        int n_threads,
):
    """``out[k, rows[i]] = piece[k, i]``: rows binned elsewhere put in their
    places (a Dask shard assembled from the pieces its input partitions
    binned). Threads take whole features; with ``rows`` ascending each
    feature's writes move forward through its row of ``out``."""
    cdef Py_ssize_t n_features = piece.shape[0]
    cdef Py_ssize_t m = piece.shape[1]
    cdef Py_ssize_t feature, i
    if out.shape[0] != n_features or rows.shape[0] != m:
        raise ValueError(f"place_columns: piece {piece.shape[0]}x{m}, rows {rows.shape[0]}, "
                         f"out {out.shape[0]} features")
    for i in range(m):
        if rows[i] < 0 or rows[i] >= out.shape[1]:
            raise ValueError(f"place_columns: row {rows[i]} outside 0..{out.shape[1] - 1}")
    if m == 0:
        return
    for feature in prange(n_features, nogil=True, schedule='static',
                          num_threads=max(1, min(n_threads, n_features))):
        for i in range(m):
            out[feature, rows[i]] = piece[feature, i]
