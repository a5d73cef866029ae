"""Learned Dirichlet priors of LDA: the document-topic ``alpha`` and the topic-word ``eta``
(math only).

The model is LDA as in the lsparse paper, App. C (Eq. 36-40), with an asymmetric
document-topic prior in place of Eq. 37's ``alpha/K`` and a symmetric topic-word prior
``eta`` (Eq. 36's ``lambda-bar``)::

    phi_k ~ Dir_V(eta, ..., eta),   k = 1..K        q(phi_k) = Dir(lambda_k)
    pi_d  ~ Dir_K(alpha_1, ..., alpha_K), d = 1..D  q(pi_d)  = Dir(theta_d)

with ``c_Dir(a) = lnGamma(sum_l a_l) - sum_l lnGamma(a_l)`` (Eq. 49). The symbols of
this module: ``S_k = sum_d E_q[log pi_dk] = sum_d (psi(theta_dk) - psi(sum_j theta_dj))``
(a K-vector; :func:`expected_log_pi_sums`), ``T = sum_k sum_v E_q[log phi_kv]`` (a
scalar; :func:`sum_expected_log_phi`) and ``n_kv`` for the topic-word counts that
``lda.py`` calls S (``lambda_kv = eta + n_kv``).

Which terms of the ELBO depend on the priors
--------------------------------------------
The ELBO is ``L = L_data + L_entropy + L_alloc`` (Eq. 42-45). With every q held fixed
(``r``, ``theta``, ``lambda``; hence ``N_dk``, ``E[log pi]``, ``E[log phi]`` fixed):

- ``L_alloc`` (Eq. 45, written out as Eq. 47-48 with ``alpha/K`` -> ``alpha_k``) is::

      sum_d [ c_Dir(alpha) - c_Dir(theta_d) + sum_k (N_dk + alpha_k - theta_dk) E[log pi_dk] ]

  (the ``-1`` of ``(alpha_k - 1) E[log pi_dk]`` in ``E[log p(pi_d)]`` cancels the ``+1``
  of ``-(theta_dk - 1) E[log pi_dk]`` in ``-E[log q(pi_d)]``). Its terms in alpha are::

      f(alpha) = D c_Dir(alpha) + sum_k alpha_k S_k
               = D [lnGamma(sum_k alpha_k) - sum_k lnGamma(alpha_k)] + sum_k alpha_k S_k

  and nothing else in ``L`` involves alpha (``L_data`` and ``L_entropy`` do not). So
  ``L(alpha', q) - L(alpha, q) = f(alpha') - f(alpha)`` exactly, and maximizing f with S
  fixed is an exact block-coordinate ascent step on the ELBO. lsdask's memo ``alloc``
  (``lda.py``) holds ``sum_d c_Dir(alpha) - c_Dir(theta_d)`` at ``theta_d = N_d + alpha``,
  where the last bracket vanishes; with S taken at the same ``theta_d``, the allocation
  term at ``(alpha', same q)`` is ``alloc + f(alpha') - f(alpha)``.
- ``L_data`` (Eq. 43, App. B.2; ``DirichletPosterior.elbo_terms`` in
  ``dirichlet_logs.py``) is ``sum_kv n_kv E[log phi_kv] - sum_k KL(Dir(lambda_k) ||
  Dir(eta 1_V))`` with ``KL = c_Dir(lambda_k) - c_Dir(eta 1_V) + sum_v (lambda_kv - eta)
  E[log phi_kv]``. Its terms in eta are::

      g(eta) = K c_Dir(eta 1_V) + eta T = K [lnGamma(V eta) - V lnGamma(eta)] + eta T

  (again the ``-1``'s of prior and posterior cancel), so ``L(eta', q) - L(eta, q) =
  g(eta') - g(eta)`` and ``sum_k KL`` at ``eta'`` is ``sum_k KL - (g(eta') - g(eta))``.

Where lsdask fits them
----------------------
``LDA(alpha="auto", eta="auto")`` fits both in the global step of memoized VI and
full-batch VB (``LDAModel.global_step`` in ``lda.py``), from the whole-data statistics
alone:

- alpha: the memo keeps, per batch, ``S``, ``W = sum_d sum_k (N_dk - theta_dk)
  E[log pi_dk]`` and ``Cdir = sum_d c_Dir(theta_d)`` of its documents' ``q(pi_d)``
  (HDP supplement, Sec. B-D), which give the allocation term at any prior with those q
  fixed (:func:`allocation_at`), whatever priors the batches were visited with. The new
  alpha is the maximizer of f given the summed S (:func:`fit_asymmetric_alpha`), so it
  raises the ELBO over every other prior, the previous one included: an exact
  block-coordinate ascent step.
- eta: ``lambda = eta + n`` and eta move together to the maximum of ``L_data`` over
  both, :func:`symmetric_eta_evidence` (:func:`fit_symmetric_eta_to_counts`), which the
  coordinate steps of :func:`fit_symmetric_eta` (T from the current lambda, then
  ``lambda = eta' + n``) approach only at a linear rate.

Each fit starts from the same symmetric prior (the estimator's default) and is kept
only where it raises its objective over that start, so the priors are a function of
the statistics: a resumed run, a loaded model and a checkpoint recompute them from the
memo, with nothing more to store. The next local steps (``theta_d = N_d + alpha'``)
are coordinate steps too, except that lsdask restarts each document cold, which need
not raise L (lsparse App. D.4).

Both f and g are strictly concave (Minka, *Estimating a Dirichlet distribution*, 2000).
f has a finite maximizer iff ``sum_k exp(S_k / D) < 1`` and g iff ``T < -K V log V``;
Jensen's inequality gives both, strictly, for statistics of actual Dirichlet posteriors
(``exp(E[log pi_k]) < E[pi_k]``, which sum to one), so the fitting functions reject
statistics that break them. Everything here is plain numpy/scipy on float64.
"""

from __future__ import annotations

import numbers
from typing import Any, Literal

import numpy as np
import scipy.sparse as sp
from scipy.special import digamma, gammaln, logsumexp, polygamma

# A fit replaces the start only if it raises the objective by more than this, relative to
# the size of the terms summed in f (or g): gains below it are rounding in those sums.
# Newton steps whose predicted gain is below it are taken without comparing values.
GAIN_RTOL = 1e-13
# Default iteration caps: Newton converges quadratically; Minka's fixed point converges
# linearly, at a rate psi'(sum alpha) sum_k 1 / psi'(alpha_k) that tends to one as the
# alpha_k grow (hundreds to thousands of iterations when alpha_k >> 1).
NEWTON_MAX_ITERS = 100
FIXED_POINT_MAX_ITERS = 10_000
# Step halvings tried by a Newton line search before falling back (alpha) or stopping.
MAX_HALVINGS = 60
# Largest Newton step in log(eta) (a factor of e^5 ~ 148), so extreme starts cannot overflow.
MAX_LOG_STEP = 5.0
# Inverse digamma: Newton iterations cap and the largest y accepted (exp(y) must not overflow).
INVPSI_MAX_ITERS = 50
INVPSI_Y_MAX = 700.0
_EULER = float(-digamma(1.0))  # Euler-Mascheroni gamma = -psi(1)

__all__ = [
    "ETA_CEILING",
    "FIXED_POINT_MAX_ITERS",
    "GAIN_RTOL",
    "NEWTON_MAX_ITERS",
    "allocation_at",
    "dirichlet_prior_gradient",
    "dirichlet_prior_hessian",
    "dirichlet_prior_objective",
    "expected_log_pi_sums",
    "fit_asymmetric_alpha",
    "fit_symmetric_eta",
    "fit_symmetric_eta_to_counts",
    "inverse_digamma",
    "sum_expected_log_phi",
    "symmetric_eta_derivatives",
    "symmetric_eta_evidence",
    "symmetric_eta_objective",
]


# --------------------------------------------------------------------- checks


def _is_real(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _check_positive(name: str, value: Any) -> float:
    if not _is_real(value) or not np.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a positive finite number; got {value!r}")
    return float(value)


def _check_n_docs(D: Any) -> float:
    if not _is_real(D) or not np.isfinite(D) or D <= 0:
        raise ValueError(f"D (number of documents) must be a positive finite number; got {D!r}")
    return float(D)


def _check_count(name: str, value: Any, minimum: int, what: str) -> int:
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{name} ({what}) must be an integer >= {minimum}; got {value!r}")
    return int(value)


def _check_S(S: Any) -> np.ndarray:
    arr = np.asarray(S, dtype=np.float64)
    if arr.ndim != 1 or arr.size < 2:
        raise ValueError(
            "S must be a 1-D array with one entry per topic, K >= 2 entries "
            f"(S_k = sum_d E[log pi_dk]); got shape {arr.shape}"
        )
    if not np.isfinite(arr).all():
        bad = int(np.argmax(~np.isfinite(arr)))
        raise ValueError(f"S must be finite; got S[{bad}] = {float(arr[bad])!r}")
    return arr


def _check_alpha(name: str, alpha: Any, K: int, *, scalar_ok: bool) -> np.ndarray:
    arr = np.asarray(alpha, dtype=np.float64)
    if scalar_ok and arr.ndim == 0:
        arr = np.full(K, float(arr))
    if arr.shape != (K,):
        shapes = "a scalar or shape" if scalar_ok else "shape"
        raise ValueError(
            f"{name} must have {shapes} ({K},), one entry per topic of S; got shape {arr.shape}"
        )
    if not (np.isfinite(arr).all() and arr.min() > 0.0):
        bad = int(np.argmax(~(np.isfinite(arr) & (arr > 0.0))))
        raise ValueError(
            f"{name} must be positive and finite; got {name}[{bad}] = {float(arr[bad])!r}"
        )
    return arr


def _check_finite_scalar(name: str, value: Any) -> float:
    if not _is_real(value) or not np.isfinite(value):
        raise ValueError(f"{name} must be a finite number; got {value!r}")
    return float(value)


def _check_iters(max_iters: Any, default: int) -> int:
    if max_iters is None:
        return default
    return _check_count("max_iters", max_iters, 1, "iteration cap")


def _check_tol(tol: Any) -> float:
    if not _is_real(tol) or not np.isfinite(tol) or tol < 0:
        raise ValueError(f"tol must be a finite number >= 0; got {tol!r}")
    return float(tol)


def _check_alpha_problem(S: Any, D: Any) -> tuple[np.ndarray, float]:
    S = _check_S(S)
    D = _check_n_docs(D)
    lse = float(logsumexp(S / D))
    if lse >= 0.0:
        raise ValueError(
            "S / D must satisfy sum_k exp(S_k / D) < 1, or f(alpha) has no finite maximum "
            "(S_k = sum_d E[log pi_dk] over D documents always does); got sum_k exp(S_k / D) "
            f"= {np.exp(lse)!r}. Check that S and D summarize the same documents."
        )
    return S, D


def _check_eta_problem(T: Any, K: Any, V: Any) -> tuple[float, int, int]:
    T = _check_finite_scalar("T", T)
    K = _check_count("K", K, 1, "number of topics")
    V = _check_count("V", V, 2, "vocabulary size")
    return T, K, V


# --------------------------------------------------------------- statistics


def expected_log_pi_sums(theta: Any) -> np.ndarray:
    """``S_k = sum_d E_q[log pi_dk]`` from the document posteriors ``q(pi_d) = Dir(theta_d)``.

    ``E[log pi_dk] = psi(theta_dk) - psi(sum_j theta_dj)`` (lsparse Eq. 50), summed over
    documents: the statistic of alpha in :func:`dirichlet_prior_objective`. A memo adds the
    S of its batches.

    Parameters
    ----------
    theta : array_like, shape (D, K)
        Dirichlet parameters, one row per document, positive and finite.

    Returns
    -------
    numpy.ndarray, shape (K,)
        ``S``; zeros when ``D = 0``.
    """
    theta = np.asarray(theta, dtype=np.float64)
    if theta.ndim != 2 or theta.shape[1] == 0:
        raise ValueError(
            f"theta must be a 2-D array (documents x topics) with K >= 1 columns; "
            f"got shape {theta.shape}"
        )
    if theta.size and not (np.isfinite(theta).all() and theta.min() > 0.0):
        d, k = np.argwhere(~(np.isfinite(theta) & (theta > 0.0)))[0]
        raise ValueError(
            f"theta must be positive and finite; got theta[{d}, {k}] = {float(theta[d, k])!r}"
        )
    elog = digamma(theta) - digamma(theta.sum(axis=1, keepdims=True))
    return elog.sum(axis=0)


def _count_entries(
    counts: Any, row_totals: Any = None
) -> tuple[np.ndarray, np.ndarray, int, int, np.ndarray]:
    """``(data, rows, K, V, totals)``: the stored entries of ``counts`` (K, V), the row
    of each, the shape and the row totals ``n_k.`` (``row_totals`` where given), checked."""
    if sp.issparse(counts):
        X = sp.csr_matrix(counts)
        if not X.has_canonical_format:
            X = X.copy()
            X.sum_duplicates()
        K, V = X.shape
        data = np.asarray(X.data, dtype=np.float64)
        rows = np.repeat(np.arange(K), np.diff(X.indptr))
    else:
        arr = np.asarray(counts, dtype=np.float64)
        if arr.ndim != 2:
            raise ValueError(
                f"counts must be a 2-D (topics x words) array or sparse matrix; "
                f"got shape {arr.shape}"
            )
        K, V = arr.shape
        rows, cols = np.nonzero(arr)
        data = arr[rows, cols]
    if K < 1 or V < 1:
        raise ValueError(f"counts must have K >= 1 rows and V >= 1 columns; got shape {(K, V)}")
    if data.size and not (np.isfinite(data).all() and data.min() >= 0.0):
        bad = data[~(np.isfinite(data) & (data >= 0.0))][0]
        raise ValueError(f"counts must be finite and non-negative; got an entry {float(bad)!r}")
    if row_totals is None:
        totals = np.bincount(rows, weights=data, minlength=K)
    else:
        totals = np.asarray(row_totals, dtype=np.float64)
        if totals.shape != (K,):
            raise ValueError(
                f"row_totals must have shape ({K},), one total per row of counts; "
                f"got shape {totals.shape}"
            )
        if not (np.isfinite(totals).all() and totals.min() >= 0.0):
            bad = totals[~(np.isfinite(totals) & (totals >= 0.0))][0]
            raise ValueError(
                f"row_totals must be finite and non-negative; got an entry {float(bad)!r}"
            )
    return data, rows, K, V, totals


def sum_expected_log_phi(eta: float, counts: Any, row_totals: Any = None) -> float:
    """``T = sum_k sum_v E_q[log phi_kv]`` for ``q(phi_k) = Dir(eta + n_k)``, in O(nnz + K).

    With ``lambda_kv = eta + n_kv`` and ``Lambda_k = sum_v lambda_kv = V eta + n_k.``
    (``n_k.`` the row total), ``E[log phi_kv] = psi(lambda_kv) - psi(Lambda_k)``. Every
    entry of row k with ``n_kv = 0`` has the same value ``psi(eta) - psi(Lambda_k)``, so
    with ``m_k`` the number of stored entries of row k::

        T = sum_{(k, v) stored} psi(eta + n_kv) + (K V - sum_k m_k) psi(eta)
            - V sum_k psi(V eta + n_k.)

    Explicitly stored zeros are exact too (``psi(eta + 0) = psi(eta)``). ``eta`` must be the
    prior that built ``lambda`` (the current one), not a candidate: T is a statistic of q,
    held fixed while :func:`fit_symmetric_eta` moves eta. (From lsdask's
    ``DirichletPosterior`` built with prior ``eta``, T is also ``stored.elog.sum() + sum_k
    (V - nnz_k) logs.base[k]``.)

    Parameters
    ----------
    eta : float
        The topic-word prior that built ``lambda``, > 0.
    counts : scipy.sparse matrix or array_like, shape (K, V)
        ``n_kv >= 0``, finite. Sparse input is read as CSR (duplicate entries are summed,
        on a copy); dense input is scanned for its nonzeros.
    row_totals : array_like, shape (K,), optional
        ``n_k. = sum_v n_kv`` where already at hand (e.g. the memo's tokens per topic);
        must equal the row sums of ``counts`` (not checked). Computed when omitted.

    Returns
    -------
    float
    """
    eta = _check_positive("eta", eta)
    data, _, K, V, totals = _count_entries(counts, row_totals)
    stored = float(digamma(eta + data).sum())
    zeros = (K * V - data.size) * float(digamma(eta))
    return stored + zeros - V * float(digamma(V * eta + totals).sum())


# ------------------------------------------------------------------ objective


def _f(alpha: np.ndarray, S: np.ndarray, D: float) -> float:
    return float(D * (gammaln(alpha.sum()) - gammaln(alpha).sum()) + alpha @ S)


def _f_rounding(alpha: np.ndarray, S: np.ndarray, D: float) -> float:
    """``GAIN_RTOL`` times the size of the terms summed in f: differences of f below it are
    rounding (f itself is often small next to its terms, e.g. when alpha is large)."""
    lgamma_terms = abs(gammaln(alpha.sum())) + np.abs(gammaln(alpha)).sum()
    size = D * lgamma_terms + np.abs(alpha) @ np.abs(S)
    return GAIN_RTOL * (1.0 + float(size))


def _grad(alpha: np.ndarray, S: np.ndarray, D: float) -> np.ndarray:
    return D * (digamma(alpha.sum()) - digamma(alpha)) + S


def dirichlet_prior_objective(alpha: Any, S: Any, D: float) -> float:
    """The terms of the LDA ELBO that depend on the document-topic prior, with q fixed::

        f(alpha) = D [lnGamma(sum_k alpha_k) - sum_k lnGamma(alpha_k)] + sum_k alpha_k S_k

    i.e. ``D c_Dir(alpha) + alpha . S`` (lsparse Eq. 47-49 with ``alpha/K`` -> ``alpha_k``;
    see the module docstring for why the ELBO changes by exactly the change of f when only
    alpha moves).

    Parameters
    ----------
    alpha : array_like, shape (K,)
        Positive.
    S : array_like, shape (K,)
        ``S_k = sum_d E_q[log pi_dk]`` (:func:`expected_log_pi_sums`).
    D : float
        Number of documents summarized in S, > 0.

    Returns
    -------
    float
    """
    S = _check_S(S)
    D = _check_n_docs(D)
    alpha = _check_alpha("alpha", alpha, S.size, scalar_ok=False)
    return _f(alpha, S, D)


def allocation_at(alpha: Any, S: Any, W: float, Cdir: float, D: float) -> float:
    """The allocation term of the ELBO at the prior alpha, every ``q(pi_d)`` held fixed::

        L_alloc(alpha) = D c_Dir(alpha) + alpha . S + W - Cdir

    from the statistics a memo keeps of the local steps (``lsdask.kernels.lda``):
    ``S_k = sum_d E_q[log pi_dk]``, ``W = sum_d sum_k (N_dk - theta_dk) E_q[log pi_dk]``
    and ``Cdir = sum_d c_Dir(theta_d)``, summed over batches whose documents may have
    been fitted at other priors (each ``theta_d`` is whatever its q is). It is lsparse
    Eq. 45 written out (Eq. 47-48 with ``alpha/K -> alpha_k``; HDP supplement Sec. D):
    ``sum_d c_Dir(alpha) - c_Dir(theta_d) + sum_k (N_dk + alpha_k - theta_dk)
    E[log pi_dk]``, and ``L_alloc(alpha) - L_alloc(alpha') = f(alpha) - f(alpha')``
    (:func:`dirichlet_prior_objective`).

    Parameters
    ----------
    alpha : array_like, shape (K,)
        Positive.
    S : array_like, shape (K,)
        Finite.
    W, Cdir : float
        Finite.
    D : float
        Number of documents summarized, >= 0 (0: the term is ``W - Cdir``).

    Returns
    -------
    float
    """
    S = np.asarray(S, dtype=np.float64)
    if S.ndim != 1 or S.size < 1 or not np.isfinite(S).all():
        raise ValueError(f"S must be a finite 1-D array, one entry per topic; got {S!r}")
    alpha = _check_alpha("alpha", alpha, S.size, scalar_ok=False)
    W = _check_finite_scalar("W", W)
    Cdir = _check_finite_scalar("Cdir", Cdir)
    if not _is_real(D) or not np.isfinite(D) or D < 0:
        raise ValueError(f"D (number of documents) must be a finite number >= 0; got {D!r}")
    prior = float(D) * float(gammaln(alpha.sum()) - gammaln(alpha).sum())
    return prior + float(alpha @ S) + W - Cdir


def dirichlet_prior_gradient(alpha: Any, S: Any, D: float) -> np.ndarray:
    """Gradient of :func:`dirichlet_prior_objective`::

        df/dalpha_k = D [psi(sum_j alpha_j) - psi(alpha_k)] + S_k

    Parameters
    ----------
    alpha, S, D
        As in :func:`dirichlet_prior_objective`.

    Returns
    -------
    numpy.ndarray, shape (K,)
    """
    S = _check_S(S)
    D = _check_n_docs(D)
    alpha = _check_alpha("alpha", alpha, S.size, scalar_ok=False)
    return _grad(alpha, S, D)


def dirichlet_prior_hessian(alpha: Any, D: float) -> tuple[np.ndarray, float]:
    """Hessian of :func:`dirichlet_prior_objective` as diagonal plus rank one (Minka 2000)::

        H = diag(q) + z 1 1^T,   q_k = -D psi'(alpha_k),   z = D psi'(sum_j alpha_j)

    (``psi'`` the trigamma function; H does not depend on S). H is negative definite,
    ``1 + z sum_k 1/q_k > 0``, and ``H^{-1} g = (g - b) / q`` with
    ``b = sum_k (g_k / q_k) / (1/z + sum_k 1/q_k)``: the O(K) Newton step of
    :func:`fit_asymmetric_alpha`.

    Parameters
    ----------
    alpha : array_like, shape (K,)
        Positive.
    D : float
        Number of documents, > 0.

    Returns
    -------
    q : numpy.ndarray, shape (K,)
        The diagonal part (negative).
    z : float
        The rank-one coefficient (positive).
    """
    D = _check_n_docs(D)
    alpha = np.asarray(alpha, dtype=np.float64)
    if alpha.ndim != 1 or alpha.size < 1:
        raise ValueError(f"alpha must be a non-empty 1-D array; got shape {alpha.shape}")
    alpha = _check_alpha("alpha", alpha, alpha.size, scalar_ok=False)
    return -D * polygamma(1, alpha), float(D * polygamma(1, alpha.sum()))


# ------------------------------------------------------------ inverse digamma


def inverse_digamma(y: Any) -> np.ndarray:
    """``x > 0`` with ``psi(x) = y``, elementwise, by Newton's method (Minka 2000, the appendix
    on inverting psi).

    Minka's start, ``x0 = exp(y) + 1/2`` for ``y >= -2.22`` and ``x0 = -1 / (y + gamma)``
    below (``gamma = -psi(1)``, Euler's constant; ``psi(x) ~ -1/x - gamma`` near 0), then
    ``x <- x - (psi(x) - y) / psi'(x)`` until the step is below four ulps of x. psi is
    concave and increasing, so after the first step the iterates approach the root from
    below, monotonically and quadratically (a step that would make x <= 0 halves x
    instead).

    Parameters
    ----------
    y : array_like
        Finite, at most ``INVPSI_Y_MAX`` (700; x is about ``exp(y)``).

    Returns
    -------
    numpy.ndarray
        Same shape as y (0-d for a scalar).
    """
    y = np.asarray(y, dtype=np.float64)
    if not np.isfinite(y).all() or (y.size and y.max() > INVPSI_Y_MAX):
        bad = y[~(np.isfinite(y) & (y <= INVPSI_Y_MAX))].ravel()[0]
        raise ValueError(
            f"y must be finite and <= {INVPSI_Y_MAX} (psi^-1(y) ~ exp(y) overflows beyond); "
            f"got {float(bad)!r}"
        )
    big = y >= -2.22
    x = np.empty_like(y)
    x[big] = np.exp(y[big]) + 0.5
    x[~big] = -1.0 / (y[~big] + _EULER)
    for _ in range(INVPSI_MAX_ITERS):
        step = (digamma(x) - y) / polygamma(1, x)
        new = x - step
        new = np.where(new > 0.0, new, 0.5 * x)
        done = np.abs(new - x) <= 4.0 * np.finfo(np.float64).eps * x
        x = new
        if done.all():
            break
    return x


# ------------------------------------------------------------- fitting alpha


def _newton_direction(alpha: np.ndarray, g: np.ndarray, D: float, free: np.ndarray) -> np.ndarray:
    """``-H_FF^{-1} g_F`` on the free coordinates F, zero elsewhere (no checks).

    The Hessian restricted to F is again ``diag(q_F) + z 1 1^T`` with the same z (the
    fixed coordinates only shift ``sum alpha``), so the O(K) inverse applies.
    """
    d = np.zeros_like(alpha)
    if not free.any():
        return d
    t = polygamma(1, alpha[free])  # -q / D
    u = float(polygamma(1, alpha.sum()))  # z / D
    gf = g[free]
    # b = sum(g/q) / (1/z + sum 1/q) with q = -D t, z = D u; the D's cancel in b
    b = -np.sum(gf / t) / (1.0 / u - np.sum(1.0 / t))
    d[free] = (gf - b) / (D * t)  # -(g - b) / q
    return d


def _fixed_point_step(alpha: np.ndarray, S: np.ndarray, D: float, floor: float) -> np.ndarray:
    """Minka's fixed point ``alpha_k <- max(invpsi(psi(sum alpha) + S_k / D), floor)``."""
    return np.maximum(inverse_digamma(digamma(alpha.sum()) + S / D), floor)


def _newton_step_size(
    alpha: np.ndarray, S: np.ndarray, D: float, floor: float
) -> tuple[np.ndarray, float, float]:
    """The projected Newton direction, its largest relative entry and the gain the
    quadratic model predicts for it, ``g . d / 2``."""
    g = _grad(alpha, S, D)
    free = (alpha > floor) | (g > 0.0)  # at the floor and pushed down: held there
    d = _newton_direction(alpha, g, D, free)
    return d, float(np.max(np.abs(d) / alpha)), 0.5 * float(g @ d)


def _fit_newton(
    S: np.ndarray, D: float, alpha: np.ndarray, floor: float, max_iters: int, tol: float
) -> np.ndarray:
    value = _f(alpha, S, D)
    for _ in range(max_iters):
        d, rel, gain = _newton_step_size(alpha, S, D, floor)
        if rel <= tol:  # within the quadratic region: the full step, then stop
            return np.maximum(alpha + d, floor)
        if gain <= _f_rounding(alpha, S, D):
            # comparing values of f cannot see this step: near the maximum, take it whole
            alpha = np.maximum(alpha + d, floor)
            value = _f(alpha, S, D)
            continue
        step = 1.0
        for _ in range(MAX_HALVINGS):
            trial = np.maximum(alpha + step * d, floor)
            trial_value = _f(trial, S, D)
            if trial_value >= value:
                break
            step *= 0.5
        else:
            # the projected direction failed (rounding at the optimum, or a projection
            # that turned it downhill): one fixed-point step, which never decreases f
            trial = _fixed_point_step(alpha, S, D, floor)
            trial_value = _f(trial, S, D)
            if not trial_value >= value:
                break
        if np.array_equal(trial, alpha):
            break
        alpha, value = trial, trial_value
    return alpha


def _fit_fixed_point(
    S: np.ndarray, D: float, alpha: np.ndarray, floor: float, max_iters: int, tol: float
) -> np.ndarray:
    for _ in range(max_iters):
        if _newton_step_size(alpha, S, D, floor)[1] <= tol:
            break
        new = _fixed_point_step(alpha, S, D, floor)
        if np.array_equal(new, alpha):
            break
        alpha = new
    return alpha


def fit_asymmetric_alpha(
    S: Any,
    D: float,
    alpha0: Any,
    *,
    floor: float = 1e-4,
    max_iters: int | None = None,
    tol: float = 1e-10,
    method: Literal["newton", "fixed-point"] = "newton",
) -> np.ndarray:
    """Maximize :func:`dirichlet_prior_objective` over ``alpha >= floor`` with S fixed.

    The Dirichlet maximum-likelihood problem from sufficient statistics (Minka 2000;
    gensim's ``alpha="auto"`` takes one damped step of the Newton method per update,
    tomotopy's ``optim_interval`` iterates the fixed point). f is strictly concave, with
    gradient ``g_k = D [psi(sum alpha) - psi(alpha_k)] + S_k`` and Hessian
    ``diag(q) + z 1 1^T`` (:func:`dirichlet_prior_hessian`).

    - ``"newton"``: ``alpha <- alpha - t H^{-1} g``, inverted in O(K), projected onto
      ``alpha >= floor``; coordinates at the floor whose gradient points down are held
      there and the step is taken in the others (projected Newton). ``t`` starts at 1 and
      is halved until f does not decrease; if 60 halvings fail, one fixed-point step is
      taken instead (it never decreases f), and the fit stops if that fails too. A step
      whose predicted gain ``g . d / 2`` is below the rounding of f (``GAIN_RTOL`` times the
      size of its terms: with large alpha, f is a small difference of terms of order
      ``D lnGamma(sum alpha)``) is taken whole, as values of f cannot judge it.
    - ``"fixed-point"``: ``alpha_k <- max(invpsi(psi(sum_j alpha_j) + S_k / D), floor)``
      (:func:`inverse_digamma`). It maximizes the minorizer of f obtained by replacing the
      convex ``lnGamma(sum alpha)`` with its tangent at the current point, so f never
      decreases; convergence is linear and slow when the alpha_k are large.

    Both stop when the (projected) Newton step is below ``tol`` relative to every alpha_k
    (Newton then takes that last full step), so both reach the same point; at a maximizer
    on the floor, ``g_k <= 0`` where ``alpha_k = floor`` and ``g_k = 0`` elsewhere.

    The result is returned only if it raises f over ``alpha0`` by more than rounding
    (``GAIN_RTOL`` times the size of the terms of f); otherwise a copy of ``alpha0`` is.
    So the ELBO never decreases, and a start at the optimum is not moved by rounding. A
    start below the floor is first raised to it.

    Parameters
    ----------
    S : array_like, shape (K,)
        ``S_k = sum_d E_q[log pi_dk]``, K >= 2, finite, with ``sum_k exp(S_k / D) < 1``
        (always true of actual statistics; otherwise f has no maximum).
    D : float
        Number of documents summarized in S, > 0.
    alpha0 : float or array_like, shape (K,)
        Start (the current prior), positive; a scalar is used for every topic.
    floor : float
        Lower bound on every alpha_k, > 0.
    max_iters : int, optional
        Iteration cap; default ``NEWTON_MAX_ITERS`` (100) for Newton and
        ``FIXED_POINT_MAX_ITERS`` (10 000) for the fixed point.
    tol : float
        Stop when the Newton step is below ``tol * alpha_k`` in every coordinate, >= 0.
    method : {"newton", "fixed-point"}

    Returns
    -------
    numpy.ndarray, shape (K,)
        The fitted alpha (``>= floor``), or ``alpha0`` if that does not raise f.
    """
    S, D = _check_alpha_problem(S, D)
    alpha0 = _check_alpha("alpha0", alpha0, S.size, scalar_ok=True)
    floor = _check_positive("floor", floor)
    tol = _check_tol(tol)
    if method == "newton":
        iters = _check_iters(max_iters, NEWTON_MAX_ITERS)
        fit = _fit_newton
    elif method == "fixed-point":
        iters = _check_iters(max_iters, FIXED_POINT_MAX_ITERS)
        fit = _fit_fixed_point
    else:
        raise ValueError(f"method must be 'newton' or 'fixed-point'; got {method!r}")
    start_value = _f(alpha0, S, D)
    with np.errstate(over="ignore", invalid="ignore"):  # far trial points are rejected
        alpha = fit(S, D, np.maximum(alpha0, floor), floor, iters, tol)
        value = _f(alpha, S, D) if np.isfinite(alpha).all() else -np.inf
    if np.isfinite(value) and value > start_value + _f_rounding(alpha0, S, D):
        return alpha
    return alpha0.copy()


# --------------------------------------------------------------- fitting eta


def _g(eta: float, T: float, K: int, V: int) -> float:
    return float(K * (gammaln(V * eta) - V * gammaln(eta)) + eta * T)


def _g_rounding(eta: float, T: float, K: int, V: int) -> float:
    """``GAIN_RTOL`` times the size of the terms summed in g (see :func:`_f_rounding`)."""
    size = K * (abs(gammaln(V * eta)) + V * abs(gammaln(eta))) + abs(eta * T)
    return GAIN_RTOL * (1.0 + float(size))


def _g_derivs(eta: float, T: float, K: int, V: int) -> tuple[float, float]:
    g1 = K * V * (digamma(V * eta) - digamma(eta)) + T
    g2 = K * V * (V * polygamma(1, V * eta) - polygamma(1, eta))
    return float(g1), float(g2)


def symmetric_eta_objective(eta: float, T: float, K: int, V: int) -> float:
    """The terms of the LDA ELBO that depend on the symmetric topic-word prior, with q fixed::

        g(eta) = K [lnGamma(V eta) - V lnGamma(eta)] + eta T

    i.e. ``K c_Dir(eta 1_V) + eta T`` from ``-sum_k KL(Dir(lambda_k) || Dir(eta 1_V))``
    (lsparse Eq. 43, App. B.2), ``T = sum_kv E_q[log phi_kv]``
    (:func:`sum_expected_log_phi`).

    Parameters
    ----------
    eta : float
        > 0.
    T : float
        Finite.
    K : int
        Number of topics, >= 1.
    V : int
        Vocabulary size, >= 2.

    Returns
    -------
    float
    """
    eta = _check_positive("eta", eta)
    T, K, V = _check_eta_problem(T, K, V)
    return _g(eta, T, K, V)


def symmetric_eta_derivatives(eta: float, T: float, K: int, V: int) -> tuple[float, float]:
    """First and second derivatives of :func:`symmetric_eta_objective` in eta::

        g'(eta)  = K V [psi(V eta) - psi(eta)] + T
        g''(eta) = K V [V psi'(V eta) - psi'(eta)]   (< 0: g is strictly concave)

    Parameters
    ----------
    eta, T, K, V
        As in :func:`symmetric_eta_objective`.

    Returns
    -------
    (float, float)
    """
    eta = _check_positive("eta", eta)
    T, K, V = _check_eta_problem(T, K, V)
    return _g_derivs(eta, T, K, V)


def fit_symmetric_eta(
    T: float,
    K: int,
    V: int,
    eta0: float,
    *,
    floor: float = 1e-6,
    max_iters: int = NEWTON_MAX_ITERS,
    tol: float = 1e-12,
) -> float:
    """Maximize :func:`symmetric_eta_objective` over ``eta >= floor`` with T fixed.

    Newton's method in ``u = log eta``, with ``dg/du = eta g'`` and ``d2g/du2 = eta g' +
    eta^2 g''``: the step ``-(dg/du) / (d2g/du2)`` where that curvature is negative, else a
    step of ``MAX_LOG_STEP`` uphill; steps are capped at ``MAX_LOG_STEP`` (a factor of about
    148 in eta), projected onto ``u >= log(floor)`` and halved until g does not decrease
    (taken whole when its predicted gain is below the rounding of g).
    It stops when the step is below ``tol`` (then taking it) or no halving helps.

    The result is returned only if it raises g over ``eta0`` by more than rounding
    (``GAIN_RTOL`` times the size of the terms of g), otherwise ``eta0`` is, so the ELBO
    never decreases. A start below the floor is first raised to it.

    Parameters
    ----------
    T : float
        ``sum_k sum_v E_q[log phi_kv]`` of the current q (:func:`sum_expected_log_phi`);
        must be ``< -K V log V`` (always true of actual statistics; otherwise g has no
        maximum).
    K : int
        Number of topics, >= 1.
    V : int
        Vocabulary size, >= 2.
    eta0 : float
        Start (the current prior), > 0.
    floor : float
        Lower bound on eta, > 0.
    max_iters : int
        Newton iterations cap, >= 1.
    tol : float
        Stop when the Newton step in ``log eta`` is below this, >= 0.

    Returns
    -------
    float
    """
    T, K, V = _check_eta_problem(T, K, V)
    bound = -K * V * float(np.log(V))
    if not T < bound:
        raise ValueError(
            f"T must be < -K V log V = {bound!r}, or g(eta) has no finite maximum "
            f"(T = sum_kv E[log phi_kv] of K Dirichlet posteriors always is); got T = {T!r}"
        )
    eta0 = _check_positive("eta0", eta0)
    floor = _check_positive("floor", floor)
    max_iters = _check_count("max_iters", max_iters, 1, "iteration cap")
    tol = _check_tol(tol)
    start_value = _g(eta0, T, K, V)
    u_floor = float(np.log(floor))
    u = max(float(np.log(eta0)), u_floor)

    def eta_at(u: float) -> float:
        return floor if u <= u_floor else float(np.exp(u))  # the floor itself at the floor

    with np.errstate(over="ignore", invalid="ignore"):
        value = _g(eta_at(u), T, K, V)
        for _ in range(max_iters):
            eta = eta_at(u)
            g1, g2 = _g_derivs(eta, T, K, V)
            du_dg, curv = eta * g1, eta * g1 + eta * eta * g2
            step = -du_dg / curv if curv < 0.0 else np.sign(du_dg) * MAX_LOG_STEP
            step = float(np.clip(step, -MAX_LOG_STEP, MAX_LOG_STEP))
            if u <= u_floor and step < 0.0:
                break  # at the floor, pushed down
            if abs(step) <= tol:
                u = max(u + step, u_floor)
                break
            predicted = du_dg * step + 0.5 * curv * step * step  # quadratic model's gain
            if curv < 0.0 and predicted <= _g_rounding(eta, T, K, V):
                u = max(u + step, u_floor)  # too small for values of g to judge: take it
                value = _g(eta_at(u), T, K, V)
                continue
            t = 1.0
            for _ in range(MAX_HALVINGS):
                trial = max(u + t * step, u_floor)
                trial_value = _g(eta_at(trial), T, K, V)
                if trial_value >= value:
                    break
                t *= 0.5
            else:
                break
            if trial == u:
                break
            u, value = trial, trial_value
        eta = eta_at(u)
        value = _g(eta, T, K, V)
    if np.isfinite(value) and value > start_value + _g_rounding(eta0, T, K, V):
        return eta
    return eta0


# ---------------------------------------------- eta with the topics re-optimized

#: Largest eta :func:`fit_symmetric_eta_to_counts` returns: counts no more dispersed
#: than those of a uniform multinomial make h rise without bound.
ETA_CEILING = 1e6


def _h_parts(
    eta: float, data: np.ndarray, totals: np.ndarray, K: int, V: int
) -> tuple[float, float, float, float]:
    """The terms of h at eta (one lnGamma per stored entry and per topic)."""
    return (
        K * float(gammaln(V * eta)),
        float(gammaln(V * eta + totals).sum()),
        float(gammaln(eta + data).sum()),
        data.size * float(gammaln(eta)),
    )


def _h(eta: float, data: np.ndarray, totals: np.ndarray, K: int, V: int) -> tuple[float, float]:
    """h at eta, and ``GAIN_RTOL`` times the size of the terms summed in it (see
    :func:`_f_rounding`)."""
    prior, posterior, stored, base = _h_parts(eta, data, totals, K, V)
    size = abs(prior) + abs(posterior) + abs(stored) + abs(base)
    return prior - posterior + stored - base, GAIN_RTOL * (1.0 + size)


def _trigamma(x: np.ndarray) -> np.ndarray:
    """``psi'(x)`` for x > 0, elementwise: ``sum_{i<6} 1/(x+i)^2`` plus the asymptotic
    series at ``x + 6`` (relative error below 1e-11; a few times faster than
    ``scipy.special.polygamma(1, x)``, which goes through the Hurwitz zeta function)."""
    inv = 1.0 / (x + 6.0)
    inv2 = inv * inv
    series = 1.0 / 6 - inv2 * (1.0 / 30 - inv2 * (1.0 / 42 - inv2 * (1.0 / 30 - inv2 * (5.0 / 66))))
    out = inv + 0.5 * inv2 + inv * inv2 * series
    for i in range(6):
        shifted = x + i
        out += 1.0 / (shifted * shifted)
    return out


def _h_derivs(
    eta: float, data: np.ndarray, totals: np.ndarray, K: int, V: int
) -> tuple[float, float]:
    m = data.size
    h1 = (
        K * V * digamma(V * eta)
        - V * digamma(V * eta + totals).sum()
        + digamma(eta + data).sum()
        - m * digamma(eta)
    )
    h2 = (
        K * V * V * polygamma(1, V * eta)
        - V * V * _trigamma(V * eta + totals).sum()
        + _trigamma(eta + data).sum()
        - m * polygamma(1, eta)
    )
    return float(h1), float(h2)


def _T(eta: float, data: np.ndarray, totals: np.ndarray, K: int, V: int) -> float:
    """:func:`sum_expected_log_phi` of checked entries."""
    stored = float(digamma(eta + data).sum())
    return (
        stored
        + (K * V - data.size) * float(digamma(eta))
        - V * float(digamma(V * eta + totals).sum())
    )


def symmetric_eta_evidence(eta: float, counts: Any) -> float:
    """The topic terms of the LDA ELBO at the best topics for eta, as a function of eta::

        h(eta) = max_lambda L_data(eta, lambda)
               = sum_k [c_Dir(eta 1_V) - c_Dir(eta 1_V + n_k)]
               = sum_k [lnGamma(V eta) - lnGamma(V eta + n_k.)]
                 + sum_{(k, v): n_kv > 0} [lnGamma(eta + n_kv) - lnGamma(eta)]

    ``L_data`` (lsparse Eq. 43, App. B.2) is maximized over ``q(phi_k) = Dir(lambda_k)``
    by ``lambda = eta + n`` (the global step), where its ``E[log phi]`` terms cancel:
    h is the log Dirichlet-multinomial (Polya) likelihood of the counts, without the
    multinomial coefficients (Minka 2000), in O(nnz + K). Its derivative is that of
    :func:`symmetric_eta_objective` at ``T = sum_expected_log_phi(eta, counts)`` (the
    lambda terms are stationary), so its maximizer is the fixed point of
    :func:`fit_symmetric_eta` alternated with the global step.

    Parameters
    ----------
    eta : float
        > 0.
    counts : scipy.sparse matrix or array_like, shape (K, V)
        ``n_kv >= 0``, finite (as in :func:`sum_expected_log_phi`).

    Returns
    -------
    float
    """
    eta = _check_positive("eta", eta)
    data, _, K, V, totals = _count_entries(counts)
    return _h(eta, data, totals, K, V)[0]


def fit_symmetric_eta_to_counts(
    counts: Any,
    eta0: float,
    *,
    floor: float = 1e-6,
    ceiling: float = ETA_CEILING,
    max_iters: int = NEWTON_MAX_ITERS,
    tol: float = 1e-12,
) -> float:
    """Maximize :func:`symmetric_eta_evidence` over ``floor <= eta <= ceiling``.

    What the global step of ``eta="auto"`` does: eta and the topics ``lambda = eta +
    n`` move together to the best pair for the counts n, the maximum of ``L_data`` over
    both. :func:`fit_symmetric_eta` (T from the current lambda, then the global step)
    is one coordinate-ascent step towards it, an EM step; those converge at a rate of
    about one minus the share of stored entries, slowly for sparse counts. Here:
    Newton's method in ``u = log eta`` on h itself, with ``dh/du = eta h'`` and
    ``d2h/du2 = eta h' + eta^2 h''``, steps capped at ``MAX_LOG_STEP`` and halved
    until h rises (taken whole where their predicted gain is below the rounding of
    h). Where no halving raises h, one coordinate step (:func:`fit_symmetric_eta` at
    ``T = sum_expected_log_phi(eta, counts)``), which never decreases h, is taken
    instead; the fit stops if that does not raise h either, or when the Newton step
    is below ``tol``.

    The result is returned only if it raises h over ``eta0`` by more than rounding
    (``GAIN_RTOL`` times the size of the terms of h), otherwise ``eta0`` is; a start
    outside ``[floor, ceiling]`` is first moved into it.

    Parameters
    ----------
    counts : scipy.sparse matrix or array_like, shape (K, V)
        Topic-word counts ``n_kv >= 0``, finite, V >= 2.
    eta0 : float
        Start, > 0.
    floor, ceiling : float
        Bounds on eta, ``0 < floor <= ceiling``.
    max_iters : int
        Newton iterations cap, >= 1.
    tol : float
        Stop when the Newton step in ``log eta`` is below this, >= 0.

    Returns
    -------
    float
    """
    data, _, K, V, totals = _count_entries(counts)
    _check_count("V", V, 2, "vocabulary size")
    eta0 = _check_positive("eta0", eta0)
    floor = _check_positive("floor", floor)
    ceiling = _check_positive("ceiling", ceiling)
    if ceiling < floor:
        raise ValueError(f"ceiling must be >= floor = {floor!r}; got {ceiling!r}")
    max_iters = _check_count("max_iters", max_iters, 1, "iteration cap")
    tol = _check_tol(tol)
    start_value, start_rounding = _h(eta0, data, totals, K, V)
    u_lo, u_hi = float(np.log(floor)), float(np.log(ceiling))

    def eta_at(u: float) -> float:  # the bounds themselves at the bounds
        return floor if u <= u_lo else ceiling if u >= u_hi else float(np.exp(u))

    def value_at(u: float) -> tuple[float, float]:
        return _h(eta_at(u), data, totals, K, V)

    u = min(max(float(np.log(eta0)), u_lo), u_hi)
    with np.errstate(over="ignore", invalid="ignore"):
        value, rounding = value_at(u)
        for _ in range(max_iters):
            eta = eta_at(u)
            h1, h2 = _h_derivs(eta, data, totals, K, V)
            dh, curv = eta * h1, eta * h1 + eta * eta * h2
            step = -dh / curv if curv < 0.0 else np.sign(dh) * MAX_LOG_STEP
            step = float(np.clip(step, -MAX_LOG_STEP, MAX_LOG_STEP))
            if (u <= u_lo and step < 0.0) or (u >= u_hi and step > 0.0):
                break  # at a bound, pushed against it
            if abs(step) <= tol:
                u = min(max(u + step, u_lo), u_hi)
                break
            predicted = dh * step + 0.5 * curv * step * step
            if curv < 0.0 and predicted <= rounding:
                u = min(max(u + step, u_lo), u_hi)  # too small for values of h to judge
                value, rounding = value_at(u)
                continue
            t, improved = 1.0, False
            for _ in range(MAX_HALVINGS):
                trial = min(max(u + t * step, u_lo), u_hi)
                if trial == u:
                    break
                trial_value, trial_rounding = value_at(trial)
                if trial_value > value:
                    improved = True
                    break
                t *= 0.5
            if not improved:
                # Newton failed: one coordinate step, which never decreases h
                T = _T(eta, data, totals, K, V)
                moved = fit_symmetric_eta(T, K, V, eta, floor=floor)
                trial = min(max(float(np.log(moved)), u_lo), u_hi)
                if trial == u:
                    break
                trial_value, trial_rounding = value_at(trial)
                if not trial_value > value:
                    break
            u, value, rounding = trial, trial_value, trial_rounding
        eta = eta_at(u)
        value = _h(eta, data, totals, K, V)[0]
    if np.isfinite(value) and value > start_value + start_rounding:
        return eta
    return eta0
