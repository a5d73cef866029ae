"""``lsdask.MultinomialMixture``: L-sparse mixtures of word-count vectors."""

from __future__ import annotations

from typing import Any

from lsdask import config
from lsdask.estimators.base import MixtureEstimatorBase
from lsdask.estimators.params import MULTINOMIAL_PARAMS, read_only
from lsdask.models import MixtureModel, Multinomial


class MultinomialMixture(MixtureEstimatorBase):
    """Mixture of multinomials (one cluster per document) with Dirichlet priors.

    Parameters
    ----------
    n_components : int
        K.
    lam : float
        Symmetric Dirichlet pseudo-count of each cluster's word distribution.
    **kwargs
        See :class:`lsdask.estimators.base.MixtureEstimatorBase`.

    Attributes
    ----------
    weights_ : (K,) E[pi]
    components_ : (K, V) E[phi_k], each row a distribution over words
    elbo_trace_, n_laps_, converged_
    """

    param_table = MULTINOMIAL_PARAMS

    def __init__(
        self,
        n_components: int = 10,
        *,
        lam: float = 0.1,
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

    def _make_observation(self):
        return Multinomial(lam=float(self.lam))

    def _set_fitted(self, model: MixtureModel) -> None:
        self.components_ = read_only(self.posterior_.obs.topics)
