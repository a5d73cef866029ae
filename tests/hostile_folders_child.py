"""Load a saved model folder as a user's Python code would, and report like the command does:
``python -m tests.hostile_folders_child FUNCTION FOLDER`` (FUNCTION: load_model, load_lda,
load_gmm).

Where the folder loads, the model is used (a transform or a prediction of a few rows) and
the process exits 0. A documented refusal (``ValueError``, :class:`lsdask.errors.DataError`
among them, or ``FileNotFoundError``) prints ``lsdask: error: MESSAGE`` on stderr, as the
command line does, and exits 1; any other exception propagates (a traceback, exit 1), which
the hostile-folder suite (tests/test_hostile_folders.py) counts as a failure.
"""

from __future__ import annotations

import sys

import numpy as np


def main(function: str, folder: str) -> int:
    import lsdask.persist as persist

    load = getattr(persist, function)
    try:
        model = load(folder)
        V = model.n_features_in_
        if hasattr(model, "predict_proba") and not hasattr(model, "components_"):
            model.predict_proba(np.random.default_rng(0).normal(size=(3, V)))
        else:
            import scipy.sparse as sp

            rows = np.random.default_rng(0).poisson(1.0, size=(3, V)).astype(np.float64)
            model.transform(sp.csr_matrix(rows))
    except (ValueError, FileNotFoundError) as exc:
        print(f"lsdask: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
