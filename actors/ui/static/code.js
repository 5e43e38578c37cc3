// Code: the index of each checkout (brought up to date when the page opens), symbol search
// and a file's outline as tables, each symbol hit a file:line link to its file's outline.
import { $, api, h, report, say, when } from "./api.js";

export function start() {
  $("c-form").addEventListener("submit", (e) => { e.preventDefault(); find(); });
  $("c-outline-btn").addEventListener("click", () => outline($("c-path").value.trim()));
}

function checkouts(status) {
  const body = $("c-checkouts").tBodies[0];
  if (!status.enabled) { body.replaceChildren(h("tr", {}, h("td", { colspan: 6 }, status.why))); return; }
  body.replaceChildren(...(status.checkouts.length ? status.checkouts.map((c) => h("tr", { class: c.root === status.root ? "open" : "" },
    h("td", {}, c.root), h("td", {}, c.source_files), h("td", {}, c.indexed_files),
    h("td", {}, Object.entries(c.languages).map(([l, n]) => h("span", { class: "tag" }, `${l} ${n}`))),
    h("td", {}, Object.entries(c.coverage).map(([l, n]) => `${l}: ${n}`).join(", ")),
    h("td", {}, when(c.refreshed_at)))) : [h("tr", {}, h("td", { colspan: 6, class: "muted" }, "no checkout indexed yet"))]));
}

// Show the index at once, then bring this repository's index up to date and show it again.
export async function shown() {
  try {
    const status = await api("code");
    checkouts(status);
    if (!status.enabled) { say("c-status", "the code index is off"); return; }
    say("c-status", "refreshing the index of this repository…");
    checkouts(await api("code", { refresh: 1 }));
    say("c-status", "up to date");
  } catch (error) { report("c-status", error); }
  $("page-code").dataset.loaded = "1";
}

function place(path, start, end, quoted = false) {
  if (quoted) return h("span", { title: `lines ${start}-${end}` }, `${path}:${start}`); // not a name to ask for
  return h("a", { href: "#code", title: `lines ${start}-${end}`, "data-path": path, "data-line": start,
    onclick: (e) => { e.preventDefault(); $("c-path").value = path; outline(path, start); } }, `${path}:${start}`);
}

async function find() {
  const q = $("c-q").value.trim();
  if (!q) { say("c-message", "type a symbol name to find"); return; }
  try {
    const found = await api("symbols", { q });
    $("c-results-box").hidden = false;
    $("c-results-title").textContent = `Symbols matching “${q}”: ${found.total}${found.total > found.matches.length ? ` (first ${found.matches.length})` : ""}`;
    $("c-results").tBodies[0].replaceChildren(...(found.matches.length ? found.matches.map((m) => h("tr", {},
      h("td", { class: "where" }, place(m.path, m.start, m.end, m.quoted)),
      h("td", {}, h("span", { class: "kind" }, `${m.kind} `), m.name),
      h("td", {}, m.parent || ""), h("td", { class: "sig" }, m.signature || ""))) : [h("tr", {}, h("td", { colspan: 4, class: "muted" }, "no symbol by that name"))]));
    say("c-message", found.truncated ? `the index holds ${found.truncated.indexed_files} of ${found.truncated.source_files} source files ([code] max_files): a definition may be missing` : "");
    shown();
  } catch (error) { report("c-message", error); }
}

async function outline(path, line) {
  if (!path) { say("c-message", "type a file path to outline"); return; }
  try {
    const file = await api("outline", { path });
    $("c-outline-box").hidden = false;
    $("c-outline-title").textContent = `${file.path} · ${file.language} · ${file.coverage}${file.total > file.symbols.length ? ` · first ${file.symbols.length} of ${file.total} symbols` : ""}`;
    $("c-outline").tBodies[0].replaceChildren(...(file.symbols.length ? file.symbols.map((s) => h("tr", {
      class: s.start === line ? "hit" : "", "data-line": s.start },
      h("td", { class: "where" }, place(file.path, s.start, s.end)),
      h("td", {}, "\u00a0\u00a0".repeat(s.depth), h("span", { class: "kind" }, `${s.kind} `), s.name),
      h("td", { class: "sig" }, s.signature || ""))) : [h("tr", {}, h("td", { colspan: 3, class: "muted" }, "no symbols in this file"))]));
    say("c-message", "");
    document.querySelector("#c-outline tr.hit")?.scrollIntoView({ block: "nearest" });
  } catch (error) { report("c-message", error); }
}
