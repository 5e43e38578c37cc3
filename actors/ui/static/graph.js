// Graph: opens on the most connected entities (the whole graph when it is small) and their
// relations; the entity field filters them, Draw centres on one entity; a path between two.
import { $, api, fill, h, plural, report } from "./api.js";
import { layout } from "./layout.js";

let drawing = 0; // the latest draw asked for: an older answer arriving later is not drawn

export function start() {
  $("g-form").addEventListener("submit", (e) => { e.preventDefault(); draw($("g-entity").value.trim()); });
  $("g-path").addEventListener("click", path);
  $("g-entity").addEventListener("input", () => { names($("g-entity").value); dim(); });
  names("");
  draw("");
}

async function names(q) {
  try {
    const found = await api("entities", { q });
    $("g-names").replaceChildren(...found.entities.map((n) => h("option", { value: typeof n === "string" ? n : n.name })));
  } catch (error) { report("g-info", error); }
}

// The model of a `graph` tool answer (paths around one entity) or of the overview.
function model(result) {
  const nodes = new Map();
  const add = (name, type) => { if (!nodes.has(name)) nodes.set(name, { name, type }); };
  const edges = new Map();
  const edge = (source, relation, target) => edges.set(`${source}\u0000${relation}\u0000${target}`, { source, relation, target });
  if (result.overview) {
    for (const e of result.entities) { add(e.name, e.entityType); nodes.get(e.name).degree = e.degree; }
    for (const r of result.relations) edge(r.from, r.relationType, r.to);
    return { nodes, edges: [...edges.values()], center: null, overview: true, total: result.total, truncated: result.truncated };
  }
  add(result.entity.name, result.entity.kind);
  for (const p of result.paths) for (const e of p.edges) { add(e.source); add(e.target); edge(e.source, e.relation, e.target); }
  return { nodes, edges: [...edges.values()], center: result.entity.name, overview: false, truncated: result.truncated };
}

// Draw the overview (no entity) or the paths around ``entity``; highlight the names in ``highlight``.
export async function draw(entity, highlight = []) {
  const relations = $("g-relations").value.split(",").map((s) => s.trim()).filter(Boolean);
  const mine = ++drawing;
  try {
    const result = await api("graph", {
      entity, depth: $("g-depth").value, direction: $("g-direction").value, relations: relations.join(","),
    });
    if (mine !== drawing) return;
    const drawn = model(result);
    if (drawn.overview && relations.length) drawn.edges = drawn.edges.filter((e) => relations.includes(e.relation));
    render(drawn, new Set(highlight.map((n) => n.toLowerCase())));
    if (!highlight.length) describe(drawn);
  } catch (error) { if (mine === drawing) report("g-info", error); }
  $("page-graph").dataset.loaded = "1";
}

function describe(drawn) {
  const n = drawn.nodes.size, m = drawn.edges.length;
  const s = (k, one, many) => `${k} ${k === 1 ? one : many}`;
  let what;
  if (!drawn.overview) what = `${s(n, "entity", "entities")} around ${drawn.center}${drawn.truncated ? " (more paths exist than are drawn)" : ""}`;
  else if (!n) what = "No entities yet: an agent creates them with remember (entities, relations) or create_entities.";
  else if (drawn.total > n) what = `The ${n} most connected of ${drawn.total} entities, with ${s(m, "relation", "relations")} among them.`;
  else what = `All ${s(n, "entity", "entities")} and ${s(m, "relation", "relations")}${drawn.truncated ? " (not every relation is drawn)" : ""}.`;
  fill("g-info", h("p", { id: "g-summary" }, what),
    h("p", { class: "muted" }, "Type in the entity field to filter; Draw centres on it (empty: this overview). Click an entity for its observations; double-click to centre on it."));
}

// Dim the entities the entity field does not match (a filter over what is drawn).
function dim() {
  const text = $("g-entity").value.trim().toLowerCase();
  for (const g of document.querySelectorAll("#g-svg g.node")) {
    g.classList.toggle("dim", !!text && !g.dataset.name.toLowerCase().includes(text));
  }
}

const ARROW = () => h("defs", {}, h("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" },
  h("path", { d: "M 0 0 L 10 5 L 0 10 z" })));

function render(drawn, onPath) {
  const svg = $("g-svg");
  if (!drawn.nodes.size) {
    svg.setAttribute("viewBox", "0 0 900 620");
    svg.replaceChildren(h("text", { x: 450, y: 310, class: "empty" }, "no entities to draw"));
    $("g-info").dataset.entities = 0;
    return;
  }
  const placed = layout([...drawn.nodes.keys()], drawn.edges, drawn.center, svg.clientWidth || 900, svg.clientHeight || 620);
  const hot = (name) => onPath.has(name.toLowerCase());
  const lines = placed.edges.map((e) => h("g", { class: `edge${hot(e.source) && hot(e.target) ? " onpath" : ""}`, "data-relation": e.relation },
    e.loop ? h("path", { d: e.loop, fill: "none", "marker-end": "url(#arrow)" })
      : h("line", { x1: e.x1, y1: e.y1, x2: e.x2, y2: e.y2, "marker-end": "url(#arrow)" }),
    h("title", {}, `${e.source} —${e.relation}→ ${e.target}`)));
  const nodes = placed.nodes.map((n) => {
    const node = drawn.nodes.get(n.name);
    const cls = `node${n.name === drawn.center ? " center" : ""}${hot(n.name) ? " onpath" : ""}`;
    return h("g", { class: cls, "data-name": n.name,
      onclick: () => observe(n.name), ondblclick: () => { $("g-entity").value = n.name; draw(n.name); } },
      h("circle", { cx: n.x, cy: n.y, r: n.r }), h("text", { x: n.x, y: n.labelY }, n.name),
      h("title", {}, `${n.name}${node.type ? " (" + node.type + ")" : ""}${node.degree !== undefined ? ", " + plural(node.degree, "relation") : ""}`));
  });
  const labels = placed.edges.filter((e) => e.label).map((e) => h("g", { class: "label", "data-relation": e.relation },
    h("rect", { x: e.label.x, y: e.label.y, width: e.label.w, height: e.label.h, rx: 3 }),
    h("text", { x: e.label.x + e.label.w / 2, y: e.label.y + e.label.h - 4 }, e.relation)));
  svg.setAttribute("viewBox", placed.viewBox);
  svg.replaceChildren(ARROW(), ...lines, ...nodes, ...labels);
  $("g-info").dataset.entities = placed.nodes.length;
  dim();
}

async function observe(name) {
  try {
    const d = await api("entity", { name });
    const obs = d.entity.observations || [];
    fill("g-info",
      h("h3", {}, d.entity.name, " ", h("span", { class: "muted" }, d.entity.entityType)),
      h("p", { class: "muted" }, `${d.degree.in} in, ${d.degree.out} out`),
      h("h4", {}, "Observations"),
      obs.length ? h("ul", { id: "g-observations" }, obs.map((o) => h("li", {}, o))) : h("p", { class: "muted" }, "none"),
      h("h4", {}, "Relations"),
      h("ul", {}, d.outgoing.map((r) => h("li", {}, `—${r.relationType}→ ${r.to}`)),
        d.incoming.map((r) => h("li", {}, `${r.from} —${r.relationType}→`))));
  } catch (error) { report("g-info", error); }
}

async function path() {
  try {
    const found = await api("path", { from: $("g-from").value, to: $("g-to").value });
    if (!found.found) { fill("g-info", h("p", {}, "no path between them")); return; }
    const start = found.entities[0];
    $("g-entity").value = start;
    $("g-depth").value = String(Math.min(3, Math.max(1, found.length)));
    await draw(start, found.entities);
    fill("g-info", h("h3", {}, `Path of length ${found.length}`),
      h("ol", {}, found.relations.map((r) => h("li", {}, `${r.from} —${r.relationType}→ ${r.to}`))));
  } catch (error) { report("g-info", error); }
}
