// Plotly charts: render every json_script figure, and move the time cursor on click.
// Figures arrive as <div class="plotly-chart" data-figure="ID"> plus <script id="ID" type="application/json">
// (CSP: no inline scripts). plotly.min.js (served from the plotly Python package) is loaded on first need.
(function () {
  "use strict";
  var loading = null;

  function loadPlotly(src) {
    if (window.Plotly) return Promise.resolve(window.Plotly);
    if (loading) return loading;
    loading = new Promise(function (resolve, reject) {
      var s = document.createElement("script");
      s.src = src;
      s.onload = function () { resolve(window.Plotly); };
      s.onerror = function () { loading = null; reject(new Error("cannot load " + src)); };
      document.head.appendChild(s);
    });
    return loading;
  }

  // Plotly gives dates back as "2026-11-29 03:12" or "2026-11-29 03:12:05.123" (naive UTC, as we sent them).
  function toIsoZ(x) {
    var m = /^(\d{4}-\d{2}-\d{2})[ T](\d{2}):(\d{2})(?::(\d{2}))?/.exec(String(x));
    if (!m) return null;
    return m[1] + "T" + m[2] + ":" + m[3] + ":" + (m[4] || "00") + "Z";
  }

  function cursorUrl(t) {
    var url = new URL(window.location.href);
    var params = url.searchParams;
    params.set("t", t);
    if (!params.get("w")) {
      var bar = document.querySelector(".cursor-form input[name=w]");
      if (bar && bar.value) params.set("w", bar.value);
    }
    return url.pathname + "?" + params.toString();
  }

  // The request's source carries hx-push-url, so htmx snapshots the page and pushes the URL exactly as
  // it does for the cursor bar's links: Back restores the previous moment.
  function navSource() {
    var el = document.getElementById("chart-cursor-nav");
    if (!el) {
      el = document.createElement("span");
      el.id = "chart-cursor-nav";
      el.hidden = true;
      el.setAttribute("hx-push-url", "true");
      document.body.appendChild(el);
    }
    return el;
  }

  function moveCursor(x) {
    var t = toIsoZ(x);
    if (!t) return;
    var url = cursorUrl(t);
    if (window.htmx && document.getElementById("page")) {
      window.htmx.ajax("GET", url, { source: navSource(), target: "#page", select: "#page", swap: "outerHTML" });
    } else {
      window.location.assign(url);
    }
  }

  function render(root) {
    var nodes = (root || document).querySelectorAll(".plotly-chart[data-figure]:not([data-rendered])");
    if (!nodes.length) return;
    loadPlotly(nodes[0].getAttribute("data-plotly-src")).then(function (Plotly) {
      Array.prototype.forEach.call(nodes, function (el) {
        var data = document.getElementById(el.getAttribute("data-figure"));
        if (!data || el.hasAttribute("data-rendered")) return;
        el.setAttribute("data-rendered", "1");
        var fig = JSON.parse(data.textContent);
        Plotly.newPlot(el, fig.data, fig.layout, { displaylogo: false, responsive: true, modeBarButtonsToRemove: ["lasso2d", "select2d"] });
        if (fig.layout && fig.layout.xaxis && fig.layout.xaxis.type === "date") {
          el.on("plotly_click", function (ev) {
            if (ev && ev.points && ev.points.length) moveCursor(ev.points[0].x);
          });
        }
      });
    }).catch(function (err) {
      Array.prototype.forEach.call(nodes, function (el) { el.textContent = "no chart: " + err.message; });
    });
  }

  document.addEventListener("DOMContentLoaded", function () { render(document); });
  document.addEventListener("htmx:afterSettle", function (ev) { render(ev.target); });
  // Back/Forward: htmx restores a snapshot whose charts are dead SVG copies (or, on a cache miss, undrawn): draw again.
  document.addEventListener("htmx:historyRestore", function () { document.querySelectorAll(".plotly-chart[data-rendered]").forEach(function (el) { el.removeAttribute("data-rendered"); el.textContent = ""; }); render(document); });
})();
