"""The topic report in a real headless browser: Debian's ``chromium``, driven by
Playwright (``pip install lsdask[browser]``; never ``playwright install``).

The page is opened from a ``file://`` URL with the network cut twice: chromium
resolves no host name, and every request that is not the page's own file is
aborted and recorded. Skipped where /usr/bin/chromium or Playwright is missing.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from lsdask import LDA
from tests.test_report import corpus, corpus_matrix, model, reference_ranking, texts  # noqa: F401

CHROMIUM = "/usr/bin/chromium"
sync_api = pytest.importorskip(
    "playwright.sync_api", reason="Playwright is not installed (pip install lsdask[browser])"
)
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not os.access(CHROMIUM, os.X_OK),
        reason=f"{CHROMIUM} is missing (Debian: apt-get install chromium)",
    ),
]

N_DOCS = 5


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as p:
        found = p.chromium.launch(
            executable_path=CHROMIUM,
            args=["--host-resolver-rules=MAP * ~NOTFOUND", "--no-sandbox"],
        )
        yield found
        found.close()


@pytest.fixture(scope="module")
def page_file(
    model: LDA,  # noqa: F811
    corpus: Path,  # noqa: F811
    texts: Path,  # noqa: F811
    tmp_path_factory: pytest.TempPathFactory,
) -> Path:
    return Path(model.report(tmp_path_factory.mktemp("r") / "report.html", corpus, n_terms=10,
                             n_docs=N_DOCS, texts=texts))  # fmt: skip


@pytest.fixture
def page(browser: Any, page_file: Path) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1300, "height": 1000})
    requests: list[str] = []
    errors: list[str] = []

    def only_files(route: Any) -> None:
        requests.append(route.request.url)
        if route.request.url.startswith("file://"):
            route.continue_()
        else:
            route.abort()

    context.route("**/*", only_files)
    tab = context.new_page()
    tab.on("pageerror", lambda e: errors.append(str(e)))
    tab.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    tab.goto(page_file.as_uri())
    tab.wait_for_selector("body[data-ready='1']", timeout=10_000)
    yield tab
    assert requests == [page_file.as_uri()], requests  # nothing but the file itself
    assert errors == []
    context.close()


def shown_terms(page: Any) -> list[str]:
    return [row.get_attribute("data-term") for row in page.locator("#terms tbody tr").all()]


def expected_terms(model: LDA, corpus: Path, k: int, lam: float, R: int) -> list[str]:  # noqa: F811
    X = corpus_matrix(corpus, model.components_.shape[1])
    counts = np.asarray(X.sum(axis=0)).ravel()
    ids = reference_ranking(model.topic_word_[k], counts / counts.sum(), lam, R)
    return [model.vocabulary_[w] for w in ids]


def test_the_map_has_k_circles(page: Any, model: LDA) -> None:  # noqa: F811
    assert page.locator("#map circle").count() == model.model_.n_components
    assert page.locator("#map circle.selected").count() == 1


def test_clicking_a_circle_shows_its_terms_and_documents(
    page: Any,
    model: LDA,  # noqa: F811
    corpus: Path,  # noqa: F811
) -> None:
    for k in range(model.model_.n_components):
        page.locator(f"#map circle[data-topic='{k}']").click(force=True)
        assert page.locator("body").get_attribute("data-topic") == str(k)
        assert page.locator("#topic-title").text_content() == f"Topic {k}"
        assert shown_terms(page) == expected_terms(model, corpus, k, 1.0, 10)
        names = page.locator("#docs .doc-name").all_text_contents()
        assert names == [h.name for h in model.top_documents(k, N_DOCS, corpus)]


def test_the_slider_reorders_the_terms(page: Any, model: LDA, corpus: Path) -> None:  # noqa: F811
    k = 1
    page.locator("#topic").fill(str(k))
    page.locator("#topic").dispatch_event("change")
    at_one = shown_terms(page)
    orders = {}
    for lam in (0.0, 0.3, 0.62, 1.0):
        page.locator("#lambda").fill(str(lam))
        assert page.locator("#lambda-value").text_content() == f"{lam:.2f}"
        orders[lam] = shown_terms(page)
        assert orders[lam] == expected_terms(model, corpus, k, lam, 10), lam
    assert orders[1.0] == at_one
    assert orders[0.0] != orders[1.0]  # lift puts the common words down
    assert not {"report", "about", "some", "thing"} & set(orders[0.0][:5])


def test_the_page_draws_the_traces_and_scales(page: Any) -> None:
    assert page.locator("#traces svg[data-trace='ELBO'] polyline").count() == 1
    assert "NPMI" in page.locator("#npmi-scale").text_content()
    assert page.locator("#map text").count() >= 3


def test_markup_in_names_and_text_stays_text(page: Any, model: LDA, corpus: Path) -> None:  # noqa: F811
    found = False
    for k in range(model.model_.n_components):
        page.locator(f"#map circle[data-topic='{k}']").click(force=True)
        assert page.locator("#docs b, #docs img, #terms b").count() == 0
        shown = page.locator("#docs .doc-text").all_text_contents()
        if any(t.startswith("</script><img") for t in shown):
            found = True
    assert found  # the document whose text starts with markup was shown, as text
    assert page.evaluate("document.querySelectorAll('img, iframe, object').length") == 0


def synthetic_data(K: int, n_cand: int, n_docs: int, V: int = 20_000) -> dict:
    """Report data of the size of K topics' (random numbers; no model is fitted)."""
    from lsdask.estimators.topic_report import NPMI_SCALE, UMASS_SCALE

    rng = np.random.default_rng(0)
    share = rng.dirichlet(np.ones(K))
    words = [f"word{i}" for i in range(V)]
    text = " ".join(rng.choice(words, size=30))
    return {
        "title": "synthetic", "model": "LDA", "K": K, "V": V, "n_terms": 30,
        "corpus": {"path": "c", "n_docs": 11314, "n_tokens": 1.4e6}, "freq_source": "corpus",
        "scales": {"umass": UMASS_SCALE, "npmi": NPMI_SCALE},
        "topics": {"x": rng.normal(size=K).tolist(), "y": rng.normal(size=K).tolist(),
                   "share": share.tolist(), "tokens": (share * 1.4e6).tolist(), "weight": None,
                   "umass": rng.normal(-60, 10, K).tolist(),
                   "npmi": rng.uniform(-1, 1, K).tolist()},
        "docs": [[[int(d), f"group/{d}", 0.9, 120.0, text] for d in rng.integers(0, 11314, n_docs)]
                 for _ in range(K)],
        "traces": [{"name": "ELBO", "x_label": "lap", "y_label": "ELBO (nats per token)",
                    "x": list(range(1, 101)), "y": np.linspace(-9, -8, 100).tolist()}],
        "terms": {"word": words, "count": rng.integers(1, 1000, V).tolist(),
                  "logp": np.log(rng.dirichlet(np.ones(V))).tolist()},
        "cand": [sorted(rng.choice(V, n_cand, replace=False).tolist()) for _ in range(K)],
        "logphi": [np.log(rng.dirichlet(np.ones(n_cand))).tolist() for _ in range(K)],
    }  # fmt: skip


def test_a_page_of_1000_topics_is_small_and_quick(browser: Any, tmp_path: Path) -> None:
    from lsdask.estimators.report_page import render_page

    path = tmp_path / "big.html"
    path.write_text(render_page(synthetic_data(1000, 120, 10)), encoding="utf-8")
    assert path.stat().st_size < 20e6
    tab = browser.new_page()
    tab.goto(path.as_uri())
    tab.wait_for_selector("body[data-ready='1']", timeout=20_000)
    drawn_ms = tab.evaluate("window.reportDrawnAt")  # from the start of the navigation
    assert tab.locator("#map circle").count() == 1000
    assert len(shown_terms(tab)) == 30
    assert drawn_ms < 2000, drawn_ms
    tab.close()
