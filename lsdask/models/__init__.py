"""Models hold the math: allocation x observation, statistics, ELBO terms."""

from lsdask.models.allocation import FiniteMixtureAllocation
from lsdask.models.diag_gaussian import DiagGaussian
from lsdask.models.full_gaussian import FullGaussian
from lsdask.models.mixture import MixtureGlobals, MixtureModel
from lsdask.models.multinomial import Multinomial
from lsdask.models.observation import ObservationModel
from lsdask.models.stats import SuffStats, sum_stats
from lsdask.models.zero_mean_gaussian import ZeroMeanGaussian

__all__ = [
    "DiagGaussian",
    "FiniteMixtureAllocation",
    "FullGaussian",
    "MixtureGlobals",
    "MixtureModel",
    "Multinomial",
    "ObservationModel",
    "SuffStats",
    "ZeroMeanGaussian",
    "sum_stats",
]
