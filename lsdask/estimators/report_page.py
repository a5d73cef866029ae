"""The topic report's HTML page: one self-contained file, nothing fetched.

:func:`render_page` puts the report's data (:func:`lsdask.estimators.topic_report.report_data`)
into the page as one JSON blob in ``<script type="application/json">``, with
``<``, ``>`` and ``&`` written as ``\\u003c`` etc. so that no text of the corpus
or model can end the script; the hand-written script below reads it and builds
the page with ``textContent`` and SVG elements only (never ``innerHTML``). A
Content-Security-Policy forbids any request: the page works from disk with no
network.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["render_page"]

_STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 0 1.5em 2em; color: #222; }
h1 { font-size: 1.4em; margin: .6em 0 .2em; } h2 { font-size: 1.1em; margin: .4em 0; }
main { display: grid; grid-template-columns: minmax(380px, 560px) minmax(420px, 1fr);
       gap: 1em 2em; }
section { min-width: 0; }
#map { border: 1px solid #ccc; background: #fcfcfc; width: 100%; height: auto; }
#map circle { fill: #3b7dd8; fill-opacity: .35; stroke: #1f4f99; stroke-width: .6;
              cursor: pointer; }
#map circle.selected { fill: #d8453b; fill-opacity: .7; stroke: #8a1f18; stroke-width: 1.5; }
#map text { font-size: 10px; fill: #333; pointer-events: none; }
#map .axis { stroke: #bbb; stroke-dasharray: 3 3; }
.note { color: #555; font-size: .9em; }
#terms { border-collapse: collapse; width: 100%; }
#terms td, #terms th { padding: 1px 6px; text-align: right; white-space: nowrap; }
#terms td.term, #terms th.term { text-align: left; }
#terms td.bars { width: 40%; text-align: left; }
.bar { height: 7px; margin: 1px 0; } .bar.corpus { background: #bbb; }
.bar.topic { background: #d8453b; }
dl#topic-stats { display: grid; grid-template-columns: max-content 1fr; gap: 0 1em; margin: 0; }
dl#topic-stats dt { color: #555; } dl#topic-stats dd { margin: 0; }
#docs li { margin-bottom: .5em; } .doc-name { font-weight: 600; } .doc-text { color: #444; }
.doc-meta { color: #666; font-size: .9em; margin-left: .5em; }
#traces { display: flex; flex-wrap: wrap; gap: 1em; }
#traces svg { border: 1px solid #ddd; background: #fff; }
#traces text { font-size: 10px; fill: #333; }
.controls { margin: .4em 0; } .controls input[type=number] { width: 5em; }
#lambda { width: 60%; vertical-align: middle; }
"""

_SCRIPT = r"""
"use strict";
(function () {
  const D = JSON.parse(document.getElementById("report-data").textContent);
  const T = D.topics, K = D.K, logp = D.terms.logp, words = D.terms.word;
  const NS = "http://www.w3.org/2000/svg";
  let current = -1;

  function el(tag, text, cls) {
    const e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  }
  function sv(tag, attrs, text) {
    const e = document.createElementNS(NS, tag);
    for (const k in attrs) e.setAttribute(k, String(attrs[k]));
    if (text !== undefined) e.textContent = String(text);
    return e;
  }
  function num(x, digits) {
    return x === null || x === undefined ? "n/a" : Number(x).toFixed(digits);
  }
  function count(x) { return Math.round(x).toLocaleString("en-US"); }
  function pct(x) { return (100 * x).toFixed(x < 0.01 ? 3 : 1) + "%"; }

  function header() {
    document.title = D.title;
    document.getElementById("title").textContent = D.title;
    const c = D.corpus;
    let s = D.model + ": K = " + K + " topics over V = " + D.V.toLocaleString("en-US") +
      " words. ";
    s += c ? "Corpus " + c.path + ": " + c.n_docs.toLocaleString("en-US") + " documents, " +
      count(c.n_tokens) + " tokens. " : "No corpus given: no documents or coherence. ";
    s += D.freq_source === "corpus" ? "Word frequencies: counted in the corpus."
      : "Word frequencies: the model's training token counts (components_ - eta).";
    document.getElementById("summary").textContent = s;
    document.getElementById("umass-scale").textContent = D.scales.umass;
    document.getElementById("npmi-scale").textContent = D.scales.npmi;
  }

  function drawMap() {
    const top = Math.max(...T.share) || 1, rmax = Math.max(8, Math.min(40, 260 / Math.sqrt(K)));
    const map = document.getElementById("map"), box = 560, pad = rmax + 12;
    const xs = T.x, ys = T.y;
    const x0 = Math.min(...xs), x1 = Math.max(...xs), y0 = Math.min(...ys), y1 = Math.max(...ys);
    const span = Math.max(x1 - x0, y1 - y0) || 1, scale = (box - 2 * pad) / span;
    const cx = (x) => pad + (x - (x0 + x1) / 2) * scale + (box - 2 * pad) / 2;
    const cy = (y) => box - (pad + (y - (y0 + y1) / 2) * scale + (box - 2 * pad) / 2);
    map.appendChild(sv("line", {x1: cx(0), x2: cx(0), y1: 0, y2: box, class: "axis"}));
    map.appendChild(sv("line", {x1: 0, x2: box, y1: cy(0), y2: cy(0), class: "axis"}));
    map.appendChild(sv("text", {x: box - 4, y: cy(0) - 4, "text-anchor": "end"}, "PC1"));
    map.appendChild(sv("text", {x: cx(0) + 4, y: 12}, "PC2"));
    const order = [...Array(K).keys()].sort((a, b) => T.share[b] - T.share[a]);
    const radius = (k) => rmax * Math.sqrt(T.share[k] / top);
    const labelled = new Set(order.slice(0, 60).filter((k) => radius(k) >= 7));
    for (const k of order) {
      const c = sv("circle", {cx: cx(xs[k]), cy: cy(ys[k]), r: radius(k),
        "data-topic": k});
      c.appendChild(sv("title", {}, "topic " + k + ": " + pct(T.share[k]) + " of the tokens"));
      c.addEventListener("click", () => select(k));
      map.appendChild(c);
    }
    for (const k of order) {
      if (labelled.has(k)) map.appendChild(sv("text", {x: cx(xs[k]), y: cy(ys[k]) + 3,
        "text-anchor": "middle"}, k));
    }
  }

  function ranked(k, lam) {
    const c = D.cand[k], lp = D.logphi[k], rows = [];
    for (let i = 0; i < c.length; i++) {
      rows.push({t: c[i], lp: lp[i], r: lam * lp[i] + (1 - lam) * (lp[i] - logp[c[i]])});
    }
    rows.sort((a, b) => (b.r - a.r) || (a.t - b.t));
    return rows.slice(0, D.n_terms);
  }

  function renderTerms() {
    const lam = parseFloat(document.getElementById("lambda").value);
    document.getElementById("lambda-value").textContent = lam.toFixed(2);
    const body = document.querySelector("#terms tbody");
    body.replaceChildren();
    const rows = ranked(current, lam);
    let most = 1;
    for (const row of rows) most = Math.max(most, D.terms.count[row.t]);
    rows.forEach((row, i) => {
      const tr = el("tr"), inTopic = Math.exp(row.lp) * T.tokens[current];
      tr.setAttribute("data-term", words[row.t]);
      tr.appendChild(el("td", i + 1));
      tr.appendChild(el("td", words[row.t], "term"));
      tr.appendChild(el("td", row.r.toFixed(3)));
      tr.appendChild(el("td", count(inTopic)));
      tr.appendChild(el("td", count(D.terms.count[row.t])));
      const bars = el("td", null, "bars"), a = el("div", null, "bar corpus");
      const b = el("div", null, "bar topic");
      a.style.width = (100 * D.terms.count[row.t] / most).toFixed(1) + "%";
      b.style.width = Math.min(100, 100 * inTopic / most).toFixed(1) + "%";
      bars.appendChild(b); bars.appendChild(a); tr.appendChild(bars);
      body.appendChild(tr);
    });
  }

  function renderStats(k) {
    document.getElementById("topic-title").textContent = "Topic " + k;
    const dl = document.getElementById("topic-stats");
    dl.replaceChildren();
    const add = (name, value) => {
      dl.appendChild(el("dt", name));
      dl.appendChild(el("dd", value));
    };
    add("share of tokens", pct(T.share[k]) + " (" + count(T.tokens[k]) + " tokens)");
    if (T.weight) add("HDP weight E[beta_k]", num(T.weight[k], 4));
    add("UMass coherence", T.umass ? num(T.umass[k], 2) + " (sum over 45 pairs)" : "n/a");
    add("NPMI coherence", T.npmi ? num(T.npmi[k], 3) + " (mean over 45 pairs, -1 to 1)" : "n/a");
  }

  function renderDocs(k) {
    const list = document.getElementById("docs");
    list.replaceChildren();
    if (!D.docs) { list.appendChild(el("li", "No corpus was given: no documents.")); return; }
    if (!D.docs[k].length) list.appendChild(el("li", "No document gives this topic a token."));
    for (const [id, name, share, tokens, text] of D.docs[k]) {
      const li = el("li");
      li.appendChild(el("span", name === null ? "doc " + id : name, "doc-name"));
      li.appendChild(el("span", pct(share) + " of its " + count(tokens) +
        " tokens; doc_id " + id, "doc-meta"));
      if (text) li.appendChild(el("div", text, "doc-text"));
      list.appendChild(li);
    }
  }

  function select(k) {
    if (!(k >= 0 && k < K)) return;
    current = k;
    for (const c of document.querySelectorAll("#map circle")) {
      c.classList.toggle("selected", Number(c.getAttribute("data-topic")) === k);
    }
    document.getElementById("topic").value = k;
    document.body.setAttribute("data-topic", k);
    renderStats(k); renderTerms(); renderDocs(k);
  }

  function ticks(lo, hi) { return [lo, (lo + hi) / 2, hi]; }
  function label(v, span) {
    const digits = Math.max(0, Math.min(8, 2 - Math.floor(Math.log10(span))));
    return Number.isInteger(v) ? String(v) : v.toFixed(digits);
  }

  function drawTrace(t) {
    const w = 320, h = 180, l = 70, r = 10, top = 10, b = 38;
    const s = sv("svg", {width: w, height: h, "data-trace": t.name});
    let x0 = Math.min(...t.x), x1 = Math.max(...t.x), y0 = Math.min(...t.y), y1 = Math.max(...t.y);
    if (x0 === x1) { x0 -= 1; x1 += 1; }
    if (y0 === y1) { y0 -= 1; y1 += 1; }
    const X = (x) => l + (x - x0) / (x1 - x0) * (w - l - r);
    const Y = (y) => h - b - (y - y0) / (y1 - y0) * (h - b - top);
    s.appendChild(sv("line", {x1: l, x2: w - r, y1: h - b, y2: h - b, stroke: "#888"}));
    s.appendChild(sv("line", {x1: l, x2: l, y1: top, y2: h - b, stroke: "#888"}));
    for (const v of ticks(x0, x1)) {
      const at = {x: X(v), y: h - b + 12, "text-anchor": "middle"};
      s.appendChild(sv("text", at, label(v, x1 - x0)));
    }
    for (const v of ticks(y0, y1)) {
      s.appendChild(sv("text", {x: l - 3, y: Y(v) + 3, "text-anchor": "end"}, label(v, y1 - y0)));
    }
    s.appendChild(sv("text", {x: (l + w - r) / 2, y: h - 6, "text-anchor": "middle"}, t.x_label));
    s.appendChild(sv("text", {x: 10, y: (top + h - b) / 2, "text-anchor": "middle",
      transform: "rotate(-90 10 " + (top + h - b) / 2 + ")"}, t.y_label));
    const pts = t.x.map((x, i) => X(x).toFixed(1) + "," + Y(t.y[i]).toFixed(1)).join(" ");
    s.appendChild(sv("polyline", {points: pts, fill: "none", stroke: "#3b7dd8",
      "stroke-width": 1.5}));
    if (t.x.length === 1) {
      s.appendChild(sv("circle", {cx: X(t.x[0]), cy: Y(t.y[0]), r: 3, fill: "#3b7dd8"}));
    }
    return s;
  }

  function drawTraces() {
    const box = document.getElementById("traces");
    if (!D.traces.length) box.appendChild(el("p", "The model kept no traces.", "note"));
    for (const t of D.traces) box.appendChild(drawTrace(t));
  }

  header();
  drawMap();
  drawTraces();
  const input = document.getElementById("topic");
  input.max = K - 1;
  input.addEventListener("change", () => select(parseInt(input.value, 10)));
  document.getElementById("prev").addEventListener("click", () => select((current - 1 + K) % K));
  document.getElementById("next").addEventListener("click", () => select((current + 1) % K));
  document.getElementById("lambda").addEventListener("input", renderTerms);
  let biggest = 0;
  for (let k = 1; k < K; k++) if (T.share[k] > T.share[biggest]) biggest = k;
  if (K > 0) select(biggest);
  window.reportDrawnAt = performance.now();
  document.body.setAttribute("data-ready", "1");
})();
"""

_BODY = """
<header><h1 id="title">Topic report</h1><p id="summary" class="note"></p></header>
<main>
<section id="map-panel">
<h2>Intertopic distance map</h2>
<svg id="map" viewBox="0 0 560 560" width="560" height="560" role="img"
 aria-label="topics as circles"></svg>
<p class="note">Each circle is a topic, its area its share of the training tokens. Positions:
classical (Torgerson) multidimensional scaling to two dimensions of the Jensen-Shannon distances
between the topics' word distributions (sqrt of the divergence in bits, 0 to 1); near circles
are topics over similar words. Click a circle to show its topic.</p>
<div class="controls"><label>Topic <input type="number" id="topic" min="0" value="0"></label>
<button id="prev" type="button">previous</button> <button id="next" type="button">next</button>
</div>
</section>
<section id="topic-panel">
<h2 id="topic-title">Topic</h2>
<dl id="topic-stats"></dl>
<div class="controls"><label for="lambda">lambda = <output id="lambda-value">1.00</output></label>
<input type="range" id="lambda" min="0" max="1" step="0.01" value="1"></div>
<p class="note">Terms ranked by relevance r = lambda log p(w | topic) + (1 - lambda)
log(p(w | topic) / p(w)) (Sievert and Shirley 2014): lambda = 1 ranks by probability within the
topic, lambda = 0 by lift, the ratio to the word's corpus frequency p(w). Columns: relevance,
the topic's estimated tokens of the word (red bar) and the word's tokens in the corpus (grey
bar).</p>
<table id="terms"><thead><tr><th>#</th><th class="term">term</th><th>relevance</th>
<th>in topic</th><th>in corpus</th><th class="term">tokens</th></tr></thead><tbody></tbody>
</table>
</section>
<section id="docs-panel">
<h2>Top documents</h2>
<p class="note">The documents most about the topic, by their posterior share E[pi_dk] of it,
with the first words of their text where the corpus points at it.</p>
<ol id="docs"></ol>
</section>
<section id="fit-panel">
<h2>The fit</h2>
<div id="traces"></div>
<h2>Coherence scales</h2>
<p id="umass-scale" class="note"></p>
<p id="npmi-scale" class="note"></p>
</section>
</main>
"""

#: no request of any kind: scripts and styles inline only
CSP = (
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
    "img-src 'none'; connect-src 'none'; form-action 'none'; base-uri 'none'"
)


def embed_json(data: Any) -> str:
    """``data`` as JSON safe inside a ``<script>`` element: ``<``, ``>`` and ``&``
    escaped (no ``</script>`` or ``<!--`` can appear), no NaN or infinity."""
    text = json.dumps(data, allow_nan=False, separators=(",", ":"), ensure_ascii=False)
    return (
        text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
        .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    )  # fmt: skip


def render_page(data: dict[str, Any]) -> str:
    """The whole HTML page of a report's ``data``."""
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        "<title>Topic report</title>\n"
        f"<style>{_STYLE}</style></head>\n<body>{_BODY}"
        f'<script type="application/json" id="report-data">{embed_json(data)}</script>\n'
        f"<script>{_SCRIPT}</script>\n</body></html>\n"
    )
