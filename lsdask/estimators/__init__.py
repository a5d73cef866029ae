"""scikit-learn-style estimators."""

from lsdask.estimators.gaussian import GaussianMixture
from lsdask.estimators.lda import LDA
from lsdask.estimators.multinomial import MultinomialMixture

__all__ = ["LDA", "GaussianMixture", "MultinomialMixture"]
