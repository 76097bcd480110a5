/* The run report's charts (inlined by coco_sql/report/html.py after uPlot). Reads the JSON document
   #report-data (coco_sql/report/page.py says what each field is) and draws: the score over iterations, the
   genealogy, the strategy ledger, the spending per iteration and the score/cost frontier with uPlot; the
   solve matrix on a canvas. */
(function () {
  "use strict";
  var D = JSON.parse(document.getElementById("report-data").textContent);
  var COLOR = {
    val: "#2563eb", best: "#0f172a", test: "#d97706", invalid: "#dc2626", edge: "rgba(100,116,139,0.28)",
    lineage: "#059669", seed: "#475569", improved: "#059669", neutral: "#94a3b8", regressed: "#d97706",
    failed: "#dc2626", band: "rgba(37,99,235,0.08)", provider: "#2563eb", cache: "#93c5fd"
  };
  var LINEAGE_COLORS = ["#2563eb", "#d97706", "#7c3aed", "#0891b2", "#db2777", "#65a30d", "#ea580c", "#4f46e5",
    "#0d9488", "#b91c1c"];
  var charts = [];

  // A legend shows values only under the cursor: nothing (not a placeholder) when there is none.
  function fmt(v, digits) { return v == null ? "" : v.toFixed(digits == null ? 3 : digits); }
  function whole(u, v) { return v == null ? "" : Math.round(v).toLocaleString(); }
  var X = { label: "iteration", value: whole };
  function widthOf(el) { return Math.max(320, Math.floor(el.getBoundingClientRect().width)); }
  function xRange(u, min, max) { return min === max ? [min - 1, max + 1] : [min - 0.5, max + 0.5]; }
  function iterations() {  // an x axis of whole iterations
    return { label: "iteration", incrs: [1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000, 2000, 5000, 10000] };
  }
  function scoreRange(u, min, max) {
    return [Math.min(0, min == null ? 0 : min), Math.max(1, max == null ? 1 : max)];
  }
  function points(color, size, fill) {
    return { show: true, size: size, stroke: color, fill: fill || color, width: 1.5 };
  }
  function noPath() { return null; }
  function make(id, opts, data) {
    var el = document.getElementById(id);
    if (!el) return null;
    opts.width = widthOf(el);
    var u = new uPlot(opts, data, el);
    charts.push([u, el]);
    el.uplot = u;  // each chart reachable from its element (the browser tests, a reader's console)
    return u;
  }
  function clip(u, draw) {
    var ctx = u.ctx;
    ctx.save();
    ctx.beginPath();
    ctx.rect(u.bbox.left, u.bbox.top, u.bbox.width, u.bbox.height);
    ctx.clip();
    draw(ctx);
    ctx.restore();
  }
  function line(u, ctx, x0, y0, x1, y1) {
    ctx.moveTo(u.valToPos(x0, "x", true), u.valToPos(y0, "y", true));
    ctx.lineTo(u.valToPos(x1, "x", true), u.valToPos(y1, "y", true));
  }

  // -- score over iterations: each child, the best so far, seed and champion marked, test scores ------------
  function scoreChart() {
    var T = D.trajectory;
    if (!T) return;
    var marks = function (u) {
      clip(u, function (ctx) {
        ctx.setLineDash([4, 4]);
        ctx.lineWidth = 1;
        ctx.strokeStyle = COLOR.seed;
        ctx.beginPath();
        if (T.val[T.seed] != null) line(u, ctx, u.scales.x.min, T.val[T.seed], u.scales.x.max, T.val[T.seed]);
        ctx.stroke();
        ctx.setLineDash([]);
        ctx.font = Math.round(11 * devicePixelRatio) + "px system-ui, sans-serif";
        ctx.textBaseline = "top";
        [[T.seed, "seed"], [T.champion, "champion"]].forEach(function (m) {
          if (m[0] == null) return;
          var x = u.valToPos(T.x[m[0]], "x", true), pad = 4 * devicePixelRatio;
          var right = x > u.bbox.left + u.bbox.width / 2;  // the label on the side with room
          ctx.strokeStyle = ctx.fillStyle = m[1] === "seed" ? COLOR.seed : COLOR.lineage;
          ctx.beginPath();
          ctx.moveTo(x, u.bbox.top);
          ctx.lineTo(x, u.bbox.top + u.bbox.height);
          ctx.stroke();
          ctx.textAlign = right ? "right" : "left";
          ctx.fillText(m[1], right ? x - pad : x + pad, u.bbox.top + pad);
        });
      });
    };
    make("chart-score", {
      height: 320,
      scales: { x: { time: false, range: xRange }, y: { range: scoreRange } },
      axes: [iterations(), { label: "validation score" }],
      series: [
        X,
        { label: "child", stroke: COLOR.val, paths: noPath, points: points(COLOR.val, 7), value: function (u, v) { return fmt(v); } },
        { label: "best so far", stroke: COLOR.best, width: 2, paths: uPlot.paths.stepped({ align: 1 }), spanGaps: true, points: { show: false }, value: function (u, v) { return fmt(v); } },
        { label: "invalid child", stroke: COLOR.invalid, paths: noPath, points: points(COLOR.invalid, 7), value: function (u, v) { return v == null ? "" : "invalid"; } },
        { label: "test score", stroke: COLOR.test, paths: noPath, points: points(COLOR.test, 11, "#fff"), value: function (u, v) { return fmt(v); } }
      ],
      hooks: { drawAxes: [marks] }
    }, [T.x, T.val, T.best, T.invalid, T.test]);
  }

  // -- genealogy: every program joined to its parent, the champion's lineage in bold ------------------------
  function genealogyChart() {
    var T = D.trajectory;
    if (!T || T.champion == null || !document.getElementById("chart-genealogy")) return;
    var onPath = T.x.map(function () { return null; });
    T.lineage.forEach(function (i) { onPath[i] = T.val[i]; });
    var edges = function (u) {
      clip(u, function (ctx) {
        ctx.lineWidth = 1;
        ctx.strokeStyle = COLOR.edge;
        ctx.beginPath();
        for (var i = 0; i < T.x.length; i++) {
          var p = T.parent[i];
          if (p >= 0 && T.val[i] != null && T.val[p] != null) line(u, ctx, T.x[p], T.val[p], T.x[i], T.val[i]);
        }
        ctx.stroke();
        ctx.lineWidth = 2.5 * devicePixelRatio;
        ctx.strokeStyle = COLOR.lineage;
        ctx.beginPath();
        for (var k = 1; k < T.lineage.length; k++) {
          var a = T.lineage[k - 1], b = T.lineage[k];
          if (T.val[a] != null && T.val[b] != null) line(u, ctx, T.x[a], T.val[a], T.x[b], T.val[b]);
        }
        ctx.stroke();
      });
    };
    var hover = document.getElementById("genealogy-hover");
    var show = function (u) {
      var i = u.cursor.idx;
      if (i == null || !hover) return;
      var p = T.parent[i];
      hover.textContent = T.ids[i] + " · iteration " + T.x[i] + (p >= 0 ? " · parent " + T.ids[p] : " · the seed") +
        " · val " + (T.val[i] == null ? "invalid" : fmt(T.val[i])) + (T.strategy[i] ? " · " + T.strategy[i] : "") +
        (T.approach[i] ? " · " + T.approach[i] : "");
    };
    make("chart-genealogy", {
      height: 300,
      legend: { show: false },
      scales: { x: { time: false, range: xRange }, y: { range: scoreRange } },
      axes: [iterations(), { label: "validation score" }],
      series: [
        {},
        { label: "program", stroke: COLOR.neutral, paths: noPath, points: points("#64748b", 5) },
        { label: "champion lineage", stroke: COLOR.lineage, paths: noPath, points: points(COLOR.lineage, 8) }
      ],
      hooks: { drawAxes: [edges], setCursor: [show] }
    }, [T.x, T.val, onPath]);
  }

  // -- the strategy ledger: one lane per strategy, a point per iteration by status --------------------------
  function ledgerChart() {
    var L = D.ledger;
    if (!L) return;
    var statuses = ["improved", "neutral", "regressed", "failed"];
    var bands = function (u) {
      clip(u, function (ctx) {
        ctx.fillStyle = COLOR.band;
        L.spans.forEach(function (span, lane) {
          var x0 = u.valToPos(span[0] - 0.4, "x", true), x1 = u.valToPos(span[1] + 0.4, "x", true);
          var y0 = u.valToPos(lane + 0.3, "y", true), y1 = u.valToPos(lane - 0.3, "y", true);
          ctx.fillRect(x0, y0, Math.max(x1 - x0, 2), y1 - y0);
        });
      });
    };
    var label = function (name) { return name.length > 22 ? name.slice(0, 21) + "…" : name; };
    make("chart-ledger", {
      height: Math.max(150, 70 + 34 * L.lanes.length),
      scales: { x: { time: false, range: xRange }, y: { range: function () { return [-0.6, L.lanes.length - 0.4]; } } },
      axes: [
        iterations(),
        { size: 150, splits: function () { return L.lanes.map(function (_, i) { return i; }); },
          values: function (u, splits) { return splits.map(function (i) { return label(L.lanes[i] || ""); }); } }
      ],
      series: [X].concat(statuses.map(function (s) {
        return { label: L.labels[s], stroke: COLOR[s], paths: noPath, points: points(COLOR[s], 8),
                 value: function (u, v) { return v == null ? "" : L.lanes[v]; } };
      })),
      hooks: { drawAxes: [bands] }
    }, [L.x].concat(statuses.map(function (s) { return L.series[s]; })));
  }

  // -- spending per iteration ----------------------------------------------------------------------------------
  function costChart() {
    var C = D.cost;
    if (!C) return;
    make("chart-cost", {
      height: 220,
      scales: { x: { time: false, range: xRange } },
      axes: [iterations(), { label: "model calls" }, { side: 1, scale: "tokens", label: "tokens", grid: { show: false } }],
      series: [
        X,
        { label: "provider calls", stroke: COLOR.provider, fill: "rgba(37,99,235,0.35)", paths: uPlot.paths.bars({ size: [0.7, 24] }), points: { show: false }, value: whole },
        { label: "cache hits", stroke: COLOR.cache, width: 2, points: points(COLOR.cache, 5), value: whole },
        { label: "tokens", scale: "tokens", stroke: COLOR.test, width: 1.5, dash: [4, 3], points: { show: false }, value: whole }
      ]
    }, [C.x, C.provider_calls, C.cache_hits, C.tokens]);
  }

  // -- validation score against deploy cost per 1,000 rows, the frontier as a staircase ----------------------
  // The cost axis is logarithmic: costs span orders of magnitude (an all-examples program at 22M tokens, a
  // proxy at 34k), and a linear axis piles every cheap program onto its left edge. A program without AI calls
  // (cost 0) is drawn at a tenth of the cheapest cost, the axis' left end; its hover line says 0.
  function compact(v) {
    var a = Math.abs(v);
    if (a >= 1e9) return +(v / 1e9).toPrecision(3) + "G";
    if (a >= 1e6) return +(v / 1e6).toPrecision(3) + "M";
    if (a >= 1e3) return +(v / 1e3).toPrecision(3) + "k";
    return a >= 1 || a === 0 ? String(+v.toPrecision(3)) : String(+v.toPrecision(2));
  }
  function frontierChart() {
    var F = D.frontier;
    if (!F) return;
    var positive = F.x.filter(function (v) { return v > 0; });
    var floor = Math.min.apply(null, positive) / 10;
    var xs = F.x.map(function (v) { return v > 0 ? v : floor; });
    var champion = F.x.map(function () { return null; });
    if (F.champion != null) champion[F.champion] = F.val[F.champion];
    var hover = function (u, v, i) { return v == null ? "" : fmt(v) + " · " + F.ids[i]; };
    make("chart-frontier", {
      height: 280,
      scales: { x: { time: false, distr: 3, log: 10, range: function (u, min, max) { return uPlot.rangeLog(min, max, 10, true); } }, y: { range: scoreRange } },
      axes: [{ label: "deploy cost per 1,000 rows (" + F.measure + ", log scale)", values: function (u, splits) { return splits.map(function (v) { return v == null ? "" : compact(v); }); } }, { label: "validation score" }],
      series: [
        { label: F.measure, value: function (u, v, s, i) { return i == null ? "" : F.x[i].toLocaleString(undefined, { maximumFractionDigits: F.measure === "usd" ? 6 : 0 }); } },
        { label: "program", stroke: COLOR.seed, paths: noPath, points: points("#64748b", 7), value: function (u, v, s, i) { return hover(u, v, i); } },
        { label: "frontier", stroke: COLOR.lineage, width: 2, spanGaps: true, paths: uPlot.paths.stepped({ align: 1 }), points: points(COLOR.lineage, 8), value: function (u, v, s, i) { return hover(u, v, i); } },
        { label: "champion", stroke: COLOR.best, paths: noPath, points: points(COLOR.best, 12, "#fff"), value: function (u, v) { return fmt(v); } }
      ]
    }, [xs, F.val, F.frontier, champion]);
  }

  // -- the solve matrix: programs x training rows, one cell per (program, row) on a canvas ------------------
  function matrixChart() {
    var M = D.matrix;
    var el = document.getElementById("chart-matrix");
    if (!M || !el) return;
    var canvas = el.querySelector("canvas"), tip = el.querySelector(".tip");
    var programSelect = document.getElementById("matrix-programs"), rowSelect = document.getElementById("matrix-rows");
    var P = M.programs.length, R = M.rows.length, LEFT = 10, TOP = 8, GAP = 2;
    var byIteration = M.programs.map(function (_, i) { return i; });
    var bySolvers = M.rows.map(function (_, j) { return j; }).sort(function (a, b) { return M.solvers[b] - M.solvers[a] || a - b; });
    var partial = {};
    M.partial.forEach(function (p) { partial[p.row] = true; });
    var shade = [];
    for (var d = 0; d <= 9; d++) {  // 0: light grey, 1-8: partial credit in blue, 9: solved in green
      if (d === 9) shade.push([21, 128, 61]);
      else if (d === 0) shade.push([241, 245, 249]);
      else shade.push([Math.round(219 - 14 * d), Math.round(234 - 10 * d), Math.round(254 - 4 * d)]);
    }
    var layout = {};
    function paint() {
      var cols = programSelect && programSelect.value === "iteration" ? byIteration : M.program_order;
      var rows = rowSelect && rowSelect.value === "solvers" ? bySolvers : M.row_order;
      var avail = Math.max(240, el.getBoundingClientRect().width - LEFT - GAP);
      var cw = Math.max(1, Math.min(48, Math.floor(avail / P)));
      var ch = Math.max(1, Math.min(14, Math.floor(640 / R)));
      var W = LEFT + GAP + P * cw, H = TOP + GAP + R * ch, dpr = window.devicePixelRatio || 1;
      canvas.width = Math.round(W * dpr);
      canvas.height = Math.round(H * dpr);
      canvas.style.width = W + "px";
      canvas.style.height = H + "px";
      var ctx = canvas.getContext("2d");
      ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
      ctx.clearRect(0, 0, W, H);
      var image = new ImageData(P, R), px = image.data;
      for (var c = 0; c < P; c++) {
        var cells = M.cells[cols[c]];
        for (var r = 0; r < R; r++) {
          var s = shade[cells.charCodeAt(rows[r]) - 48] || shade[0], k = (r * P + c) * 4;
          px[k] = s[0]; px[k + 1] = s[1]; px[k + 2] = s[2]; px[k + 3] = 255;
        }
      }
      var off = document.createElement("canvas");
      off.width = P;
      off.height = R;
      off.getContext("2d").putImageData(image, 0, 0);
      ctx.imageSmoothingEnabled = false;
      ctx.drawImage(off, LEFT + GAP, TOP + GAP, P * cw, R * ch);
      for (var j = 0; j < R; j++) {  // each row: nothing solves it, only some lineages, or solved
        var row = rows[j];
        ctx.fillStyle = M.solvers[row] === 0 ? COLOR.failed : partial[M.rows[row]] ? COLOR.regressed : "#86efac";
        ctx.fillRect(0, TOP + GAP + j * ch, LEFT - 2, ch);
      }
      for (var i = 0; i < P; i++) {  // each column: its lineage
        var lineage = M.lineage[cols[i]];
        ctx.fillStyle = lineage < 0 ? COLOR.seed : LINEAGE_COLORS[lineage % LINEAGE_COLORS.length];
        ctx.fillRect(LEFT + GAP + i * cw, 0, cw, TOP - 2);
      }
      layout = { cols: cols, rows: rows, cw: cw, ch: ch };
    }
    canvas.addEventListener("mousemove", function (e) {
      var c = Math.floor((e.offsetX - LEFT - GAP) / layout.cw), r = Math.floor((e.offsetY - TOP - GAP) / layout.ch);
      if (c < 0 || r < 0 || c >= P || r >= R) { tip.hidden = true; return; }
      var program = layout.cols[c], row = layout.rows[r];
      var d = M.cells[program].charCodeAt(row) - 48;
      var lineage = M.lineage[program];
      tip.textContent = "row " + M.rows[row] + " · program " + M.programs[program] + " (iteration " +
        M.iterations[program] + (lineage >= 0 ? ", lineage " + M.lineages[lineage] : ", the seed") + ") · " +
        (d === 9 ? "solved (≥ 0.9)" : "score " + (d / 10).toFixed(1) + "–" + ((d + 1) / 10).toFixed(1)) +
        " · row solved by " + M.solvers[row] + " programs in " + M.row_lineages[row] + " lineages";
      tip.hidden = false;
      tip.style.left = Math.min(e.offsetX + 14, Math.max(0, el.clientWidth - tip.offsetWidth)) + "px";
      tip.style.top = (e.offsetY + 14) + "px";
    });
    canvas.addEventListener("mouseleave", function () { tip.hidden = true; });
    [programSelect, rowSelect].forEach(function (s) { if (s) s.addEventListener("change", paint); });
    charts.push([{ setSize: paint }, el]);
    paint();
  }

  function toggles() {
    document.querySelectorAll("[data-toggle-details]").forEach(function (button) {
      button.addEventListener("click", function () {
        var all = document.querySelectorAll("#" + button.dataset.toggleDetails + " details");
        var open = !Array.prototype.every.call(all, function (d) { return d.open; });
        all.forEach(function (d) { d.open = open; });
        button.textContent = open ? "collapse all diffs" : "expand all diffs";
      });
    });
  }

  [scoreChart, genealogyChart, ledgerChart, costChart, frontierChart, matrixChart, toggles].forEach(function (draw) { draw(); });
  var resizing = null;
  window.addEventListener("resize", function () {
    clearTimeout(resizing);
    resizing = setTimeout(function () {
      charts.forEach(function (c) { c[0].setSize({ width: widthOf(c[1]), height: c[0].height }); });
    }, 100);
  });
  document.documentElement.dataset.renderedMs = String(Math.round(performance.now()));
})();
