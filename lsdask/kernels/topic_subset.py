"""E[log phi] of some topics only: the entries of a by-word sparse matrix whose
topic is kept, renumbered.

The HDP's delete move reruns the documents that use a candidate topic without
it, against the topics' ``E[log phi]`` as they are (stored by word: each word's
entries at the topics where ``lambda`` differs from the prior). The entries of
the kept topics, copied in one compiled pass to count and one to copy, are what
:meth:`lsdask.models.dirichlet_logs.SparseDirichletLogs.subset` gives, the same
values in the same order.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(nogil=True, cache=True)
def kept_topic_entries(indptr, topics, values, where):
    """The entries of the topics with ``where[t] >= 0``, topic ``t`` renumbered
    ``where[t]``: ``(indptr, topics, values)`` of the same layout (word ``v``'s
    entries at ``indptr[v]:indptr[v + 1]``, in their original order)."""
    V = indptr.shape[0] - 1
    n = 0
    for p in range(topics.shape[0]):
        n += where[topics[p]] >= 0
    out_ptr = np.zeros(V + 1, dtype=np.int64)
    out_topics = np.empty(n, dtype=topics.dtype)
    out_values = np.empty(n)
    q = 0
    for v in range(V):
        for p in range(indptr[v], indptr[v + 1]):
            t = where[topics[p]]
            if t >= 0:
                out_topics[q] = t
                out_values[q] = values[p]
                q += 1
        out_ptr[v + 1] = q
    return out_ptr, out_topics, out_values
