// Recall: a query's ranked memories in each mode, side by side, with why each came.
import { $, api, h, report } from "./api.js";

export function start() {
  $("r-form").addEventListener("submit", (e) => { e.preventDefault(); run(); });
}

function reason(r) {
  if (r.kind === "lexical") return h("span", { class: "tag lexical" }, `lexical: ${r.terms.join(", ")}`);
  if (r.kind === "graph") return h("span", { class: "tag graph", title: r.why }, `graph: ${r.path.join(" → ")}`);
  return h("span", { class: "tag semantic" }, `semantic: ${r.why}`);
}

function list(where, mode) {
  $(where).replaceChildren(...(mode.memories.length ? mode.memories.map((m) => h("li", { "data-id": m.id },
    h("div", {}, m.content), h("div", {}, h("span", { class: "score" }, `score ${m.score} · #${m.id} · ${m.memory_type} `), m.why.map(reason))))
    : [h("li", { class: "muted" }, "nothing")]));
}

async function run() {
  try {
    const result = await api("recall", { q: $("r-q").value, limit: $("r-limit").value });
    list("r-lexical", result.modes.lexical);
    list("r-semantic", result.modes.semantic);
    $("r-semantic-title").firstChild.textContent = result.modes.semantic.ranking === "semantic" ? "semantic " : "semantic (off: lexical fallback) ";
  } catch (error) { report("r-lexical", error); }
}
