// Code: the index of each checkout, symbol search, a file's outline.
import { $, api, h, report, when } from "./api.js";

export function start() {
  $("c-form").addEventListener("submit", (e) => { e.preventDefault(); find(); });
  $("c-outline-btn").addEventListener("click", () => outline($("c-path").value));
}

export async function shown() {
  try {
    const status = await api("code");
    const body = $("c-checkouts").tBodies[0];
    if (!status.enabled) { body.replaceChildren(h("tr", {}, h("td", { colspan: 6 }, status.why))); return; }
    body.replaceChildren(...(status.checkouts.length ? status.checkouts.map((c) => h("tr", {},
      h("td", {}, c.root), h("td", {}, c.source_files), h("td", {}, c.indexed_files),
      h("td", {}, Object.entries(c.languages).map(([l, n]) => h("span", { class: "tag" }, `${l} ${n}`))),
      h("td", {}, Object.entries(c.coverage).map(([l, n]) => `${l}: ${n}`).join(", ")),
      h("td", {}, when(c.refreshed_at)))) : [h("tr", {}, h("td", { colspan: 6, class: "muted" }, "not indexed yet: search a symbol to index this checkout"))]));
  } catch (error) { report("c-results", error); }
}

async function find() {
  try {
    const text = await api("symbols", { q: $("c-q").value });
    const lines = String(text).split("\n").filter(Boolean);
    $("c-results").replaceChildren(...(lines.length ? lines.map((line) => {
      const file = line.split(":")[0];
      return h("div", {}, h("a", { href: "#code", onclick: (e) => { e.preventDefault(); $("c-path").value = file; outline(file); } }, line));
    }) : ["no match"]));
    shown();
  } catch (error) { report("c-results", error); }
}

async function outline(path) {
  try {
    $("c-outline").textContent = String(await api("outline", { path })) || "no symbols";
  } catch (error) { report("c-outline", error); }
}
