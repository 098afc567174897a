// reflexrag's page: a small client of the LangGraph Server API this service speaks.
// It creates a thread, streams a run over SSE (updates, custom, messages, values), draws the
// strategy's graph from /assistants/{id}/graph and marks the running node, and resumes a run
// paused by interrupt() with the user's reply. Plain JS: no build step, no CDN.
"use strict";

const $ = (id) => document.getElementById(id);
const SVG = "http://www.w3.org/2000/svg";
const STREAM_MODES = ["updates", "custom", "messages-tuple", "values"];

const page = {
  assistants: [],
  graph: null, // {nodes: Map(id -> {el, count}), edges: Map("a->b" -> el)}
  threadId: null,
  graphId: null,
  lastNode: null,
  lastRow: null,
  started: 0,
  running: false,
  pendingNotes: [], // custom events arrive while their node runs, before its update
};

// ------------------------------------------------------------------ HTTP

function headers(json = true) {
  const result = json ? { "Content-Type": "application/json" } : {};
  const key = $("api-key").value.trim();
  if (key) result["x-api-key"] = key;
  return result;
}

async function describeFailure(response) {
  let detail = "";
  try {
    const body = await response.json();
    detail = typeof body.detail === "string" ? body.detail : JSON.stringify(body.detail ?? body);
  } catch {
    detail = response.statusText;
  }
  return `${response.status}: ${detail}`;
}

async function api(path, options = {}) {
  let response;
  try {
    response = await fetch(path, { ...options, headers: headers(options.body !== undefined) });
  } catch (error) {
    throw new Error(`cannot reach the server (${error.message})`);
  }
  if (!response.ok) throw new Error(await describeFailure(response));
  return response.status === 204 ? null : response.json();
}

function showError(message) {
  const banner = $("banner");
  banner.textContent = message;
  banner.hidden = !message;
}

// ------------------------------------------------------------------ graph

function layers(nodes, edges) {
  // Longest-path layering over the graph without its back edges (found by DFS), so loops
  // such as transform_query -> retrieve are drawn as curves going back up.
  const out = new Map(nodes.map((n) => [n, []]));
  const indegree = new Map(nodes.map((n) => [n, 0]));
  edges.forEach((e) => {
    out.get(e.source)?.push(e.target);
    indegree.set(e.target, (indegree.get(e.target) || 0) + 1);
  });
  // Follow nodes in the order the graph declared them, joins (many incoming edges) last:
  // retrieve before generate, so the retrieval loop reads top to bottom.
  const rank = new Map(nodes.map((n, i) => [n, i]));
  out.forEach((targets) =>
    targets.sort((a, b) => indegree.get(a) - indegree.get(b) || rank.get(a) - rank.get(b)),
  );
  const back = new Set();
  const state = new Map();
  const order = [];
  const visit = (node) => {
    state.set(node, "open");
    for (const next of out.get(node) || []) {
      if (state.get(next) === "open") back.add(`${node}->${next}`);
      else if (!state.has(next)) visit(next);
    }
    state.set(node, "done");
    order.push(node);
  };
  if (out.has("__start__")) visit("__start__");
  nodes.forEach((n) => state.has(n) || visit(n));
  const layer = new Map(nodes.map((n) => [n, 0]));
  for (const node of order.reverse()) {
    for (const next of out.get(node) || []) {
      if (!back.has(`${node}->${next}`)) layer.set(next, Math.max(layer.get(next), layer.get(node) + 1));
    }
  }
  const deepest = Math.max(...layer.values());
  if (layer.has("__end__")) layer.set("__end__", deepest + (layer.get("__end__") === deepest ? 0 : 1));
  return { layer, back, order };
}

function svg(tag, attributes = {}, parent = null) {
  const el = document.createElementNS(SVG, tag);
  Object.entries(attributes).forEach(([k, v]) => el.setAttribute(k, v));
  if (parent) parent.appendChild(el);
  return el;
}

function drawGraph(spec) {
  const ids = spec.nodes.map((n) => n.id);
  const edges = spec.edges.map((e) => ({ source: e.source, target: e.target, conditional: !!e.conditional }));
  const { layer, back, order } = layers(ids, edges);
  const rows = [];
  order.forEach((id) => (rows[layer.get(id)] ||= []).push(id));
  const W = 150, H = 30, GAP_X = 24, GAP_Y = 44, PAD = 20, SIDE = 60;
  const widest = Math.max(...rows.map((r) => r.length));
  // Loops run up the right margin, edges that skip a layer down the left one, so no edge is
  // drawn across a node it does not visit.
  const width = widest * (W + GAP_X) + PAD * 2 + 2 * SIDE;
  const height = rows.length * (H + GAP_Y) + PAD * 2;
  const position = new Map();
  rows.forEach((row, y) => {
    const rowWidth = row.length * (W + GAP_X) - GAP_X;
    row.forEach((id, x) => {
      position.set(id, { x: (width - rowWidth) / 2 + x * (W + GAP_X), y: PAD + y * (H + GAP_Y) });
    });
  });
  const root = svg("svg", { width, height, viewBox: `0 0 ${width} ${height}`, role: "img" });
  const defs = svg("defs", {}, root);
  for (const [name, color] of [["arrow", "#b6bec9"], ["arrow-taken", "#2563eb"]]) {
    const marker = svg("marker", { id: name, viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" }, defs);
    svg("path", { d: "M 0 0 L 10 5 L 0 10 z", fill: color }, marker);
  }
  const edgeEls = new Map();
  edges.forEach((e, n) => {
    const a = position.get(e.source), b = position.get(e.target);
    if (!a || !b) return;
    let d;
    if (back.has(`${e.source}->${e.target}`)) {
      const bend = width - 20 - (n % 3) * 10; // back edges run up the right-hand side
      d = `M ${a.x + W} ${a.y + H / 2} C ${bend} ${a.y + H / 2}, ${bend} ${b.y + H / 2}, ${b.x + W} ${b.y + H / 2}`;
    } else if (layer.get(e.target) - layer.get(e.source) > 1) {
      // An edge that skips a layer leaves downwards, runs along the gap under its row to the
      // left margin, down the margin, and along the gap above its target: never over a node.
      const lane = (n % 4) * 5, bend = 16 + lane;
      const x1 = a.x + W / 2, below = a.y + H + GAP_Y / 2 - lane, x2 = b.x + W / 2, above = b.y - GAP_Y / 2 + lane;
      d = `M ${x1} ${a.y + H} L ${x1} ${below} L ${bend} ${below} L ${bend} ${above} L ${x2} ${above} L ${x2} ${b.y}`;
    } else {
      const x1 = a.x + W / 2, y1 = a.y + H, x2 = b.x + W / 2, y2 = b.y;
      d = `M ${x1} ${y1} C ${x1} ${y1 + GAP_Y / 2}, ${x2} ${y2 - GAP_Y / 2}, ${x2} ${y2}`;
    }
    const path = svg("path", { d, class: `edge${e.conditional ? " conditional" : ""}`, "data-edge": `${e.source}->${e.target}` }, root);
    edgeEls.set(`${e.source}->${e.target}`, path);
  });
  const nodeEls = new Map();
  ids.forEach((id) => {
    const p = position.get(id);
    const terminal = id === "__start__" || id === "__end__";
    const group = svg("g", { class: `node${terminal ? " terminal" : ""}`, "data-node": id, transform: `translate(${p.x},${p.y})` }, root);
    svg("rect", { width: W, height: H }, group);
    const label = svg("text", { x: W / 2, y: H / 2 }, group);
    label.textContent = terminal ? id.replaceAll("_", "") : id;
    const badge = svg("g", { class: "badge-group", visibility: "hidden" }, group);
    svg("circle", { class: "badge", cx: W, cy: 0, r: 10 }, badge);
    const count = svg("text", { class: "count", x: W, y: 1, "text-anchor": "middle", "dominant-baseline": "middle" }, badge);
    nodeEls.set(id, { el: group, badge, count, visits: 0 });
  });
  const container = $("graph");
  container.replaceChildren(root);
  page.graph = { nodes: nodeEls, edges: edgeEls };
}

function resetGraphMarks() {
  if (!page.graph) return;
  page.graph.nodes.forEach((node) => {
    node.visits = 0;
    node.el.classList.remove("active", "visited");
    node.badge.setAttribute("visibility", "hidden");
  });
  page.graph.edges.forEach((edge) => edge.classList.remove("taken"));
}

function markVisit(nodeId) {
  const graph = page.graph;
  if (!graph || !graph.nodes.has(nodeId)) return;
  const from = page.lastNode || "__start__";
  graph.edges.get(`${from}->${nodeId}`)?.classList.add("taken");
  graph.nodes.forEach((node) => node.el.classList.remove("active"));
  const node = graph.nodes.get(nodeId);
  node.visits += 1;
  node.el.classList.add("visited", "active");
  node.el.setAttribute("data-visits", String(node.visits));
  node.count.textContent = String(node.visits);
  node.badge.setAttribute("visibility", node.visits > 1 ? "visible" : "hidden");
  page.lastNode = nodeId;
}

function markEnd() {
  const graph = page.graph;
  if (!graph || !page.lastNode) return;
  graph.edges.get(`${page.lastNode}->__end__`)?.classList.add("taken");
  graph.nodes.forEach((node) => node.el.classList.remove("active"));
}

async function loadGraph(graphId) {
  const assistant = page.assistants.find((a) => a.graph_id === graphId);
  if (!assistant) return;
  $("strategy-description").textContent = assistant.description || "";
  drawGraph(await api(`/assistants/${assistant.assistant_id}/graph`));
}

// ------------------------------------------------------------------ steps

function summaryOf(update) {
  const steps = update && Array.isArray(update.steps) ? update.steps : [];
  return steps.length ? steps[steps.length - 1].summary : "";
}

function addStepRow(node, update, inner) {
  if (page.lastRow && !page.lastRow.classList.contains("inner") === !inner) {
    page.lastRow.querySelector(".next").textContent = ` → ${node}`;
  }
  const li = document.createElement("li");
  li.className = `step${inner ? " inner" : ""}`;
  li.dataset.node = node;
  const details = document.createElement("details");
  const summary = document.createElement("summary");
  const name = document.createElement("span");
  name.className = "node-name";
  name.textContent = node;
  const text = document.createElement("span");
  const said = summaryOf(update);
  text.textContent = said ? `: ${said}` : "";
  const next = document.createElement("span");
  next.className = "next";
  summary.append(name, text, next);
  const raw = document.createElement("pre");
  raw.textContent = JSON.stringify(update, null, 2);
  details.append(summary, raw);
  li.append(details, ...page.pendingNotes);
  page.pendingNotes = [];
  $("steps").append(li);
  li.scrollIntoView({ block: "nearest" });
  page.lastRow = li;
}

function addNote(text, className = "custom") {
  const note = document.createElement("div");
  note.className = className;
  note.textContent = text;
  if (className === "custom") page.pendingNotes.push(note);
  else $("steps").append(Object.assign(document.createElement("li"), { className, textContent: text }));
}

function describeCustom(data) {
  if (!data || typeof data !== "object") return String(data);
  const parts = Object.entries(data)
    .filter(([k]) => k !== "node")
    .map(([k, v]) => `${k}=${typeof v === "object" ? JSON.stringify(v) : v}`);
  return `${data.node ? data.node + " · " : ""}${parts.join(", ")}`;
}

// ------------------------------------------------------------------ answer

function setStatus(text, running = false) {
  const el = $("run-status");
  el.textContent = text;
  el.classList.toggle("running", running);
}

function appendToken(text) {
  const answer = $("answer");
  let tokens = answer.querySelector(".tokens");
  if (!tokens) {
    answer.replaceChildren();
    tokens = document.createElement("span");
    tokens.className = "tokens";
    answer.append(tokens);
  }
  tokens.textContent += text;
}

function fact(list, label, value) {
  if (value === undefined || value === null || value === "") return;
  const dt = document.createElement("dt");
  dt.textContent = label;
  const dd = document.createElement("dd");
  dd.textContent = value;
  list.append(dt, dd);
}

function showFinal(values, elapsedSeconds) {
  const answer = $("answer");
  answer.textContent = values.generation || "";
  if (values.quote) {
    // The short answer first, then the sentence of the source that says it.
    const quote = document.createElement("blockquote");
    quote.className = "quote";
    quote.textContent = values.quote;
    answer.append(quote);
  }
  answer.classList.toggle("not-found", values.answer_kind === "not_found");
  const sources = $("sources");
  sources.replaceChildren();
  mergeSources(values.sources || []).forEach((source) => {
    const li = document.createElement("li");
    const origin = document.createElement("span");
    origin.className = `origin ${source.origin}`;
    origin.textContent = source.origin;
    const chunks = source.chunks > 1 ? ` · ${source.chunks} passages` : "";
    li.append(origin, `${source.title || source.doc_id} (${source.doc_id}) · score ${Number(source.score).toFixed(2)}${chunks}`);
    sources.append(li);
  });
  const facts = $("facts");
  facts.replaceChildren();
  const usage = values.usage || {};
  const llmCalls = Object.entries(usage).filter(([k]) => k.startsWith("llm.")).reduce((n, [, v]) => n + v, 0);
  fact(facts, "stop reason", values.stop_reason);
  fact(facts, "confidence", values.confidence == null ? null : Number(values.confidence).toFixed(2));
  fact(facts, "route", values.complexity && values.complexity.level);
  fact(facts, "rounds", values.rounds && values.rounds.length ? values.rounds.length : null);
  fact(facts, "query rewrites", values.query_rewrites ?? 0);
  const drafts = values.rounds && values.rounds.length;
  // Iterative retrieval drafts once per round; elsewhere every generation after the first
  // is a regeneration.
  if (drafts) fact(facts, "drafts", values.generation_attempts || 0);
  else fact(facts, "regenerations", Math.max(0, (values.generation_attempts || 0) - 1));
  fact(facts, "web searches", values.web_searches ?? 0);
  fact(facts, "CRAG action", values.crag_action);
  fact(facts, "skip rate", values.skip_rate);
  fact(facts, "LLM calls", llmCalls);
  fact(facts, "elapsed", elapsedSeconds !== null ? `${elapsedSeconds.toFixed(2)} s` : null);
}

function mergeSources(sources) {
  // Several passages of one document are one source: listed once, with its best score.
  const byDoc = new Map();
  for (const source of sources) {
    const key = `${source.origin}:${source.doc_id}`;
    const seen = byDoc.get(key);
    if (!seen) byDoc.set(key, { ...source, chunks: 1 });
    else {
      seen.chunks += 1;
      seen.score = Math.max(Number(seen.score), Number(source.score));
    }
  }
  return [...byDoc.values()];
}

function showClarification(question) {
  $("clarify-question").textContent = question;
  $("clarify-form").hidden = false;
  $("clarify-reply").value = "";
  $("clarify-reply").focus();
  setStatus("waiting for your reply");
}

// ------------------------------------------------------------------ runs

async function* sse(response) {
  // Server-sent events from a fetch() body: EventSource cannot POST.
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  while (true) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const frame = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      let event = "message";
      const data = [];
      frame.split("\n").forEach((line) => {
        if (line.startsWith("event:")) event = line.slice(6).trim();
        else if (line.startsWith("data:")) data.push(line.slice(5).trim());
      });
      let parsed = null;
      try {
        parsed = data.length ? JSON.parse(data.join("\n")) : null;
      } catch {
        parsed = data.join("\n");
      }
      yield { event, data: parsed };
    }
  }
}

function handleEvent(event, data, run) {
  const [mode, ...namespace] = event.split("|");
  const inner = namespace.length > 0;
  if (mode === "metadata") {
    run.runId = data && data.run_id;
  } else if (mode === "updates" && data && typeof data === "object") {
    for (const [node, update] of Object.entries(data)) {
      if (node === "__interrupt__") {
        const payload = Array.isArray(update) && update[0] ? update[0].value : update;
        run.interrupt = payload && typeof payload === "object" ? payload.question : String(payload);
        continue;
      }
      // A subgraph's summary of updates repeats what its inner events already showed.
      if (!inner && run.subgraphsSeen.has(node)) continue;
      if (inner) {
        const parent = namespace[0].split(":")[0];
        run.subgraphsSeen.add(parent);
        if (page.lastNode !== parent) markVisit(parent);
      } else {
        markVisit(node);
      }
      addStepRow(node, update, inner);
    }
  } else if (mode === "custom") {
    addNote(describeCustom(data));
  } else if (mode === "messages") {
    const chunk = Array.isArray(data) ? data[0] : data;
    if (chunk && typeof chunk.content === "string" && chunk.content) appendToken(chunk.content);
  } else if (mode === "values" && !inner) {
    run.values = data;
  } else if (mode === "error") {
    run.error = data && data.message ? `${data.error}: ${data.message}` : JSON.stringify(data);
    addNote(`error: ${run.error}`, "error");
  }
}

async function streamRun(body) {
  const run = { values: null, interrupt: null, error: null, ended: false, subgraphsSeen: new Set() };
  setStatus("running", true);
  page.running = true;
  $("ask").disabled = true;
  try {
    let response;
    try {
      response = await fetch(`/threads/${page.threadId}/runs/stream`, {
        method: "POST",
        headers: headers(),
        body: JSON.stringify({
          assistant_id: page.graphId,
          stream_mode: STREAM_MODES,
          stream_subgraphs: true,
          on_disconnect: "cancel",
          ...body,
        }),
      });
    } catch (error) {
      throw new Error(`cannot reach the server (${error.message})`);
    }
    if (!response.ok) throw new Error(await describeFailure(response));
    try {
      for await (const { event, data } of sse(response)) handleEvent(event, data, run);
      run.ended = true; // as on LangGraph Server, the stream closes when the run ends
    } catch (error) {
      addNote(`the stream broke: ${error.message}`, "error");
    }
    if (!run.ended && !run.error) {
      showError("The stream ended before the run did; showing the thread's last saved state.");
    }
    await settle(run);
  } finally {
    page.running = false;
    $("ask").disabled = false;
    refreshThreads().catch(() => {});
  }
}

async function settle(run) {
  // The thread's saved state is the truth, whether or not the stream reached its end.
  let thread = null;
  try {
    thread = await api(`/threads/${page.threadId}`);
  } catch (error) {
    showError(error.message);
  }
  const values = (thread && thread.values) || run.values || {};
  const pending = thread ? Object.values(thread.interrupts || {}).flat() : [];
  const asked = run.interrupt || (pending[0] && pending[0].value && pending[0].value.question);
  const elapsed = (performance.now() - page.started) / 1000;
  markEnd();
  if (run.error) {
    setStatus("error");
    showError(`The run failed: ${run.error}`);
  } else if (asked) {
    showClarification(asked);
    return;
  } else {
    // An idle thread after a run means the run is done.
    setStatus(!thread || thread.status === "idle" ? "done" : thread.status);
  }
  showFinal(values, elapsed);
}

async function ask(question) {
  showError("");
  $("clarify-form").hidden = true;
  $("steps").replaceChildren();
  $("answer").replaceChildren();
  $("sources").replaceChildren();
  $("facts").replaceChildren();
  page.graphId = $("strategy").value;
  page.lastNode = null;
  page.lastRow = null;
  page.pendingNotes = [];
  resetGraphMarks();
  page.started = performance.now();
  const thread = await api("/threads", {
    method: "POST",
    body: JSON.stringify({ metadata: { graph_id: page.graphId, question, kb: $("kb").value } }),
  });
  page.threadId = thread.thread_id;
  const context = $("kb").value ? { kb: $("kb").value } : {};
  await streamRun({ input: { question }, context });
}

async function reply(text) {
  $("clarify-form").hidden = true;
  addNote(`you replied: ${text}`);
  const context = $("kb").value ? { kb: $("kb").value } : {};
  await streamRun({ command: { resume: text }, context });
}

// ------------------------------------------------------------------ threads

async function refreshThreads() {
  const threads = await api("/threads/search", { method: "POST", body: JSON.stringify({ limit: 20 }) });
  const list = $("threads");
  list.replaceChildren();
  threads
    .filter((t) => t.metadata && t.metadata.graph_id)
    .sort((a, b) => String(b.updated_at).localeCompare(String(a.updated_at)))
    .forEach((thread) => {
      const li = document.createElement("li");
      const open = document.createElement("button");
      open.type = "button";
      open.textContent = thread.metadata.question || (thread.values && thread.values.original_question) || thread.thread_id;
      open.addEventListener("click", () => reopen(thread.thread_id).catch((e) => showError(e.message)));
      const meta = document.createElement("div");
      meta.className = "meta";
      meta.textContent = `${thread.metadata.graph_id} · ${thread.status} · ${thread.updated_at}`;
      li.append(open, meta);
      list.append(li);
    });
}

async function reopen(threadId) {
  showError("");
  const thread = await api(`/threads/${threadId}`);
  const history = await api(`/threads/${threadId}/history?limit=100`);
  page.threadId = threadId;
  page.graphId = thread.metadata.graph_id;
  $("strategy").value = page.graphId;
  await loadGraph(page.graphId);
  page.lastNode = null;
  page.lastRow = null;
  $("steps").replaceChildren();
  $("clarify-form").hidden = true;
  const values = thread.values || {};
  (values.steps || []).forEach((entry) => {
    markVisit(entry.node);
    addStepRow(entry.node, { steps: [entry] }, false);
  });
  markEnd();
  addNote(`${history.length} checkpoints in this thread's history`);
  const pending = Object.values(thread.interrupts || {}).flat();
  if (pending.length && pending[0].value) showClarification(pending[0].value.question);
  setStatus(thread.status);
  showFinal(values, null);
}

// ------------------------------------------------------------------ start

async function start() {
  $("api-key").value = localStorage.getItem("reflexrag-api-key") || "";
  $("api-key").addEventListener("change", () => {
    localStorage.setItem("reflexrag-api-key", $("api-key").value.trim());
    start().catch((e) => showError(e.message));
  });
  page.assistants = await api("/assistants/search", { method: "POST", body: JSON.stringify({ limit: 100 }) });
  $("strategy").replaceChildren(
    ...page.assistants.map((a) => new Option(a.graph_id, a.graph_id, false, a.graph_id === "self_rag")),
  );
  const [names, info] = await Promise.all([api("/kb"), api("/info")]);
  $("kb").replaceChildren(
    ...names.map((name) => new Option(name, name, false, name === info.default_kb)),
  );
  await loadGraph($("strategy").value);
  showError("");
  await refreshThreads();
}

$("strategy").addEventListener("change", () => loadGraph($("strategy").value).catch((e) => showError(e.message)));
$("ask-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const question = $("question").value.trim();
  if (!question || page.running) return;
  ask(question).catch((e) => {
    setStatus("");
    showError(e.message);
  });
});
$("clarify-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const text = $("clarify-reply").value.trim();
  if (text) reply(text).catch((e) => showError(e.message));
});
$("refresh-threads").addEventListener("click", () => refreshThreads().catch((e) => showError(e.message)));
start().catch((e) => showError(e.message));
