// Graph: the entities and relations around one entity as an SVG drawing; a path between two.
import { $, api, fill, h, report } from "./api.js";

const W = 900, H = 620, RING = 140;
let current = null;

export function start() {
  $("g-form").addEventListener("submit", (e) => { e.preventDefault(); draw($("g-entity").value); });
  $("g-path").addEventListener("click", path);
  $("g-entity").addEventListener("input", () => names($("g-entity").value));
  names("");
}

async function names(q) {
  try {
    const found = await api("entities", { q });
    $("g-names").replaceChildren(...found.entities.map((n) => h("option", { value: typeof n === "string" ? n : n.name })));
    if (!$("g-entity").value && found.entities.length) {
      const first = found.entities[0];
      $("g-entity").value = typeof first === "string" ? first : first.name;
      draw($("g-entity").value);
    }
  } catch (error) { report("g-info", error); }
}

export async function draw(entity, highlight = []) {
  if (!entity) return;
  try {
    const result = await api("graph", {
      entity, depth: $("g-depth").value, direction: $("g-direction").value,
      relations: $("g-relations").value.split(",").map((s) => s.trim()).filter(Boolean).join(","),
    });
    current = result;
    render(result, new Set(highlight.map((n) => n.toLowerCase())));
  } catch (error) { report("g-info", error); }
}

function layout(result) {
  const depth = new Map([[result.entity.name, 0]]);
  const edges = new Map();
  for (const p of result.paths) {
    p.edges.forEach((e, i) => {
      edges.set(`${e.source}|${e.relation}|${e.target}`, e);
      for (const n of [e.source, e.target]) if (!depth.has(n)) depth.set(n, i + 1);
    });
  }
  const rings = new Map();
  for (const [name, d] of depth) rings.set(d, [...(rings.get(d) || []), name]);
  const pos = new Map();
  for (const [d, members] of rings) {
    members.forEach((name, i) => {
      const angle = (2 * Math.PI * i) / members.length + d * 0.4;
      pos.set(name, d === 0 ? [W / 2, H / 2] : [W / 2 + Math.cos(angle) * RING * d, H / 2 + Math.sin(angle) * RING * d * 0.8]);
    });
  }
  return { pos, edges: [...edges.values()] };
}

function render(result, onPath) {
  const { pos, edges } = layout(result);
  const svg = $("g-svg");
  const drawn = edges.map((e) => {
    const [x1, y1] = pos.get(e.source), [x2, y2] = pos.get(e.target);
    const hot = onPath.has(e.source.toLowerCase()) && onPath.has(e.target.toLowerCase());
    return h("g", { class: `edge${hot ? " onpath" : ""}`, "data-relation": e.relation },
      h("line", { x1, y1, x2, y2, "marker-end": "url(#arrow)" }),
      h("text", { x: (x1 + x2) / 2, y: (y1 + y2) / 2 - 4 }, e.relation));
  });
  const nodes = [...pos].map(([name, [x, y]]) =>
    h("g", { class: `node${name === result.entity.name ? " center" : ""}${onPath.has(name.toLowerCase()) ? " onpath" : ""}`, "data-name": name,
      onclick: () => observe(name), ondblclick: () => { $("g-entity").value = name; draw(name); } },
      h("circle", { cx: x, cy: y, r: 16 }), h("text", { x, y: y + 30 }, name), h("title", {}, name)));
  svg.replaceChildren(...drawn, ...nodes);
  $("g-info").dataset.entities = pos.size;
  if (result.truncated) $("g-info").prepend(h("p", { class: "muted" }, "more paths exist than are drawn"));
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
