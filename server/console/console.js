// rsql web console. Plain JavaScript, no dependencies: the pages are built from the JSON
// API under /api/v1/ (docs/operations.md), the plan graph and the charts are SVG drawn
// here. Each page polls its data every POLL_MS while it is shown.
"use strict";

const POLL_MS = 2000;
const SVGNS = "http://www.w3.org/2000/svg";

// ---- DOM helpers ---------------------------------------------------------------------

// h builds an HTML element: attrs (class, text, on<event>, data-*, ...) and children
// (nodes, strings, arrays, null).
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

// s builds an SVG element.
function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVGNS, tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

function setAttrs(el, attrs) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "text") el.textContent = v;
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
}

// fill replaces el's children (null and false children are left out).
function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.appendChild(typeof c === "string" || typeof c === "number" ? document.createTextNode(String(c)) : c);
  }
}

// ---- formatting ----------------------------------------------------------------------

function fmtNum(n) {
  if (n === null || n === undefined) return "–";
  const a = Math.abs(n);
  if (a >= 1e9) return (n / 1e9).toFixed(a >= 1e10 ? 0 : 1) + "G";
  if (a >= 1e6) return (n / 1e6).toFixed(a >= 1e7 ? 0 : 1) + "M";
  if (a >= 1e4) return (n / 1e3).toFixed(a >= 1e5 ? 0 : 1) + "k";
  if (Number.isInteger(n)) return String(n);
  return n.toFixed(a >= 100 ? 0 : a >= 10 ? 1 : 2);
}

function fmtRate(r) { return r === null || r === undefined ? "–" : fmtNum(r) + "/s"; }

function fmtMs(ms) {
  if (ms === null || ms === undefined) return "–";
  if (ms < 1) return ms.toFixed(2) + " ms";
  if (ms < 1000) return ms.toFixed(ms < 10 ? 1 : 0) + " ms";
  if (ms < 60000) return (ms / 1000).toFixed(1) + " s";
  if (ms < 3600000) return (ms / 60000).toFixed(1) + " min";
  return (ms / 3600000).toFixed(1) + " h";
}

function fmtBytes(b) {
  if (b === null || b === undefined) return "–";
  if (b < 1024) return b + " B";
  if (b < 1 << 20) return (b / 1024).toFixed(1) + " KiB";
  return (b / (1 << 20)).toFixed(1) + " MiB";
}

function fmtTime(text) { return text ? text.replace("T", " ").replace("Z", "") : "–"; }

function clock(ms) { return new Date(ms).toISOString().slice(11, 19); }

// ---- API -----------------------------------------------------------------------------

class APIError extends Error {
  constructor(status, body) {
    super((body && body.error && body.error.message) || "HTTP " + status);
    this.status = status;
    this.code = body && body.error && body.error.code;
  }
}

async function api(path, opts) {
  const resp = await fetch("/api/v1" + path, opts);
  let body = null;
  try { body = await resp.json(); } catch (e) { /* not JSON */ }
  if (!resp.ok) throw new APIError(resp.status, body);
  return body;
}

function setStatus(text, error) {
  const el = document.getElementById("status");
  el.textContent = text;
  el.className = "status" + (error ? " error" : "");
}

// ---- routing and polling -------------------------------------------------------------

let page = null; // {stop()} of the page shown

function route() {
  if (page && page.stop) page.stop();
  page = null;
  setStatus("");
  const main = document.getElementById("main");
  main.replaceChildren();
  const parts = (location.hash.replace(/^#\/?/, "") || "jobs").split("/").map(decodeURIComponent);
  for (const a of document.querySelectorAll("header nav a")) a.classList.toggle("active", a.dataset.nav === parts[0]);
  switch (parts[0]) {
    case "jobs": page = parts[1] ? jobPage(main, parts[1]) : jobsPage(main); break;
    case "streams": page = streamsPage(main); break;
    case "topics": page = parts[1] ? topicPage(main, parts[1], parts[2]) : topicsPage(main); break;
    case "sql": page = sqlPage(main); break;
    default: main.append(h("p", { text: "No page " + location.hash + "." }));
  }
}

// poller calls fn now and every POLL_MS until stopped; errors show in the header.
function poller(fn) {
  let timer = null, stopped = false;
  const tick = async () => {
    try {
      await fn();
      setStatus("updated " + clock(Date.now()));
    } catch (e) {
      setStatus(e.message, true);
    }
    if (!stopped) timer = setTimeout(tick, POLL_MS);
  };
  tick();
  return { stop() { stopped = true; clearTimeout(timer); }, now: tick };
}

// ---- jobs ----------------------------------------------------------------------------

function actionButtons(job, after) {
  const act = async (action) => {
    if (action === "terminate" && !confirm("Terminate " + job.id + "? Its output so far stays; it cannot be resumed.")) return;
    try {
      await api("/jobs/" + encodeURIComponent(job.id) + "/" + action, { method: "POST" });
      setStatus(action + " " + job.id + ": done");
    } catch (e) {
      setStatus(action + " " + job.id + ": " + e.message, true);
    }
    after();
  };
  const live = job.state === "RUNNING" || job.state === "PAUSED" || job.state === "RETRYING";
  return h("span", { class: "actions" },
    h("button", { id: "pause-" + job.id, "data-action": "pause", disabled: job.state !== "RUNNING", onclick: () => act("pause") }, "Pause"),
    h("button", { id: "resume-" + job.id, "data-action": "resume", disabled: job.state !== "PAUSED" && job.state !== "FAILED" && job.state !== "RETRYING", onclick: () => act("resume") }, "Resume"),
    h("button", { id: "terminate-" + job.id, class: "danger", "data-action": "terminate", disabled: !live, onclick: () => act("terminate") }, "Terminate"));
}

function ckptText(c) {
  if (!c) return "–";
  if (!c.count) return "epoch " + c.epoch;
  return "epoch " + c.epoch + " · " + fmtMs(c.duration_ms) + " · " + fmtBytes(c.size_bytes);
}

function instancesText(list) {
  if (!list || !list.length) return "–";
  return list.map((i) => i.name + (i.units && i.units.length ? " [" + i.units.join(",") + "]" : "")).join("; ");
}

function jobsPage(main) {
  const body = h("tbody", { id: "jobs-body" });
  main.append(h("h1", { text: "Jobs" }),
    h("table", { id: "jobs" },
      h("thead", {}, h("tr", {},
        ["Job", "State", "Input rate", "Output rate", "Records in", "Records out", "Lag", "Watermark delay", "Late / bad", "Last checkpoint", "Instances", "", "Statement"]
          .map((c, i) => h("th", { class: i >= 2 && i <= 8 ? "num" : null, text: c })))),
      body));
  const p = poller(async () => {
    const { jobs } = await api("/jobs");
    fill(body, ...jobs.map((j) => h("tr", { "data-job": j.id },
      h("td", {}, h("a", { href: "#/jobs/" + encodeURIComponent(j.id), text: j.id })),
      h("td", {}, h("span", { class: "badge " + j.state, text: j.state })),
      h("td", { class: "num", text: fmtRate(j.input_rate) }),
      h("td", { class: "num", text: fmtRate(j.output_rate) }),
      h("td", { class: "num", text: fmtNum(j.records_in) }),
      h("td", { class: "num", text: fmtNum(j.records_out) }),
      h("td", { class: "num", text: fmtNum(j.lag) }),
      h("td", { class: "num", text: fmtMs(j.watermark_delay_ms) }),
      h("td", { class: "num", text: fmtNum(j.late) + " / " + fmtNum(j.bad) }),
      h("td", { class: "wrap", text: ckptText(j.checkpoint) }),
      h("td", { class: "wrap", text: instancesText(j.instances) }),
      h("td", {}, actionButtons(j, () => p.now())),
      h("td", { class: "statement mono", text: j.statement }))));
    if (!jobs.length) body.append(h("tr", {}, h("td", { colspan: 13, class: "muted", text: "No jobs yet: CREATE STREAM ... AS SELECT starts one (SQL tab)." })));
  });
  return p;
}

function tile(k, v, sub, id) {
  return h("div", { class: "tile", id }, h("div", { class: "k", text: k }), h("div", { class: "v", text: v }), sub ? h("div", { class: "s", text: sub }) : null);
}

function jobPage(main, id) {
  const head = h("h1", {}, "Job " + id);
  const statement = h("pre", { class: "statement" });
  const tiles = h("div", { class: "tiles", id: "job-tiles" });
  const graphWrap = h("div", { class: "graph-wrap", id: "plan" }, h("span", { class: "muted", text: "loading the plan…" }));
  const charts = h("div", { class: "charts", id: "charts" });
  const splits = h("div", { id: "splits" });
  const errors = h("div", { id: "errors" });
  const explain = h("pre", { class: "statement", id: "explain" });
  main.append(head, statement, tiles, h("h2", { text: "Plan" }), graphWrap,
    h("h2", { text: "Last 15 minutes" }), charts,
    h("h2", { text: "Splits" }), splits, h("h2", { text: "Errors" }), errors,
    h("details", {}, h("summary", { text: "EXPLAIN" }), explain));

  let graph = null;   // {svg, update(nodes, stages)}
  let points = [];    // history, oldest first
  let windowMs = 15 * 60 * 1000;
  let lastT = 0;
  const loadPlan = async () => {
    const plan = await api("/jobs/" + encodeURIComponent(id) + "/plan");
    graph = drawPlan(plan.graph);
    fill(graphWrap, graph.svg);
    explain.textContent = plan.explain;
  };
  const p = poller(async () => {
    const j = await api("/jobs/" + encodeURIComponent(id) + "?since=" + lastT);
    if (!graph) {
      try { await loadPlan(); } catch (e) { fill(graphWrap, h("div", { class: "error-box", text: "plan: " + e.message })); graph = { update() {} }; }
    }
    fill(head, "Job " + j.id, h("span", { class: "badge " + j.state, id: "job-state", text: j.state }), actionButtons(j, () => p.now()));
    statement.textContent = j.statement;
    fill(tiles,
      tile("Input rate", fmtRate(j.input_rate), fmtNum(j.records_in) + " records in", "tile-input-rate"),
      tile("Output rate", fmtRate(j.output_rate), fmtNum(j.records_out) + " rows out", "tile-output-rate"),
      tile("Lag", fmtNum(j.lag), "messages behind the sources' ends"),
      tile("Watermark", j.watermark ? fmtTime(j.watermark).slice(11) : "–", j.watermark ? fmtTime(j.watermark).slice(0, 10) + (j.watermark_delay_ms !== null ? ", " + fmtMs(j.watermark_delay_ms) + " behind the clock" : "") : ""),
      tile("Late / bad", fmtNum(j.late) + " / " + fmtNum(j.bad)),
      tile("Last checkpoint", j.checkpoint ? "epoch " + j.checkpoint.epoch : "–", j.checkpoint && j.checkpoint.count ? fmtMs(j.checkpoint.duration_ms) + " · " + fmtBytes(j.checkpoint.size_bytes) : ""),
      tile("Instances", instancesText(j.instances)));
    const hist = j.history;
    windowMs = hist.window_ms;
    for (const pt of hist.points) if (pt.t > lastT) points.push(pt);
    if (points.length) lastT = points[points.length - 1].t;
    const now = Date.now();
    points = points.filter((pt) => pt.t >= now - windowMs);
    fill(charts,
      chart("input_rate", "Input rate", points, "input_rate", fmtRate, now, windowMs),
      chart("output_rate", "Output rate", points, "output_rate", fmtRate, now, windowMs),
      chart("lag", "Lag (messages)", points, "lag", fmtNum, now, windowMs),
      chart("checkpoint_ms", "Checkpoint duration", points, "checkpoint_ms", fmtMs, now, windowMs));
    const d = j.detail;
    graph.update(d.nodes, d.stages);
    fill(splits, d.splits.length ? h("table", {},
      h("thead", {}, h("tr", {}, ["Stage", "Stream", "Split", "Offset", "Lag", "Watermark", "Max event time", "State"].map((c) => h("th", { text: c })))),
      h("tbody", {}, d.splits.map((sp) => h("tr", {},
        h("td", { text: sp.stage }), h("td", { text: sp.stream || "(edge)" }), h("td", { class: "mono", text: sp.split }),
        h("td", { class: "num", text: sp.offset }), h("td", { class: "num", text: fmtNum(sp.lag) }),
        h("td", { text: fmtTime(sp.watermark) }), h("td", { text: fmtTime(sp.max_event_time) }),
        h("td", { text: sp.done ? "done" : sp.idle ? "idle" : "active" })))))
      : h("p", { class: "muted", text: j.running ? "No splits yet." : "The job is not running here: no splits." }));
    const errs = [];
    if (j.error) errs.push(h("div", { class: "error-box" }, h("span", { class: "code", text: j.state === "RETRYING" ? "RETRYING" : "FAILED" }), j.error));
    for (const b of d.bad_errors.slice().reverse()) errs.push(h("div", { class: "error-box mono", text: b }));
    fill(errors, ...(errs.length ? errs : [h("p", { class: "muted", text: "No failures and no bad records." })]));
  });
  return p;
}

// ---- plan graph ----------------------------------------------------------------------

const NODE_W = 168, NODE_H = 62, GAP_X = 56, GAP_Y = 22, PAD = 16, STAGE_HEAD = 22;

// layout places nodes in layers (longest path from an input), stages in bands: stages
// whose layers overlap go in different bands, a chain of stages shares one.
function layout(graph) {
  const byId = new Map(graph.nodes.map((n) => [n.id, n]));
  const preds = new Map(graph.nodes.map((n) => [n.id, []]));
  for (const e of graph.edges) if (preds.has(e.to)) preds.get(e.to).push(e.from);
  const layer = new Map();
  const depth = (id, seen) => {
    if (layer.has(id)) return layer.get(id);
    if (seen.has(id)) return 0;
    seen.add(id);
    let d = 0;
    for (const p of preds.get(id) || []) if (byId.has(p)) d = Math.max(d, depth(p, seen) + 1);
    layer.set(id, d);
    return d;
  };
  for (const n of graph.nodes) depth(n.id, new Set());
  const stages = graph.stages.map((st) => {
    const ls = st.nodes.map((id) => layer.get(id));
    return { id: st.id, nodes: st.nodes, min: Math.min(...ls), max: Math.max(...ls) };
  });
  const bands = []; // {last: max layer used, stages}
  for (const st of stages.slice().sort((a, b) => a.min - b.min)) {
    let band = bands.find((b) => b.last < st.min);
    if (!band) { band = { last: -1, stages: [] }; bands.push(band); }
    band.stages.push(st);
    band.last = st.max;
  }
  const pos = new Map();
  const boxes = [];
  let y = PAD;
  for (const band of bands) {
    let bandH = 0;
    for (const st of band.stages) {
      const perLayer = new Map();
      for (const id of st.nodes) {
        const l = layer.get(id);
        const k = perLayer.get(l) || 0;
        perLayer.set(l, k + 1);
        pos.set(id, { x: PAD + l * (NODE_W + GAP_X), y: y + STAGE_HEAD + k * (NODE_H + GAP_Y) });
      }
      const rows = Math.max(...perLayer.values());
      const hgt = STAGE_HEAD + rows * NODE_H + (rows - 1) * GAP_Y;
      boxes.push({ id: st.id, x: PAD + st.min * (NODE_W + GAP_X) - 10, y: y - 4, w: (st.max - st.min) * (NODE_W + GAP_X) + NODE_W + 20, h: hgt + 14 });
      bandH = Math.max(bandH, hgt);
    }
    y += bandH + 40;
  }
  const maxLayer = Math.max(0, ...layer.values());
  return { pos, boxes, width: PAD * 2 + (maxLayer + 1) * (NODE_W + GAP_X) - GAP_X + 20, height: y - 16 };
}

function clip(text, n) { return !text ? "" : text.length > n ? text.slice(0, n - 1) + "…" : text; }

// drawPlan draws the graph once; update() sets the rates, row counts and stage labels.
function drawPlan(graph) {
  const L = layout(graph);
  const svg = s("svg", { class: "plan", id: "plan-graph", width: L.width, height: L.height, viewBox: "0 0 " + L.width + " " + L.height },
    s("defs", {}, s("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" },
      s("path", { d: "M 0 0 L 10 5 L 0 10 z" }))));
  const stageLabels = new Map();
  for (const b of L.boxes) {
    const label = s("text", { x: b.x + 8, y: b.y + 15 }, "Stage " + b.id);
    stageLabels.set(b.id, label);
    svg.append(s("g", { class: "stage", "data-stage": b.id }, s("rect", { x: b.x, y: b.y, width: b.w, height: b.h, rx: 8 }), label));
  }
  const edgeLabels = [];
  for (const e of graph.edges) {
    const a = L.pos.get(e.from), b = L.pos.get(e.to);
    if (!a || !b) continue;
    const x1 = a.x + NODE_W, y1 = a.y + NODE_H / 2, x2 = b.x, y2 = b.y + NODE_H / 2;
    const mx = (x1 + x2) / 2;
    const text = s("text", { x: mx, y: (y1 + y2) / 2 - 5, "text-anchor": "middle", class: "rate" }, "");
    const bg = s("rect", { x: mx - 26, y: (y1 + y2) / 2 - 17, width: 52, height: 15, rx: 3 });
    const g = s("g", { class: "link", "data-edge": e.from + ">" + e.to, "data-from": e.from },
      s("path", { d: `M ${x1} ${y1} C ${mx} ${y1}, ${mx} ${y2}, ${x2 - 2} ${y2}`, "marker-end": "url(#arrow)" }), bg, text);
    svg.append(g);
    edgeLabels.push({ g, text, from: e.from });
  }
  const rowTexts = new Map();
  for (const n of graph.nodes) {
    const p = L.pos.get(n.id);
    if (!p) continue;
    const rows = s("text", { x: p.x + 8, y: p.y + 53, class: "rows" }, "");
    rowTexts.set(n.id, rows);
    const full = [n.label, n.detail, n.columns && n.columns.length ? "columns: " + n.columns.join(", ") : ""].filter(Boolean).join("\n");
    svg.append(s("g", { class: "node " + n.kind, "data-node": n.id, "data-kind": n.kind },
      s("title", {}, full),
      s("rect", { x: p.x, y: p.y, width: NODE_W, height: NODE_H, rx: 6 }),
      s("text", { x: p.x + 8, y: p.y + 17, "font-weight": 600 }, clip(n.label, 24)),
      s("text", { x: p.x + 8, y: p.y + 34, class: "detail" }, clip(n.detail || (n.columns || []).join(", "), 25)),
      rows));
  }
  return {
    svg,
    update(nodes, stages) {
      for (const el of edgeLabels) {
        const st = nodes[el.from];
        const rate = st ? st.rate : null;
        el.text.textContent = rate === null || rate === undefined ? "" : fmtRate(rate);
        el.g.setAttribute("data-rate", rate === null || rate === undefined ? "" : rate);
        el.g.classList.toggle("active", !!rate && rate > 0);
      }
      for (const [id, t] of rowTexts) {
        const st = nodes[id];
        t.textContent = st ? fmtNum(st.rows) + " rows out" : "";
      }
      for (const st of stages || []) {
        const label = stageLabels.get(st.id);
        if (!label) continue;
        const parts = ["Stage " + st.id];
        if (st.watermark) parts.push("watermark " + fmtTime(st.watermark).slice(11) + (st.watermark_delay_ms !== null ? " (" + fmtMs(st.watermark_delay_ms) + " behind)" : ""));
        if (st.lag !== null && st.lag !== undefined) parts.push("lag " + fmtNum(st.lag));
        label.textContent = parts.join(" · ");
      }
    },
  };
}

// ---- charts --------------------------------------------------------------------------

const CW = 460, CH = 160, ML = 52, MR = 14, MT = 26, MB = 22;

// chart draws one series of the history as an SVG line over the last windowMs, or over
// the time since the first sample when that is shorter (at least a minute). Gaps (no
// value, the job not running) break the line.
function chart(id, title, points, key, fmt, now, windowMs) {
  const vals = points.filter((p) => p[key] !== null && p[key] !== undefined);
  const maxV = Math.max(0, ...vals.map((p) => p[key]));
  const top = maxV > 0 ? maxV * 1.15 : 1;
  const span = Math.min(windowMs, Math.max(60000, points.length ? now - points[0].t : 0));
  const x = (t) => ML + ((t - (now - span)) / span) * (CW - ML - MR);
  const y = (v) => CH - MB - (v / top) * (CH - MT - MB);
  const last = vals.length ? vals[vals.length - 1][key] : null;
  const svg = s("svg", { class: "chart", id: "chart-" + id, viewBox: `0 0 ${CW} ${CH}`, "data-series": key, "data-points": vals.length, "data-last": last === null ? "" : last, "data-max": maxV },
    s("text", { x: ML, y: 16, class: "title" }, title),
    s("text", { x: CW - MR, y: 16, class: "last", "text-anchor": "end" }, last === null ? "–" : fmt(last)));
  for (const v of maxV > 0 ? [0, maxV / 2, maxV] : [0]) {
    const yy = y(v);
    svg.append(s("line", { x1: ML, x2: CW - MR, y1: yy, y2: yy, class: v === 0 ? "axis" : "grid" }),
      s("text", { x: ML - 6, y: yy + 4, class: "tick", "text-anchor": "end" }, v === 0 ? "0" : fmt(v)));
  }
  for (const f of [1, 2 / 3, 1 / 3, 0]) {
    const ago = span * f;
    const label = f === 0 ? "now" : ago >= 120000 ? "-" + Math.round(ago / 60000) + " min" : "-" + Math.round(ago / 1000) + " s";
    svg.append(s("text", { x: x(now - ago), y: CH - 6, class: "tick", "text-anchor": f === 1 ? "start" : f === 0 ? "end" : "middle" }, label));
  }
  // contiguous runs of points: a gap longer than three sample intervals breaks the line
  let run = [];
  const runs = [run];
  let prevT = null;
  for (const p of points) {
    const v = p[key];
    if (v === null || v === undefined || (prevT !== null && p.t - prevT > 3 * POLL_MS + 1000)) {
      run = [];
      runs.push(run);
    }
    if (v !== null && v !== undefined) run.push([x(p.t), y(v)]);
    prevT = p.t;
  }
  for (const r of runs) {
    if (!r.length) continue;
    const pts = r.map(([a, b]) => a.toFixed(1) + "," + b.toFixed(1)).join(" ");
    if (r.length > 1) {
      const base = y(0).toFixed(1);
      svg.append(s("polyline", { class: "area", points: r[0][0].toFixed(1) + "," + base + " " + pts + " " + r[r.length - 1][0].toFixed(1) + "," + base }));
    }
    svg.append(s("polyline", { class: "series", points: pts }));
  }
  if (!vals.length) svg.append(s("text", { x: CW / 2, y: CH / 2, class: "tick", "text-anchor": "middle" }, "no data yet"));
  return svg;
}

// ---- streams -------------------------------------------------------------------------

function streamsPage(main) {
  const list = h("div", { id: "streams" });
  main.append(h("h1", { text: "Streams and views" }), list);
  return poller(async () => {
    const { streams } = await api("/streams");
    if (!streams.length) {
      fill(list, h("p", { class: "muted", text: "No streams yet: CREATE STREAM declares one (SQL tab)." }));
      return;
    }
    fill(list, ...streams.map((st) => h("div", { class: "card", "data-stream": st.name },
      h("h2", {}, st.name + " ", h("span", { class: "badge", text: st.is_view ? "materialized view" : "stream" })),
      h("table", { class: "kv" }, h("tbody", {},
        h("tr", {}, h("td", { text: "connector" }), h("td", {}, st.connector,
          st.topic ? [" · topic ", h("a", { href: "#/topics/" + encodeURIComponent(st.topic), text: st.topic })] : null,
          st.path ? " · path " + st.path : null, st.format ? " · format " + st.format : null)),
        st.event_time ? h("tr", {}, h("td", { text: "event time" }), h("td", { text: st.event_time + " (watermark delay " + st.watermark_delay + ")" })) : null,
        h("tr", {}, h("td", { text: "columns" }), h("td", { class: "wrap mono", text: st.columns.map((c) => c.name + " " + c.type).join(", ") })),
        h("tr", {}, h("td", { text: "options" }), h("td", { class: "wrap mono", text: Object.entries(st.options).map(([k, v]) => k + " = '" + v + "'").join(", ") || "–" })),
        h("tr", {}, h("td", { text: "written by" }), h("td", {}, st.job ? h("a", { href: "#/jobs/" + encodeURIComponent(st.job), text: st.job }) : "–")),
        h("tr", {}, h("td", { text: "read by" }), h("td", {}, st.readers.length ? st.readers.map((r, i) => [i ? ", " : "", h("a", { href: "#/jobs/" + encodeURIComponent(r), text: r })]) : "–")),
        h("tr", {}, h("td", { text: "statement" }), h("td", { class: "wrap mono", text: st.statement })))))));
  });
}

// ---- topics --------------------------------------------------------------------------

function topicsPage(main) {
  const body = h("tbody", {});
  main.append(h("h1", { text: "Topics" }), h("table", { id: "topics" },
    h("thead", {}, h("tr", {}, ["Topic", "Queues", "Messages", "Streams", "Consumer groups", "Group lag"].map((c, i) => h("th", { class: i === 1 || i === 2 || i === 5 ? "num" : null, text: c })))),
    body));
  return poller(async () => {
    const { topics } = await api("/topics");
    fill(body, ...topics.map((t) => h("tr", { "data-topic": t.name },
      h("td", {}, h("a", { href: "#/topics/" + encodeURIComponent(t.name), text: t.name })),
      h("td", { class: "num", text: t.queues.length }),
      h("td", { class: "num", text: fmtNum(t.messages) }),
      h("td", { text: t.streams.join(", ") || "–" }),
      h("td", { text: t.groups.map((g) => g.group).join(", ") || "–" }),
      h("td", { class: "num", text: t.groups.length ? fmtNum(Math.max(...t.groups.map((g) => g.lag))) : "–" }))));
    if (!topics.length) body.append(h("tr", {}, h("td", { colspan: 6, class: "muted", text: "No topics yet." })));
  });
}

function topicPage(main, name, queueArg) {
  let queue = Number(queueArg || 0);
  let last = 20;
  const info = h("div", {});
  const queueSel = h("select", { id: "queue-select", onchange: () => { queue = Number(queueSel.value); p.now(); } });
  const lastIn = h("input", { type: "number", min: 1, max: 1000, value: last, id: "last-n", onchange: () => { last = Math.max(1, Math.min(1000, Number(lastIn.value) || 20)); p.now(); } });
  const msgs = h("div", { id: "messages" });
  main.append(h("h1", { text: "Topic " + name }), info,
    h("h2", { text: "Last messages" }),
    h("div", { class: "row-controls" }, h("label", {}, "queue ", queueSel), h("label", {}, "last ", lastIn, " messages")),
    msgs);
  const p = poller(async () => {
    const t = await api("/topics/" + encodeURIComponent(name));
    if (queueSel.options.length !== t.queues.length) {
      fill(queueSel, ...t.queues.map((q) => h("option", { value: q.queue, text: "queue " + q.queue })));
    }
    queueSel.value = String(queue);
    fill(info,
      h("p", {}, "Streams over this topic: ", t.streams.length ? t.streams.join(", ") : "none", " · ", fmtNum(t.messages), " messages retained"),
      h("h2", { text: "Queues" }),
      h("table", { id: "queues" }, h("thead", {}, h("tr", {}, ["Queue", "Min offset", "Max offset", "Messages"].map((c) => h("th", { class: "num", text: c })))),
        h("tbody", {}, t.queues.map((q) => h("tr", {}, [q.queue, q.min_offset, q.max_offset, q.messages].map((v) => h("td", { class: "num", text: v })))))),
      h("h2", { text: "Consumer groups" }),
      t.groups.length ? h("table", { id: "groups" }, h("thead", {}, h("tr", {}, h("th", { text: "Group" }), h("th", { class: "num", text: "Lag" }), h("th", { text: "Offsets (queue: offset, lag)" }))),
        h("tbody", {}, t.groups.map((g) => h("tr", {}, h("td", { text: g.group }), h("td", { class: "num", text: g.lag }),
          h("td", { class: "mono", text: g.queues.map((q) => q.queue + ": " + q.offset + ", " + q.lag).join("  ") })))))
        : h("p", { class: "muted", text: "No consumer group has committed an offset here." }));
    const m = await api("/topics/" + encodeURIComponent(name) + "/queues/" + queue + "/messages?last=" + last);
    const cols = m.columns || [];
    const rows = m.messages.slice().reverse();
    fill(msgs,
      h("p", { class: "muted" }, m.stream ? "decoded as stream " + m.stream + " (format " + m.format + ")" : "no stream is declared over this topic: bodies shown as they are",
        m.format_error ? " · " + m.format_error : ""),
      h("div", { class: "scroll" }, h("table", { id: "messages-table" },
        h("thead", {}, h("tr", {}, h("th", { class: "num", text: "Offset" }), h("th", { text: "Stored" }), h("th", { text: "Key" }),
          cols.length ? cols.map((c) => h("th", { text: c.name })) : h("th", { text: "Body" }))),
        h("tbody", {}, rows.map((r) => h("tr", { "data-offset": r.offset },
          h("td", { class: "num", text: r.offset }), h("td", { text: fmtTime(r.store_time) }), h("td", { text: r.key || "" }),
          cols.length && r.values ? r.values.map((v) => h("td", { class: "mono", text: cellText(v) }))
            : h("td", { class: "wrap mono", colspan: Math.max(1, cols.length) }, r.decode_error ? h("span", { class: "caret", text: r.decode_error + ": " }) : null, r.body !== undefined ? r.body : "(binary) " + r.body_base64)))))),
      rows.length ? null : h("p", { class: "muted", text: "The queue holds no message." }));
  });
  return p;
}

function cellText(v) { return v === null ? "NULL" : typeof v === "object" ? JSON.stringify(v) : String(v); }

// ---- SQL -----------------------------------------------------------------------------

let lastSQL = "SHOW JOBS;";

function sqlPage(main) {
  const input = h("textarea", { id: "sql-input", spellcheck: "false" });
  input.value = lastSQL;
  const maxRows = h("input", { type: "number", min: 0, value: 1000, id: "sql-max-rows" });
  const run = h("button", { class: "primary", id: "sql-run" }, "Run");
  const stop = h("button", { id: "sql-stop", disabled: true }, "Stop");
  const out = h("div", { id: "sql-output" });
  main.append(h("h1", { text: "SQL" }),
    h("p", { class: "muted", text: "Statements run through the engine as from psql. A SELECT over a stream is a push query: its rows arrive as they are produced until you stop it (SET offset_reset = 'earliest'; first to read from the start)." }),
    input, h("div", { class: "sql-bar" }, run, stop, h("label", {}, "stop after ", maxRows, " rows (0: never)"), h("span", { class: "muted", id: "sql-state" })),
    out);
  let ctrl = null;
  const state = (t) => { document.getElementById("sql-state").textContent = t; };
  run.addEventListener("click", async () => {
    lastSQL = input.value;
    out.replaceChildren();
    ctrl = new AbortController();
    run.disabled = true; stop.disabled = false;
    state("running…");
    try {
      await runStatements(input.value, Number(maxRows.value) || 0, out, ctrl.signal, state);
    } catch (e) {
      if (e.name === "AbortError") state("stopped");
      else out.append(h("div", { class: "error-box", text: e.message }));
    } finally {
      run.disabled = false; stop.disabled = true; ctrl = null;
    }
  });
  stop.addEventListener("click", () => { if (ctrl) ctrl.abort(); });
  input.addEventListener("keydown", (e) => { if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) run.click(); });
  return { stop() { if (ctrl) ctrl.abort(); } };
}

const MAX_SHOWN = 500;

// runStatements posts the text and renders the JSON lines as they stream in.
async function runStatements(text, maxRows, out, signal, state) {
  const resp = await fetch("/api/v1/sql", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ sql: text, max_rows: maxRows }), signal });
  if (!resp.body) throw new Error("HTTP " + resp.status);
  const reader = resp.body.getReader();
  const dec = new TextDecoder();
  let buf = "";
  const results = new Map();
  const handle = (ev) => {
    let r = results.get(ev.result);
    if (!r && ev.type !== "error") {
      r = { el: h("div", { class: "result", "data-result": ev.result }), rows: 0, tbody: null, meta: null };
      results.set(ev.result, r);
      out.append(r.el);
    }
    switch (ev.type) {
      case "notice":
        r.el.append(h("div", { class: "notice", text: ev.severity + ": " + ev.message }));
        break;
      case "columns": {
        r.tbody = h("tbody", {});
        r.meta = h("div", { class: "meta", text: ev.push ? "push query: rows appear as they arrive…" : "" });
        r.push = ev.push;
        r.el.append(r.meta, h("div", { class: "scroll" }, h("table", { class: "result-table" },
          h("thead", {}, h("tr", {}, ev.columns.map((c) => h("th", { title: c.type, class: /INT|DOUBLE|DECIMAL|NUMERIC/.test(c.type) ? "num" : null, text: c.name })))), r.tbody)));
        break;
      }
      case "row":
        r.rows++;
        r.tbody.append(h("tr", {}, ev.values.map((v) => h("td", { class: typeof v === "number" ? "num" : null, text: cellText(v) }))));
        if (r.tbody.childElementCount > MAX_SHOWN) r.tbody.firstElementChild.remove();
        if (r.push) r.meta.textContent = r.rows + " rows so far" + (r.rows > MAX_SHOWN ? " (the last " + MAX_SHOWN + " shown)" : "") + "…";
        break;
      case "complete":
        if (r.meta) r.meta.textContent = ev.tag + (ev.stopped ? " (stopped after " + ev.rows + " rows)" : "");
        else r.el.append(h("div", { class: "meta", text: ev.tag }));
        break;
      case "error":
        (r ? r.el : out).append(errorBox(ev, text));
        break;
    }
  };
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += dec.decode(value, { stream: true });
      let i;
      while ((i = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 1);
        if (line.trim()) handle(JSON.parse(line));
      }
    }
  } catch (e) {
    if (e.name === "AbortError") {
      for (const r of results.values()) if (r.push && r.meta && /so far|arrive/.test(r.meta.textContent)) r.meta.textContent = "stopped after " + r.rows + " rows";
    }
    throw e;
  }
  state("done");
}

// errorBox shows a SQL error with its SQLSTATE and, when it has a position, the line of
// the statement with a caret under it.
function errorBox(ev, text) {
  const box = h("div", { class: "error-box", id: "sql-error" }, h("span", { class: "code", text: ev.code || "" }), " ", ev.message);
  if (ev.position) {
    const chars = Array.from(text);
    const before = chars.slice(0, ev.position - 1).join("");
    const lineStart = before.lastIndexOf("\n") + 1;
    let lineEnd = text.indexOf("\n", before.length);
    if (lineEnd < 0) lineEnd = text.length;
    const line = text.slice(lineStart, lineEnd);
    const col = Array.from(before.slice(lineStart)).length;
    const lineNo = before.split("\n").length;
    box.append(h("pre", { class: "caret-line" }, "LINE " + lineNo + ": " + line + "\n" + " ".repeat(("LINE " + lineNo + ": ").length + col), h("span", { class: "caret", text: "^" })));
  }
  return box;
}

window.addEventListener("hashchange", route);
route();
