// t1 ui: the training curves (uPlot), clicks on tokens, and the live
// reload of a page whose run is still in progress. Nothing here talks
// to anything but the server that served the page.
"use strict";

function drawCurves() {
  const data = document.getElementById("curve-data");
  const box = document.getElementById("curves");
  if (!data || !box || typeof uPlot === "undefined") return;
  box.textContent = "";
  const curves = JSON.parse(data.textContent || "null") || [];
  for (const c of curves) {
    const div = document.createElement("div");
    div.className = "curve";
    div.dataset.title = c.title;
    box.appendChild(div);
    const lo = Math.min(0, ...c.y), hi = Math.max(0, ...c.y);
    const pad = (hi - lo || 1) * 0.08;
    new uPlot({
      title: c.title, width: 420, height: 220,
      scales: {
        x: { time: false, range: (u, a, b) => [Math.min(a, b - 1), Math.max(b, a + 1)] },
        // Rates keep [0, 1] so two runs' curves read alike; others start at zero.
        y: { range: c.rate ? [0, 1] : [lo - (lo < 0 ? pad : 0), hi + pad] },
      },
      axes: [{ label: "iteration", incrs: [1, 2, 5, 10, 20, 50, 100] }, {}],
      series: [{ label: "iteration" }, { label: c.title, stroke: "#2563eb", width: 2, points: { show: true, size: 6 } }],
    }, [c.x, c.y], div);
  }
}

function tokenClicks() {
  const box = document.getElementById("tokens");
  if (!box) return;
  box.addEventListener("click", (e) => {
    const t = e.target.closest(".t");
    if (t) location.href = box.dataset.routing + "&token=" + t.dataset.i;
  });
}

// A page of a run in progress listens for the run's event count and
// fetches itself again when it grows, replacing its content.
let source = null;
function live() {
  const main = document.getElementById("main");
  if (source) { source.close(); source = null; }
  if (!main || !main.dataset.live) return;
  const seen = Number(main.dataset.events);
  source = new EventSource(main.dataset.live);
  source.onmessage = async (e) => {
    if (Number(e.data) === seen) return;
    source.close(); source = null;
    const res = await fetch(location.href, { headers: { "Accept": "text/html" } });
    const doc = new DOMParser().parseFromString(await res.text(), "text/html");
    const fresh = doc.getElementById("main");
    if (!fresh) return;
    main.innerHTML = fresh.innerHTML;
    for (const a of ["data-live", "data-events"]) {
      if (fresh.hasAttribute(a)) main.setAttribute(a, fresh.getAttribute(a)); else main.removeAttribute(a);
    }
    const st = doc.getElementById("status"), here = document.getElementById("status");
    if (st && here) { here.textContent = st.textContent; here.className = st.className; }
    init();
  };
}

function init() { drawCurves(); tokenClicks(); live(); }
init();
