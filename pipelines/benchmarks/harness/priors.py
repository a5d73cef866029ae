"""The priors of every topic-model comparison: the same for lsdask and each peer.

``ALPHA`` is the document-topic concentration in total (``ALPHA / K`` per
topic, for every method); ``ETA`` the topic-word pseudo-count.
"""

ALPHA = 0.5
ETA = 0.1
