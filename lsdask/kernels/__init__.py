"""Pure numba kernels: arrays in, arrays out, no classes, no Dask.

Every kernel is serial and ``nogil``: parallelism comes from Dask's worker
processes and threads, never from numba's own thread pool.
"""

# First, before any kernel module: numba picks a function's cache folder when
# ``@numba.njit(cache=True)`` decorates it, and importing ``cache`` puts lsdask's
# locator first (compiled kernels go to a per-user folder, never the package).
from lsdask.kernels import cache  # noqa: F401

# isort: split
from lsdask.kernels.entropy import dense_entropy, sparse_entropy
from lsdask.kernels.features import (
    csr_matmul,
    outer_features,
    outer_features_into,
    pack_quadratic,
    unpack_quadratic,
    unpack_symmetric,
)
from lsdask.kernels.preselect import (
    bounded_candidates,
    float32_blocks,
    float32_dot_error_factor,
    float32_product,
    float32_underflow_error,
    pair_quadratic_forms,
    stack_candidates,
    topl_resp_from_candidates,
)
from lsdask.kernels.summaries import (
    dense_counts,
    dense_weighted_csr_rows,
    dense_weighted_rows,
    sparse_counts,
    sparse_outer_sums,
    sparse_to_dense,
    sparse_weighted_csr_rows,
    sparse_weighted_rows,
)
from lsdask.kernels.topl import (
    dense_resp_from_log_weights,
    dense_resp_into,
    select_top_l,
    topl_resp_from_log_weights,
)

__all__ = [
    "bounded_candidates",
    "csr_matmul",
    "dense_counts",
    "dense_entropy",
    "dense_resp_from_log_weights",
    "dense_resp_into",
    "dense_weighted_csr_rows",
    "dense_weighted_rows",
    "float32_blocks",
    "float32_dot_error_factor",
    "float32_product",
    "float32_underflow_error",
    "outer_features",
    "outer_features_into",
    "pack_quadratic",
    "pair_quadratic_forms",
    "select_top_l",
    "sparse_counts",
    "sparse_entropy",
    "sparse_outer_sums",
    "sparse_to_dense",
    "sparse_weighted_csr_rows",
    "sparse_weighted_rows",
    "stack_candidates",
    "topl_resp_from_candidates",
    "topl_resp_from_log_weights",
    "unpack_quadratic",
    "unpack_symmetric",
]
