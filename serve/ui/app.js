// ctxd's web page: four views (status, ask, graph, sessions) over the daemon's own HTTP API.
// No build step and no library: the DOM, fetch and SVG. Everything it shows comes from the
// authenticated routes (/v1/status, /v1/versions, /metrics, /v1/search, /v1/context, /v1/locate,
// /v1/graph/*, /v1/sessions) with the token kept in this tab's sessionStorage.
"use strict";

const TOKEN_KEY = "ctxd-token";
const POLL_MS = 2000;
const $ = (id) => document.getElementById(id);

// ---- the API, with the token -------------------------------------------------------------

class SignInNeeded extends Error {}

async function api(path, body) {
  const headers = {};
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) headers["Authorization"] = "Bearer " + token;
  const init = { headers };
  if (body !== undefined) {
    init.method = "POST";
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const res = await fetch(path, init);
  if (res.status === 401) throw new SignInNeeded("this daemon wants its token");
  const type = res.headers.get("content-type") || "";
  const data = type.includes("json") ? await res.json() : await res.text();
  if (!res.ok) {
    const msg = data && data.error ? data.error : String(data).slice(0, 300);
    throw new Error(`${path}: ${res.status} ${msg}`);
  }
  return data;
}

function curlLine(path, body) {
  const url = location.origin + path;
  const auth = sessionStorage.getItem(TOKEN_KEY) ? ` -H "Authorization: Bearer $CTXD_AUTH_TOKEN"` : "";
  const json = JSON.stringify(body).replace(/'/g, "'\\''");
  return `curl -s ${url}${auth} -H 'Content-Type: application/json' -d '${json}'`;
}

// ---- small DOM helpers ---------------------------------------------------------------------

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else if (v !== undefined && v !== null && v !== false) e.setAttribute(k, v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

function svgEl(tag, attrs, ...children) {
  const e = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

function table(headers, rows) {
  return el("table", {},
    el("thead", {}, el("tr", {}, headers.map((h) => el("th", {}, h)))),
    el("tbody", {}, rows.map((r) => el("tr", {}, r.map((c) => el("td", {}, c))))));
}

const fmt = (n) => (typeof n === "number" ? n.toLocaleString("en-US", { maximumFractionDigits: 2 }) : n ?? "–");

function showError(e) {
  if (e instanceof SignInNeeded) return signIn();
  $("error").textContent = e ? String(e.message || e) : "";
}

// ---- syntax colouring: comments, strings, keywords and numbers, by a few regular expressions --

const KEYWORDS = new Set(("as async await break case catch class const continue def default del elif else enum " +
  "except export extends false finally fn for from func function go if impl import in interface is lambda let " +
  "loop match mod mut new nil none not null or package pass pub raise return self static struct super switch " +
  "throw trait true try type typeof use var void where while with yield True False None").split(" "));
const TOKEN_RE = /(\/\/[^\n]*|#[^\n]*|\/\*[\s\S]*?\*\/|"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|`[^`]*`|\b\d[\d_.]*\b|\b[A-Za-z_][A-Za-z0-9_]*\b)/g;

function colour(line, language) {
  const out = [];
  let last = 0;
  const hashComments = ["python", "ruby", "shell", "bash", "toml", "yaml", "make"].includes(language);
  for (const m of line.matchAll(TOKEN_RE)) {
    const t = m[0];
    let cls = null;
    if (t.startsWith("//") || t.startsWith("/*")) cls = "c";
    else if (t.startsWith("#")) cls = hashComments ? "c" : null;
    else if (/^["'`]/.test(t)) cls = "s";
    else if (/^\d/.test(t)) cls = "n";
    else if (KEYWORDS.has(t)) cls = "k";
    if (!cls) continue;
    out.push(line.slice(last, m.index), el("span", { class: "t" + cls }, t));
    last = m.index + t.length;
  }
  out.push(line.slice(last));
  return out;
}

// Lines with the query's words (or in `highlights` ranges) are marked.
function codeBlock(hit, words) {
  const lines = (hit.content || "").split("\n");
  const marked = (n, text) =>
    (hit.highlights || []).some(([a, b]) => n >= a && n <= b) ||
    words.some((w) => text.toLowerCase().includes(w));
  return el("pre", { class: "code" }, lines.map((text, i) => {
    const n = (hit.start_line || 1) + i;
    return el("div", { class: marked(n, text) ? "ln hit" : "ln" },
      el("span", { class: "no" }, String(n)), colour(text, hit.language));
  }));
}

// ---- pages -----------------------------------------------------------------------------------

let pollTimer = null;
let lastPipeline = null;

async function showStatus() {
  const [status, versions, metrics] = await Promise.all([
    api("/v1/status"),
    api("/v1/versions?last=20"),
    api("/metrics").catch(() => ""),
  ]);
  $("stamp").textContent = `version ${status.version}`;
  const p = status.indexing;
  const cards = [
    ["version", status.version],
    ["ready", status.ready ? "yes" : "not yet"],
    ["role", status.role],
    ["writer lease", status.lease || "held by the writer (this process reads)"],
    ["model", status.model],
    ["embedding", status.backend || "none (full text only)"],
  ];
  if (p) {
    cards.push(["first scan", `${fmt(p.files_done)} of ${fmt(p.files_seen)} files${p.scan_done ? "" : "+"}`]);
    cards.push(["chunks", fmt(p.chunks)]);
  }
  const m = parseMetrics(metrics);
  const lag = m.get("ctxd_pipeline_freshness_lag_seconds");
  if (lag) cards.push(["freshness lag", `${fmt(lag[0].value)} s`]);
  const inflight = m.get("ctxd_pipeline_in_flight_files");
  if (inflight) cards.push(["changed, not committed", fmt(inflight[0].value)]);
  const reembed = m.get("ctxd_reembed_rows_total");
  if (reembed) cards.push(["re-embedded rows", fmt(reembed.reduce((a, s) => a + s.value, 0))]);
  $("status-cards").replaceChildren(...cards.map(([k, v]) => el("div", { class: "card" },
    el("div", { class: "muted small" }, k), el("div", { class: "big" }, String(v)))));

  const sources = status.sources || [];
  $("status-sources").replaceChildren(sources.length
    ? table(["source", "files", "chunks", "refs (files, chunks stored under each)"], sources.map((s) =>
        [s.name, fmt(s.files), fmt(s.chunks), (s.refs || []).map((r) => el("span", { class: "tag" }, `${r.ref}: ${fmt(r.files)}, ${fmt(r.chunks)}`))]))
    : el("p", { class: "muted" }, "one source, unnamed (name sources in the config to see each one here)"));

  $("status-versions").replaceChildren(...versions.versions.slice().reverse().map((v) =>
    el("a", { class: "version" + (v.version === status.version ? " current" : ""),
              href: `#ask?as_of=${v.version}`, title: v.timestamp },
      el("b", {}, `v${v.version}`), " ", el("span", { class: "muted small" }, v.timestamp.replace("T", " ").slice(0, 19)),
      " ", el("span", { class: "small" }, `${fmt(v.rows)} chunks`),
      v.tags.map((t) => el("span", { class: "tag" }, t)))));

  const depth = m.get("ctxd_stage_queue_depth_items") || [];
  const cap = new Map((m.get("ctxd_stage_queue_capacity_items") || []).map((s) => [s.labels.edge || s.labels.stage, s.value]));
  const sent = new Map((m.get("ctxd_stage_sent_items_total") || []).map((s) => [s.labels.stage, s.value]));
  const now = Date.now();
  const rate = (stage) => {
    if (!lastPipeline || !sent.has(stage) || !lastPipeline.sent.has(stage)) return "–";
    const secs = (now - lastPipeline.at) / 1000;
    return secs > 0 ? fmt((sent.get(stage) - lastPipeline.sent.get(stage)) / secs) + "/s" : "–";
  };
  lastPipeline = { at: now, sent };
  const ORDER = ["watch", "load", "chunk", "embed", "upsert"];
  const stages = [...sent.keys()].sort((a, b) => (ORDER.indexOf(a) + 1 || 99) - (ORDER.indexOf(b) + 1 || 99));
  $("status-pipeline").replaceChildren(
    stages.length ? table(["stage", "items sent", "rate"], stages.map((s) => [s, fmt(sent.get(s)), rate(s)])) : "",
    depth.length ? table(["queue", "depth", "capacity"], depth.map((d) => {
      const name = d.labels.edge || d.labels.stage || "";
      return [name, fmt(d.value), fmt(cap.get(name))];
    })) : el("p", { class: "muted" }, metrics ? "no queue figures yet" : "pipeline figures need a token that reads every source"));
  $("status-updated").textContent = "updated " + new Date().toLocaleTimeString() + ", every 2 s";
}

// Prometheus text → name → [{labels, value}].
function parseMetrics(text) {
  const out = new Map();
  for (const line of String(text).split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const m = line.match(/^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})?\s+(\S+)/);
    if (!m) continue;
    const labels = {};
    for (const l of (m[3] || "").matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]] = l[2];
    if (!out.has(m[1])) out.set(m[1], []);
    out.get(m[1]).push({ labels, value: Number(m[4]) });
  }
  return out;
}

function askRequest() {
  const kind = $("ask-kind").value;
  const text = $("ask-text").value.trim();
  const opt = (id) => $(id).value.trim() || undefined;
  const asOf = opt("ask-asof");
  const common = { source: opt("ask-source"), ref: opt("ask-ref"), as_of: asOf && /^\d+$/.test(asOf) ? Number(asOf) : asOf };
  if (kind === "locate") return ["/v1/locate", { text, k: Number($("ask-k").value) || 10, ...common }];
  if (kind === "context") {
    return ["/v1/context", { query: text, budget: Number($("ask-budget").value) || 2000, mode: opt("ask-mode"),
      assembly: opt("ask-assembly"), session: opt("ask-session"), ...common }];
  }
  return ["/v1/search", { query: text, k: Number($("ask-k").value) || 10, mode: opt("ask-mode"), ...common }];
}

async function ask() {
  const [path, body] = askRequest();
  if (!(body.query || body.text)) return;
  $("ask-curl").textContent = curlLine(path, JSON.parse(JSON.stringify(body)));
  $("ask-summary").textContent = "asking…";
  const started = performance.now();
  const answer = await api(path, body);
  const ms = Math.round(performance.now() - started);
  const words = (body.query || body.text).toLowerCase().split(/[^a-z0-9_]+/).filter((w) => w.length > 2).slice(0, 20);
  const stamp = answer.index ? `version ${answer.index.version}${answer.index.changed_since ? `, ${answer.index.changed_since} file(s) changed since` : ""}` : "";
  const results = $("ask-results");
  if (path === "/v1/locate") {
    $("ask-summary").textContent = `${answer.files.length} files in ${ms} ms · ${stamp}`;
    results.replaceChildren(...answer.files.map((f, i) => el("div", { class: "result" },
      el("div", { class: "head", onclick: (e) => e.currentTarget.parentNode.classList.toggle("open") },
        el("b", {}, `${i + 1}. ${f.path}`), " ", el("span", { class: "muted small" }, `score ${fmt(f.score)}`),
        " ", el("a", { href: `#graph?target=${encodeURIComponent(f.path)}`, class: "small" }, "graph →")),
      el("div", { class: "body" },
        el("p", { class: "why" }, "why: ", Array.isArray(f.why) ? f.why.join("; ") : JSON.stringify(f.why)),
        (f.definitions || []).map((d) => el("div", { class: "def" },
          el("a", { href: `#graph?target=${encodeURIComponent(d.symbol || f.path)}` }, d.symbol || "(file)"),
          " ", el("span", { class: "muted small" }, `${f.path}:${d.start_line}-${d.end_line}`),
          d.signature ? el("code", { class: "sig" }, d.signature) : ""))))));
  } else {
    const hits = path === "/v1/context" ? answer.blocks : answer.results;
    $("ask-summary").textContent = path === "/v1/context"
      ? `${hits.length} blocks, ${fmt(answer.tokens_used)} of ${fmt(answer.budget)} tokens (${Math.round(answer.utilization * 100)}%) in ${ms} ms · ${answer.assembly} · ${stamp}`
      : `${hits.length} results in ${ms} ms · route ${answer.route || body.mode || "routed"} · ${stamp}`;
    results.replaceChildren(...hits.map((h, i) => el("div", { class: "result open" },
      el("div", { class: "head", onclick: (e) => e.currentTarget.parentNode.classList.toggle("open") },
        el("b", {}, `${i + 1}. ${h.path}:${h.start_line}-${h.end_line}`), " ",
        h.symbol ? el("code", {}, h.symbol) : "", " ",
        el("span", { class: "muted small" }, h.tokens !== undefined ? `${h.tokens} tokens` : `score ${fmt(h.score)}`),
        h.skeleton ? el("span", { class: "tag" }, "skeleton") : "", " ",
        h.symbol ? el("a", { href: `#graph?target=${encodeURIComponent(h.symbol)}`, class: "small" }, "graph →") : ""),
      el("div", { class: "body" }, codeBlock(h, words)))));
  }
}

// ---- graph: a radial node-link picture, expanded by clicks --------------------------------

const RELATIONS = {
  callers: { colour: "#c2410c", label: "callers" },
  callees: { colour: "#1d4ed8", label: "callees" },
  references: { colour: "#7c3aed", label: "references" },
  imports: { colour: "#047857", label: "imports" },
  imported_by: { colour: "#b45309", label: "imported by" },
  tests: { colour: "#be123c", label: "tests" },
};
let graph = { nodes: new Map(), edges: [], added: 0 };

const isFile = (t) => /\.[A-Za-z0-9]+$/.test(t) && t.includes("/") || /\.(py|rs|js|ts|go|java|md|c|h|cpp|rb)$/.test(t);

// A lookup that may find nothing (an unknown name): empty, but a missing token still signs in.
const orEmpty = (empty) => (e) => {
  if (e instanceof SignInNeeded) throw e;
  return empty;
};

async function neighbours(target) {
  const out = [];
  const add = (id, rel, from, place) => out.push({ id, rel, from, place });
  if (isFile(target)) {
    const [imports, importers] = await Promise.all([
      api("/v1/graph/imports", { path: target }).catch(orEmpty({ files: [] })),
      api("/v1/graph/imported_by", { path: target }).catch(orEmpty({ files: [] })),
    ]);
    imports.files.forEach((f) => add(f.path, "imports", target, f));
    importers.files.forEach((f) => add(f.path, f.test ? "tests" : "imported_by", f.path, f));
  } else {
    const [callers, callees, refs] = await Promise.all([
      api("/v1/graph/callers", { symbol: target, limit: 12 }).catch(orEmpty({ uses: [] })),
      api("/v1/graph/callees", { symbol: target, limit: 12 }).catch(orEmpty({ uses: [] })),
      api("/v1/graph/find_references", { symbol: target, limit: 12 }).catch(orEmpty({ uses: [] })),
    ]);
    callers.uses.forEach((u) => add(u.in_symbol || u.path, u.test ? "tests" : "callers", u.in_symbol || u.path, u));
    callees.uses.forEach((u) => (u.targets || []).forEach((t) => add(t.symbol || t.path, "callees", target, t)));
    refs.uses.filter((u) => u.kind !== "calls").forEach((u) =>
      add(u.in_symbol || u.path, u.test ? "tests" : "references", u.in_symbol || u.path, u));
  }
  return out;
}

// Layered: a node's callers, referencers, importers and tests to its left, its callees and
// imports to its right; an expanded node's new neighbours go one column further out.
async function showGraph(target, expand) {
  if (!target) return;
  if (!expand) graph = { nodes: new Map(), edges: [], added: 0 };
  const centre = graph.nodes.get(target) || { id: target, col: 0, order: graph.added++ };
  graph.nodes.set(target, { ...centre, expanded: true });
  const found = await neighbours(target);
  for (const n of found) {
    const outgoing = n.from === target;
    if (!graph.nodes.has(n.id)) {
      graph.nodes.set(n.id, { id: n.id, rel: n.rel, place: n.place, col: centre.col + (outgoing ? 1 : -1), order: graph.added++ });
    }
    const [a, b] = outgoing ? [target, n.id] : [n.id, target];
    if (a !== b && !graph.edges.some((e) => e.a === a && e.b === b)) graph.edges.push({ a, b, rel: n.rel });
  }
  drawGraph(target);
  $("graph-info").replaceChildren(found.length
    ? table(["relation", "name", "place"], found.map((n) => [RELATIONS[n.rel].label, n.id,
        n.place ? `${n.place.path || ""}:${n.place.line || n.place.start_line || (n.place.lines || [])[0] || ""}` : ""]))
    : el("p", { class: "muted" }, `nothing links to or from ${target} in the index`));
}

const ROW = 46;

function layout() {
  const columns = new Map();
  for (const n of [...graph.nodes.values()].sort((a, b) => a.order - b.order)) {
    if (!columns.has(n.col)) columns.set(n.col, []);
    columns.get(n.col).push(n);
  }
  const cols = [...columns.keys()];
  const [lo, hi] = [Math.min(...cols), Math.max(...cols)];
  const W = 960, H = Math.max(300, 60 + ROW * Math.max(...[...columns.values()].map((c) => c.length)));
  const step = hi > lo ? Math.min(250, (W - 240) / (hi - lo)) : 0;
  const pos = new Map();
  for (const [col, nodes] of columns) {
    const x = W / 2 - 60 + (col - (lo + hi) / 2) * step;
    nodes.forEach((n, i) => pos.set(n.id, [x, H / 2 + (i - (nodes.length - 1) / 2) * ROW]));
  }
  return { pos, H };
}

function drawGraph(focus) {
  const svg = $("graph-svg");
  const { pos, H } = layout();
  svg.setAttribute("height", H);
  svg.setAttribute("viewBox", `0 0 960 ${H}`);
  const short = (s) => (s.length > 30 ? "…" + s.slice(-29) : s);
  svg.replaceChildren(
    svgEl("defs", {}, svgEl("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 16, refY: 5,
      markerWidth: 6, markerHeight: 6, orient: "auto-start-reverse" }, svgEl("path", { d: "M 0 0 L 10 5 L 0 10 z", fill: "#6b7280" }))),
    ...graph.edges.map((e) => {
      const [x1, y1] = pos.get(e.a), [x2, y2] = pos.get(e.b);
      const mx = (x1 + x2) / 2;
      return svgEl("path", { d: `M ${x1} ${y1} C ${mx} ${y1}, ${mx} ${y2}, ${x2} ${y2}`, fill: "none",
        stroke: RELATIONS[e.rel].colour, "stroke-width": 1.5, "stroke-opacity": 0.8, "marker-end": "url(#arrow)" });
    }),
    ...[...graph.nodes.values()].map((n) => {
      const [x, y] = pos.get(n.id);
      const colour = n.col === 0 && !n.rel ? "#111827" : RELATIONS[n.rel].colour;
      return svgEl("g", { class: "node" + (n.id === focus ? " focus" : ""), "data-id": n.id, transform: `translate(${x},${y})`,
        onclick: () => showGraph(n.id, true).catch(showError) },
        svgEl("title", {}, n.id + (n.expanded ? "" : " (click to expand)")),
        svgEl("circle", { r: n.expanded ? 9 : 6, fill: n.expanded ? colour : "#fff", stroke: colour, "stroke-width": 2 }),
        svgEl("text", { x: 0, y: -13, "text-anchor": "middle" }, short(n.id)));
    }));
  $("graph-legend").replaceChildren(...Object.values(RELATIONS).map((r) => {
    const swatch = el("span", { class: "swatch" });
    swatch.style.background = r.colour;
    return el("span", {}, swatch, r.label);
  }));
}

async function showImpact() {
  const text = $("impact-diff").value;
  const body = /^(diff --git|--- |\+\+\+ |@@ )/m.test(text)
    ? { diff: text, limit: 12 }
    : { paths: text.split("\n").map((s) => s.trim()).filter(Boolean), limit: 12 };
  const a = await api("/v1/graph/impact", body);
  const columns = [
    ["changed", a.changed.map((p) => p.symbol || p.path), "#111827"],
    ["affected", a.affected.map((p) => p.symbol || p.path), RELATIONS.callers.colour],
    ["tests", a.tests.map((p) => p.symbol || p.path), RELATIONS.tests.colour],
    ["co-changed", (a.cochanged || []).map((c) => c.path), RELATIONS.imported_by.colour],
  ];
  const rows = Math.max(1, ...columns.map((c) => c[1].length));
  const svg = $("impact-svg");
  const H = 40 + rows * 22;
  svg.setAttribute("height", H);
  svg.setAttribute("viewBox", `0 0 960 ${H}`);
  const items = [];
  columns.forEach(([title, names, colour], ci) => {
    const x = 20 + ci * 240;
    items.push(svgEl("text", { x, y: 18, class: "colhead" }, title));
    names.forEach((n, i) => {
      const y = 40 + i * 22;
      if (ci > 0 && ci < 3) items.push(svgEl("line", { x1: x - 110, y1: 36, x2: x - 4, y2: y - 4, stroke: colour, "stroke-opacity": 0.35 }));
      items.push(svgEl("g", { class: "node", "data-id": n, onclick: () => { $("graph-target").value = n; showGraph(n).catch(showError); } },
        svgEl("circle", { cx: x, cy: y - 4, r: 5, fill: colour }),
        svgEl("text", { x: x + 10, y }, n.length > 30 ? "…" + n.slice(-29) : n)));
    });
  });
  svg.replaceChildren(...items);
  $("impact-info").textContent = (a.unknown_paths || []).length ? `not in the index: ${a.unknown_paths.join(", ")}` : "";
}

async function showSessions() {
  const { sessions } = await api("/v1/sessions");
  $("sessions-list").replaceChildren(sessions.length ? "" : el("p", { class: "muted" },
    "no live session: answers given with a \"session\" (context, MCP) appear here"),
  ...sessions.map((s) => el("div", { class: "session" },
    el("h2", {}, s.session, " ", el("span", { class: "muted small" },
      `${fmt(s.tokens)} tokens sent · ${fmt(s.tokens_saved)} saved by citing · ${fmt(s.repeats_avoided)} repeats avoided · idle ${s.idle_seconds} s`)),
    table(["tool", "calls", "tokens"], Object.entries(s.tools).map(([t, u]) => [t, fmt(u.calls), fmt(u.tokens)])),
    s.answers.slice().reverse().map((a) => el("div", { class: "answer" },
      el("div", {}, el("b", {}, a.tool), " ", el("q", {}, a.query), " ",
        el("span", { class: "muted small" }, `${fmt(a.tokens)} tokens, ${fmt(a.tokens_saved)} saved`)),
      el("div", { class: "small" },
        a.whole.map((c) => el("span", { class: "chip whole" }, c)),
        a.skeletons.map((c) => el("span", { class: "chip skeleton" }, c + " (skeleton)")),
        a.cited.map((c) => el("span", { class: "chip cited" }, c + " (cited again)"))))))));
}

// ---- routing and sign-in -----------------------------------------------------------------

function route() {
  const [page, query] = (location.hash.slice(1) || "status").split("?");
  const params = new URLSearchParams(query || "");
  return { page: ["status", "ask", "graph", "sessions"].includes(page) ? page : "status", params };
}

async function render() {
  clearInterval(pollTimer);
  showError(null);
  const { page, params } = route();
  $("signin").hidden = true;
  for (const p of document.querySelectorAll(".page")) p.hidden = p.id !== "page-" + page;
  for (const a of document.querySelectorAll("nav a")) a.classList.toggle("active", a.dataset.page === page);
  $("signout").hidden = !sessionStorage.getItem(TOKEN_KEY);
  try {
    if (page === "status") {
      await showStatus();
      pollTimer = setInterval(() => showStatus().catch(showError), POLL_MS);
    } else if (page === "ask") {
      if (params.has("as_of")) $("ask-asof").value = params.get("as_of");
    } else if (page === "graph") {
      if (params.has("target")) {
        $("graph-target").value = params.get("target");
        await showGraph(params.get("target"));
      }
    } else if (page === "sessions") {
      await showSessions();
    }
  } catch (e) {
    showError(e);
  }
}

function signIn() {
  clearInterval(pollTimer);
  for (const p of document.querySelectorAll(".page")) p.hidden = true;
  $("signin").hidden = false;
  $("signin-error").textContent = sessionStorage.getItem(TOKEN_KEY) ? "that token was not accepted" : "";
  $("token").focus();
}

document.addEventListener("DOMContentLoaded", () => {
  $("signin-form").addEventListener("submit", (e) => {
    e.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, $("token").value.trim());
    $("token").value = "";
    render();
  });
  $("signout").addEventListener("click", () => {
    sessionStorage.removeItem(TOKEN_KEY);
    signIn();
  });
  $("ask-form").addEventListener("submit", (e) => {
    e.preventDefault();
    ask().catch(showError);
  });
  $("graph-form").addEventListener("submit", (e) => {
    e.preventDefault();
    showGraph($("graph-target").value.trim()).catch(showError);
  });
  $("impact-form").addEventListener("submit", (e) => {
    e.preventDefault();
    showImpact().catch(showError);
  });
  window.addEventListener("hashchange", render);
  render();
});
