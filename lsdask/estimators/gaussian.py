"""``lsdask.GaussianMixture``: L-sparse Gaussian mixtures."""

from __future__ import annotations

from typing import Any

import numpy as np

from lsdask import config
from lsdask.estimators.base import MixtureEstimatorBase
from lsdask.estimators.params import GAUSSIAN_PARAMS, read_only
from lsdask.models import DiagGaussian, FullGaussian, MixtureModel, ZeroMeanGaussian
from lsdask.validation import check_int


class GaussianMixture(MixtureEstimatorBase):
    """Bayesian Gaussian mixture learned by L-sparse variational inference.

    Parameters
    ----------
    n_components : int
        K.
    covariance_type : {"zero-mean", "full", "diag"}
        "zero-mean": x ~ N(0, Sigma_k), Wishart prior (image patches, lsparse
        App. B.1); "full": N(mu_k, Sigma_k), Normal-Wishart prior; "diag":
        diagonal covariance, Normal-Gamma prior.
    prior_scale : float or None
        Prior expected covariance ``prior_scale * I``; default from the data.
    nu : float or None
        Wishart degrees of freedom ("zero-mean", "full"); default D + 2.
    **kwargs
        See :class:`lsdask.estimators.base.MixtureEstimatorBase` (sparsity,
        algorithm, n_laps, batch_size, alpha, random_state, client, ...).

    Attributes
    ----------
    weights_ : (K,) E[pi]
    covariances_ : (K, D, D), or (K, D) for "diag": E[Sigma_k]
    precisions_ : inverses of covariances_
    means_ : (K, D) ("full", "diag"); zeros for "zero-mean"
    elbo_trace_ : ELBO after every global update
    n_laps_, converged_ : laps run; whether the tolerance was met
    """

    param_table = GAUSSIAN_PARAMS

    def __init__(
        self,
        n_components: int = 10,
        *,
        covariance_type: str = "zero-mean",
        prior_scale: float | None = None,
        nu: float | None = None,
        sparsity: int | None = None,
        algorithm: str = "memo",
        n_laps: int = 10,
        tol: float = config.DEFAULT_TOL,
        batch_size: int | None = None,
        batches_per_update: int | None = None,
        alpha: float = 1.0,
        init: str = "kmeans++",
        n_blocks: int | None = None,
        schedule: str = "rotation",
        n_init: int = 1,
        svi_delay: float = config.SVI_DELAY,
        svi_kappa: float = config.SVI_KAPPA,
        random_state: Any = None,
        client: Any = None,
        n_workers: int | None = None,
        verbose: int = 0,
        progress: bool | None = None,
        checkpoint_dir: str | None = None,
        resume: bool = False,
        storage_options: dict | None = None,
    ) -> None:
        self._store(locals())

    _takes_sparse = False  # Gaussian observations need dense rows

    def _make_observation(self):
        if self.covariance_type == "zero-mean":
            return ZeroMeanGaussian(nu=self.nu, prior_scale=self.prior_scale)
        if self.covariance_type == "full":
            return FullGaussian(nu=self.nu, prior_scale=self.prior_scale)
        return DiagGaussian(prior_scale=self.prior_scale)

    def sample(self, n_samples: int = 1, random_state: Any = None) -> tuple[np.ndarray, np.ndarray]:
        """Draw ``n_samples`` rows from the fitted mixture (at ``weights_``,
        ``means_``, ``covariances_``); returns ``(X, labels)`` as scikit-learn's."""
        self._check_fitted()
        n = check_int("n_samples", n_samples, 1)
        rng = np.random.default_rng(random_state)
        labels = rng.choice(len(self.weights_), size=n, p=self.weights_ / self.weights_.sum())
        X = np.empty((n, self.n_features_in_))
        for k in np.unique(labels):
            rows = labels == k
            cov = self.covariances_[k]
            cov = np.diag(cov) if cov.ndim == 1 else cov
            X[rows] = rng.multivariate_normal(self.means_[k], cov, size=int(rows.sum()))
        return X, labels

    def _set_fitted(self, model: MixtureModel) -> None:
        post = self.posterior_.obs
        if self.covariance_type == "diag":
            self.covariances_ = read_only(post.variances)
            self.precisions_ = 1.0 / post.variances
        else:
            self.covariances_ = read_only(post.covariances)
            self.precisions_ = np.linalg.inv(post.covariances)
        if self.covariance_type == "zero-mean":
            self.means_ = np.zeros((self.n_components, self.n_features_in_))
        else:
            self.means_ = read_only(post.means)
