// MCFL explorer page: draws the model DAG from /api/dag and follows /api/version.
// Everything shown comes from the chain (events and views) through the local server.
"use strict";

const POLL_MS = 1500;
const COLORS = { root: "#adb5bd", inner: "#6ea8fe", frontier: "#51cf66", dead: "#f1aeb5" };

cytoscape.use(cytoscapeDagre);

const state = { version: -1, doc: null, selected: null, modelKey: "" };
const cy = cytoscape({
  container: document.getElementById("graph"),
  wheelSensitivity: 0.3,
  style: [
    { selector: "node.model", style: {
      "shape": "round-rectangle", "background-color": (n) => COLORS[n.data("state")],
      "label": "data(label)", "text-valign": "center", "text-halign": "center",
      "text-wrap": "wrap", "font-family": "monospace", "font-size": 11,
      "width": (n) => 62 + 14 * Math.sqrt(n.data("popularity")),
      "height": (n) => 30 + 8 * Math.sqrt(n.data("popularity")),
      "border-width": 1, "border-color": "#495057" } },
    { selector: "node.model[state = 'dead']", style: {
      "border-style": "dashed", "opacity": 0.75 } },
    { selector: "node.model.merge", style: {
      "border-width": 3, "border-style": "double", "border-color": "#8e44ad" } },
    { selector: "node.model:selected", style: { "border-width": 4, "border-color": "#d63384" } },
    { selector: "node.round-label", style: {
      "label": "data(label)", "background-opacity": 0, "font-size": 13, "font-weight": "bold",
      "color": "#495057", "events": "no", "width": 1, "height": 1 } },
    { selector: "edge", style: {
      "curve-style": "bezier", "target-arrow-shape": "triangle", "line-color": "#868e96",
      "target-arrow-color": "#868e96", "width": (e) => 1 + Math.min(e.data("popularity"), 8) * 0.6,
      "label": "data(label)", "font-size": 9, "color": "#495057",
      "text-background-color": "#fff", "text-background-opacity": 0.8 } },
    { selector: "edge[state = 'dead']", style: { "line-style": "dashed" } },
    { selector: "edge.merge", style: { "line-color": "#8e44ad", "target-arrow-color": "#8e44ad" } },
  ],
});
// Read by the browser test, handy in the console too.
window.explorer = { cy, state };

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === "onclick") node.addEventListener("click", value);
    else node.setAttribute(key, value);
  }
  for (const child of children) {
    if (child !== null && child !== undefined) {
      node.append(child instanceof Node ? child : String(child));
    }
  }
  return node;
}

const shortAddress = (a) => (a ? a.slice(0, 8) + "…" + a.slice(-4) : "-");
const shortHash = (h) => (h ? h.slice(0, 12) + "…" : "-");
const shortUpdate = (id) => (id.length > 12 ? id.slice(0, 10) + "…" : id);
const roundOf = (m) => (m.round === null ? -1 : m.round);
const plural = (n, word) => `${n} ${word}${n === 1 ? "" : "s"}`;
// A trainer is its id; the address shown is the one holding its token (or the last one).
const holderText = (holder, exited) =>
  (holder ? shortAddress(holder) : "?") + (exited ? " (exited)" : "");

function shortOf(id) {
  const model = state.doc.models.find((m) => m.id === id);
  return model ? model.short : id.slice(2, 10);
}

function modelLink(id) {
  const model = state.doc.models.find((m) => m.id === id);
  if (!model) return el("span", { class: "mono", title: id }, id.slice(0, 10) + "… (not read)");
  return el("a", { class: "model-link mono", title: id, onclick: () => select(id) }, model.short);
}

function parentsOf(model) {
  return model.parents || (model.parent ? [model.parent] : []);
}

function edgeCount(doc) {
  const known = new Set(doc.models.map((m) => m.id));
  return doc.models.reduce((n, m) => n + parentsOf(m).filter((p) => known.has(p)).length, 0);
}

function elements(doc) {
  const byId = new Map(doc.models.map((m) => [m.id, m]));
  const parentOf = new Map(doc.updates.map((u) => [u.id, u.parent]));
  const out = [];
  for (const m of doc.models) {
    out.push({ group: "nodes", classes: m.merge ? "model merge" : "model", data: {
      id: m.id, label: `${m.short}\n×${m.popularity}`, state: m.state, round: roundOf(m),
      popularity: m.popularity } });
  }
  for (const m of doc.models) {
    // A merge has several parents: one edge from each.
    for (const pid of parentsOf(m)) {
      const parent = byId.get(pid);
      if (!parent) continue;
      // A merge's edge counts the updates trained from that parent.
      const label = m.merge
        ? `${m.updates.filter((u) => parentOf.get(u) === pid).length}/${m.updates.length} upd.`
        : `${m.updates.length} upd.`;
      out.push({ group: "edges", classes: m.merge ? "merge" : "", data: {
        id: `${pid}->${m.id}`, source: pid, target: m.id, state: m.state,
        popularity: m.popularity, label,
        span: Math.max(1, roundOf(m) - roundOf(parent)) } });
    }
  }
  return out;
}

function addRoundLabels() {
  cy.nodes(".round-label").remove();
  const models = cy.nodes(".model");
  if (models.length === 0) return;
  const top = Math.min(...models.map((n) => n.boundingBox().y1));
  const columns = new Map();
  models.forEach((n) => {
    const r = n.data("round");
    const xs = columns.get(r) || [];
    xs.push(n.position("x"));
    columns.set(r, xs);
  });
  for (const [r, xs] of columns) {
    const x = xs.reduce((a, b) => a + b, 0) / xs.length;
    cy.add({ group: "nodes", classes: "round-label", selectable: false, grabbable: false,
             data: { id: `round-label-${r}`, label: r < 0 ? "genesis" : `round ${r}` },
             position: { x, y: top - 24 } });
  }
}

function drawGraph(doc) {
  // Same models as before: update in place; otherwise lay the graph out again.
  const key = doc.models.map((m) => m.id).join(",");
  if (key === state.modelKey) {
    for (const m of doc.models) {
      cy.getElementById(m.id).data({ state: m.state, popularity: m.popularity,
                                     label: `${m.short}\n×${m.popularity}` });
    }
    return;
  }
  state.modelKey = key;
  cy.elements().remove();
  cy.add(elements(doc));
  cy.layout({ name: "dagre", rankDir: "LR", nodeSep: 18, rankSep: 90,
              minLen: (edge) => edge.data("span"), animate: false }).run();
  addRoundLabels();
  cy.fit(undefined, 30);
  if (state.selected) cy.getElementById(state.selected).select();
}

function drawHeader(doc) {
  const net = doc.network;
  const s = doc.status;
  document.getElementById("network").textContent =
    `task ${net.task} · chain ${net.chain_id} · Models ${shortAddress(net.addresses.Models)}`;
  const chips = document.getElementById("status");
  chips.replaceChildren(
    el("span", {}, `block ${s.block}`),
    s.started ? el("span", { id: "round" }, `round ${s.round}`) : el("span", {}, "not started"),
    s.started ? el("span", { class: "phase", id: "phase" }, s.phase) : null,
    s.started ? el("span", { id: "votes" }, `votes ${s.votes}/${s.quorum}`) : null,
    s.started ? el("span", {}, plural(s.voters, "voter")) : null,
    el("span", {}, plural(s.trainers, "trainer")));
  const merges = doc.models.filter((m) => m.merge).length;
  document.getElementById("counts").textContent =
    `${plural(doc.models.length, "model")} · ${plural(edgeCount(doc), "edge")} · ` +
    `${plural(merges, "merge")} · ${plural(doc.updates.length, "update")}`;
}

function drawTables(doc) {
  document.querySelector("#trainers tbody").replaceChildren(...doc.trainers.map((t) =>
    el("tr", { class: t.exited ? "exited" : "" }, el("td", {}, `#${t.trainer_id}`),
       el("td", { class: "mono", title: (t.holders || [t.address]).join(" → ") },
          holderText(t.address, t.exited),
          t.holders && t.holders.length > 1 ? " (key rotated)" : ""),
       el("td", {}, t.updates), el("td", {}, t.aggregations),
       el("td", {}, t.voted ? (t.vote_counted ? "✓" : "✓ (not counted)") : "–"))));
  document.querySelector("#rounds tbody").replaceChildren(...doc.rounds.map((r) =>
    el("tr", {}, el("td", {}, r.round), el("td", {}, r.models), el("td", {}, r.merges),
       el("td", {}, r.updates), el("td", {}, r.trainers))));
}

function drawDetails() {
  const box = document.getElementById("details");
  const model = state.doc && state.doc.models.find((m) => m.id === state.selected);
  if (!model) {
    box.replaceChildren(el("p", { class: "muted" },
      "Click a model to see its updates, aggregators, CIDs and transactions."));
    return;
  }
  const updates = new Map(state.doc.updates.map((u) => [u.id, u]));
  const weights = `/api/models/${model.id}/weights`;
  box.replaceChildren(
    el("h2", {}, "Model ", el("span", { class: "mono" }, model.short), " ",
       el("span", { class: `badge ${model.state}` },
          model.state + (model.fork ? " · fork" : "") + (model.merge ? " · merge" : ""))),
    el("dl", {},
      el("dt", {}, "id"), el("dd", { class: "mono", id: "model-id" }, model.id),
      el("dt", {}, "round"), el("dd", {}, model.round === null ? "genesis" : model.round),
      el("dt", {}, "creation index"), el("dd", {}, model.index ?? "before the blocks read"),
      el("dt", {}, parentsOf(model).length > 1 ? "parents" : "parent"),
      el("dd", {}, ...(parentsOf(model).length
        ? parentsOf(model).flatMap((p) => [modelLink(p), " "]) : ["-"])),
      el("dt", {}, "children"), el("dd", {}, ...(model.children.length
        ? model.children.flatMap((c) => [modelLink(c), " "]) : ["none"])),
      el("dt", {}, "popularity"), el("dd", {}, model.popularity),
      el("dt", {}, "weights CID"), el("dd", { class: "mono" }, model.weights_cid || "not published"),
      el("dt", {}, "weights"), el("dd", {}, el("a", { href: weights, id: "download" },
        model.weights_cid ? "download (published blob)" : "download (recomputed FedAvg)"))),
    el("h2", {}, `Updates (${model.updates.length})`),
    el("table", { id: "model-updates" },
      el("thead", {}, el("tr", {}, ...["id", "trainer", "samples", "CID", "tx", ""].map(
        (h) => el("th", {}, h)))),
      el("tbody", {}, ...model.updates.map((id) => {
        const u = updates.get(id);
        if (!u) return el("tr", {}, el("td", { title: id }, shortUpdate(id)),
                          el("td", { colspan: 5 }, "proposed before the blocks read"));
        return el("tr", { class: "update-row" },
          el("td", { class: "mono", title: id }, shortUpdate(id)),
          el("td", { class: "mono", title: u.proposer, "data-trainer": u.trainer_id },
             `#${u.trainer_id} ${shortAddress(u.proposer)}`,
             model.merge ? el("span", { class: "muted" }, ` from ${shortOf(u.parent)}`) : null),
          el("td", {}, u.num_samples), el("td", { class: "mono" }, u.cid),
          el("td", { class: "mono", title: u.tx_hash }, shortHash(u.tx_hash)),
          el("td", {}, el("a", { href: `/api/updates/${id}/weights` }, "weights")));
      }))),
    el("h2", {}, `Aggregators (${model.aggregations.length})`),
    el("table", { id: "model-aggregators" },
      el("thead", {}, el("tr", {}, el("th", {}, "trainer"), el("th", {}, "holder"),
                               el("th", {}, "transaction"))),
      el("tbody", {}, ...model.aggregations.map((a) => el("tr", { class: "aggregation-row" },
        el("td", { "data-trainer": a.trainer_id }, `#${a.trainer_id}`),
        el("td", { class: "mono", title: a.holder || "" }, holderText(a.holder, a.exited)),
        el("td", { class: "mono", title: a.tx }, shortHash(a.tx)))))));
}

function select(id) {
  state.selected = id;
  cy.nodes(":selected").unselect();
  if (id) cy.getElementById(id).select();
  drawDetails();
}

cy.on("tap", "node.model", (event) => select(event.target.id()));
cy.on("tap", (event) => { if (event.target === cy) select(null); });

async function load() {
  const response = await fetch("/api/dag", { cache: "no-store" });
  if (!response.ok) throw new Error(`/api/dag answered ${response.status}`);
  const doc = await response.json();
  state.doc = doc;
  state.version = doc.version;
  drawHeader(doc);
  drawGraph(doc);
  drawTables(doc);
  drawDetails();
  document.body.dataset.version = String(doc.version);
}

async function poll() {
  try {
    const response = await fetch("/api/version", { cache: "no-store" });
    const { version, block } = await response.json();
    if (version !== state.version) await load();
    else if (state.doc) {
      state.doc.status.block = block;
      drawHeader(state.doc);
    }
  } catch (error) {
    document.getElementById("network").textContent = `explorer unreachable (${error.message})`;
  }
  setTimeout(poll, POLL_MS);
}

poll();
