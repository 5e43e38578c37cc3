// Recall: opens on this repository's recent recall queries (a click replays one); a query's
// ranked memories in each mode, side by side, with why each came.
import { $, api, h, plural, report, say, when } from "./api.js";

export function start() {
  $("r-form").addEventListener("submit", (e) => { e.preventDefault(); run(); });
  recent();
}

async function recent() {
  try {
    const found = await api("recent");
    $("r-recent").replaceChildren(...(found.queries.length ? found.queries.map((q) => h("li", {},
      h("a", { href: "#recall", onclick: (e) => { e.preventDefault(); $("r-q").value = q.query; run(); } }, q.query),
      h("span", { class: "muted" }, ` · ${when(q.at)} · ${plural(q.memories, "memory", "memories")}`)))
      : [h("li", { class: "muted" }, "No recall over this repository's scopes yet: type what an agent would ask above to see what it would get.")]));
    // Open on the newest one replayed: what an agent asked last and what it got.
    if (found.queries.length && !$("r-q").value) { $("r-q").value = found.queries[0].query; await run(); }
  } catch (error) { report("r-recent", error); }
  $("page-recall").dataset.loaded = "1";
}

function reason(r) {
  if (r.kind === "lexical") return h("span", { class: "tag lexical" }, `lexical: ${r.terms.join(", ")}`);
  if (r.kind === "graph") return h("span", { class: "tag graph", title: r.why }, `graph: ${r.path.join(" → ")}`);
  return h("span", { class: "tag semantic" }, `semantic: ${r.why}`);
}

function list(where, mode) {
  $(where).replaceChildren(...(mode.memories.length ? mode.memories.map((m) => h("li", { "data-id": m.id },
    h("div", {}, (m.entities || []).map((e) => h("span", { class: "tag entity", title: e.kind }, e.name)), m.content),
    h("div", {}, h("span", { class: "score" }, `score ${m.score} · #${m.id} · ${m.memory_type} `), m.why.map(reason))))
    : [h("li", { class: "muted" }, "nothing")]));
}

async function run() {
  if (!$("r-q").value.trim()) { say("r-lexical", ""); $("r-q").focus(); return; }
  try {
    const result = await api("recall", { q: $("r-q").value, limit: $("r-limit").value });
    $("r-columns").hidden = false;
    list("r-lexical", result.modes.lexical);
    list("r-semantic", result.modes.semantic);
    $("r-semantic-title").firstChild.textContent = result.modes.semantic.ranking === "semantic" ? "semantic " : "semantic (off: lexical fallback) ";
  } catch (error) { $("r-columns").hidden = false; report("r-lexical", error); }
}
