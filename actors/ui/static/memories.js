// Memories: search, filter, sort, page; open one, edit it, forget it, export a selection.
import { $, api, h, plural, report, say, when } from "./api.js";

const state = { offset: 0, limit: 50, total: 0, rows: [], open: null, sortChosen: false };

// Until a sort is picked, a search lists by relevance and the whole list by creation.
function followQuery() {
  if (!state.sortChosen) $("m-sort").value = $("m-q").value.trim() ? "relevance" : "created";
}

export function start() {
  $("m-sort").addEventListener("change", () => { state.sortChosen = true; });
  $("m-q").addEventListener("input", followQuery);
  $("m-form").addEventListener("submit", (e) => { e.preventDefault(); followQuery(); state.offset = 0; load(); });
  $("m-prev").addEventListener("click", () => { state.offset = Math.max(0, state.offset - state.limit); load(); });
  $("m-next").addEventListener("click", () => { if (state.offset + state.limit < state.total) { state.offset += state.limit; load(); } });
  $("m-all").addEventListener("change", (e) => { for (const box of document.querySelectorAll("#m-table tbody input")) box.checked = e.target.checked; });
  $("m-export").addEventListener("click", exportSelected);
  $("d-save").addEventListener("click", save);
  $("d-forget").addEventListener("click", () => {
    $("confirm-text").textContent = `Forget memory ${state.open.id}? This cannot be undone.`;
    $("confirm").showModal();
  });
  $("confirm-no").addEventListener("click", () => $("confirm").close());
  $("confirm-yes").addEventListener("click", forget);
  filters();
  load();
}

async function filters() {
  try {
    const scopes = await api("scopes");
    for (const s of scopes.scopes) $("m-scope").append(h("option", { value: s.name }, `${s.name}${s.is_current ? " (current)" : ""}`));
    const types = await api("types");
    for (const t of types) $("m-type").append(h("option", { value: t.name }, `${t.name} (${t.memories})`));
  } catch (error) { report("m-status", error); }
}

function params() {
  const scope = $("m-scope").value;
  return {
    q: $("m-q").value, mode: $("m-mode").value, type: $("m-type").value,
    scope, scopes: scope && scope !== "global" ? scope : "",
    since: $("m-since").value, until: $("m-until").value, min_importance: $("m-imp").value,
    stale: $("m-stale").checked ? "1" : "",
    sort: $("m-sort").value, order: $("m-order").value, offset: state.offset, limit: state.limit,
  };
}

export async function load() {
  try {
    const page = await api("memories", params());
    state.rows = page.memories; state.total = page.total;
    const body = $("m-table").tBodies[0];
    body.replaceChildren(...page.memories.map(row));
    const last = Math.min(state.offset + state.limit, page.total);
    $("m-page").textContent = page.total ? `${state.offset + 1}-${last} of ${page.total}` : (page.ranking ? "no memory matches" : "no memories yet");
    $("m-prev").disabled = state.offset === 0;
    $("m-next").disabled = state.offset + state.limit >= page.total;
    say("m-status", page.ranking ? `ranking: ${page.ranking}${page.cut ? ` · the ${page.cut} best, as recall returns them` : ""}` : "");
  } catch (error) { report("m-status", error); }
  $("page-memories").dataset.loaded = "1";
}

function row(m) {
  const tr = h("tr", { "data-id": m.id, onclick: (e) => { if (e.target.type !== "checkbox") open(m.id); } },
    h("td", {}, h("input", { type: "checkbox", value: m.id, "aria-label": `select ${m.id}` })),
    h("td", {}, m.id),
    h("td", { class: "content" }, m.stale ? h("span", { class: "tag stale", title: "its code changed or was deleted: update or forget it" }, "stale") : "",
      m.content.length > 160 ? m.content.slice(0, 160) + "…" : m.content),
    h("td", { class: "entities" }, (m.entities || []).map((e) => h("span", { class: "tag entity", title: e.kind }, e.name))),
    h("td", {}, m.memory_type), h("td", {}, m.importance.toFixed(2)),
    h("td", { class: "score" }, m.score !== undefined ? m.score.toPrecision(3) : ""),
    h("td", {}, when(m.created_at)),
    h("td", {}, m.scopes.map((s) => h("span", { class: "tag" }, s))));
  if (state.open && state.open.id === m.id) tr.classList.add("open");
  return tr;
}

async function open(id) {
  try {
    const m = await api("memory", { id, scopes: params().scopes });
    state.open = m;
    $("m-detail").hidden = false;
    $("d-id").textContent = `#${m.id}`;
    $("d-content").value = m.content;
    $("d-type").value = m.memory_type;
    $("d-importance").value = m.importance;
    for (const id of ["d-save", "d-forget"]) $(id).disabled = !m.writable;
    say("d-status", m.writable ? "" : "read-only here: it belongs to a scope this repository may not write");
    const facts = [
      ["scopes", m.scopes.map((s) => h("span", { class: "tag" }, s))],
      ["entities", m.entities.map((e) => h("span", { class: "tag" }, `${e.name} (${e.kind})`))],
      ["relations", m.relations.map((r) => h("div", {}, `${r.source} —${r.relation}→ ${r.target}`))],
      ["code", (m.code || []).map((a) => h("div", { class: a.status === "changed" || a.status === "deleted" ? "stale" : "" },
        `${a.path}${a.symbol ? ":" + a.symbol : ""} ${a.status || "unchecked"}${a.moved_to ? ` → ${a.moved_to.path}${a.moved_to.symbol ? ":" + a.moved_to.symbol : ""}` : ""} (since ${when(a.since)})`))],
      ...(m.diff ? [["changed", h("pre", { id: "d-diff", class: "diff" }, m.diff)]] : []),
      ["created", when(m.created_at)], ["updated", when(m.updated_at)],
      ["accessed", `${plural(m.access_count, "time")}, last ${when(m.last_accessed_at)}`],
    ];
    $("d-facts").replaceChildren(...facts.flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]));
    $("d-history").replaceChildren(...(m.history.length ? m.history.map((a) =>
      h("li", {}, `${when(a.at)} ${a.kind} “${a.query}” rank ${a.rank}`)) : [h("li", { class: "muted" }, "never returned")]));
    for (const tr of document.querySelectorAll("#m-table tbody tr")) tr.classList.toggle("open", Number(tr.dataset.id) === id);
  } catch (error) { report("m-status", error); }
}

async function save() {
  const m = state.open;
  const edit = { id: m.id };
  if ($("d-content").value !== m.content) edit.content = $("d-content").value;
  if ($("d-type").value !== m.memory_type) edit.memory_type = $("d-type").value;
  if (Number($("d-importance").value) !== m.importance) edit.importance = Number($("d-importance").value);
  try {
    const result = await api("update", {}, edit);
    await load(); await open(m.id);
    say("d-status", result.changed.length ? `saved: ${result.changed.join(", ")}` : "nothing changed");
  } catch (error) { report("d-status", error); }
}

async function forget() {
  $("confirm").close();
  const id = state.open.id;
  try {
    await api("forget", {}, { id });
    state.open = null;
    $("m-detail").hidden = true;
    await load();
    say("m-status", `memory ${id} forgotten`);
  } catch (error) { report("m-status", error); }
}

async function exportSelected() {
  const ids = [...document.querySelectorAll("#m-table tbody input:checked")].map((b) => Number(b.value));
  if (!ids.length) { say("m-status", "select memories to export first"); return; }
  try {
    const data = await api("export", {}, { ids, scopes: params().scopes ? [params().scopes] : [] });
    const blob = new Blob([JSON.stringify(data, null, 2)], { type: "application/json" });
    const link = h("a", { href: URL.createObjectURL(blob), download: `memtrio-export-${ids.length}.json` });
    document.body.append(link); link.click(); link.remove();
    say("m-status", `exported ${plural(data.memories.length, "memory", "memories")}`);
  } catch (error) { report("m-status", error); }
}
