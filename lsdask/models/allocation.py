"""Finite mixture allocation model: ``pi ~ Dir(alpha/K)``, ``z_n ~ Cat(pi)``.

lsparse App. A: the posterior is ``q(pi) = Dir(theta)`` with
``theta_k = alpha/K + N_k`` and the allocation ELBO term (Eq. 22) is
``sum_k N_k E[log pi_k] - KL(Dir(theta) || Dir(alpha/K))``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lsdask.models.special import dirichlet_expected_log, dirichlet_kl


@dataclass(frozen=True)
class FiniteMixtureAllocation:
    """Dirichlet-categorical cluster frequencies.

    Parameters
    ----------
    n_components : int
        K, the number of clusters.
    alpha : float
        Total concentration; each cluster's prior pseudo-count is alpha / K.
    """

    n_components: int
    alpha: float

    @property
    def prior(self) -> np.ndarray:
        return np.full(self.n_components, self.alpha / self.n_components)

    def global_step(self, N: np.ndarray) -> np.ndarray:
        """``theta = alpha/K + N``."""
        return self.prior + N

    def expected_log_weights(self, theta: np.ndarray) -> np.ndarray:
        """``E[log pi_k] = psi(theta_k) - psi(sum theta)``."""
        return dirichlet_expected_log(theta)

    def mean_weights(self, theta: np.ndarray) -> np.ndarray:
        """Point estimate ``E[pi] = theta / sum theta``."""
        return theta / theta.sum()

    def elbo(self, N: np.ndarray, theta: np.ndarray) -> float:
        """Eq. 22: ``E[log p(z | pi)] + E[log p(pi) - log q(pi)]``."""
        elogpi = self.expected_log_weights(theta)
        return float(N @ elogpi - dirichlet_kl(theta, self.prior))
