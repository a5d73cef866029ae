"""scikit-learn-style estimators.

Importing this package registers the estimators that :mod:`lsdask.persist`
saves and loads (see :mod:`lsdask.estimators.state`).
"""

from lsdask.estimators import state
from lsdask.estimators.gaussian import GaussianMixture
from lsdask.estimators.hdp import HDP
from lsdask.estimators.lda import LDA
from lsdask.estimators.multinomial import MultinomialMixture
from lsdask.persist import gmm as gmm_files
from lsdask.persist import hdp as hdp_files
from lsdask.persist import lda as lda_files
from lsdask.persist.registry import register

register(lda_files.KIND, LDA, state.lda_state, state.lda_from_state)
register(hdp_files.KIND, HDP, state.hdp_state, state.hdp_from_state)
register(gmm_files.KIND, GaussianMixture, state.mixture_state, state.mixture_from_state)

__all__ = ["HDP", "LDA", "GaussianMixture", "MultinomialMixture"]
