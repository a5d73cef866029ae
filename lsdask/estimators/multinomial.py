"""``lsdask.MultinomialMixture``: L-sparse mixtures of word-count vectors."""

from __future__ import annotations

from typing import Any

from lsdask.estimators.base import MixtureEstimatorBase
from lsdask.estimators.params import read_only
from lsdask.models import MixtureModel, Multinomial
from lsdask.validation import check_positive_float


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

    def __init__(
        self,
        n_components: int = 10,
        *,
        lam: float = 0.1,
        sparsity: int | None = None,
        algorithm: str = "memo",
        n_laps: int = 10,
        tol: float = 1e-6,
        batch_size: int | None = None,
        batches_per_update: int | None = None,
        alpha: float = 1.0,
        init: str = "kmeans++",
        n_init: int = 1,
        svi_delay: float = 1.0,
        svi_kappa: float = 0.6,
        random_state: Any = None,
        client: Any = None,
        n_workers: int | None = None,
        verbose: int = 0,
        progress: bool | None = None,
        checkpoint_dir: str | None = None,
        resume: bool = False,
    ) -> None:
        super().__init__(
            n_components,
            sparsity=sparsity,
            algorithm=algorithm,
            n_laps=n_laps,
            tol=tol,
            batch_size=batch_size,
            batches_per_update=batches_per_update,
            alpha=alpha,
            init=init,
            n_init=n_init,
            svi_delay=svi_delay,
            svi_kappa=svi_kappa,
            random_state=random_state,
            client=client,
            n_workers=n_workers,
            verbose=verbose,
            progress=progress,
            checkpoint_dir=checkpoint_dir,
            resume=resume,
        )
        self.lam = lam

    def _make_observation(self):
        return Multinomial(lam=check_positive_float("lam", self.lam))

    def _set_fitted(self, model: MixtureModel) -> None:
        self.components_ = read_only(self.posterior_.obs.topics)
