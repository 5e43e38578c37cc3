// The dashboard's shell: the token, the tabs, each page's first load.
import { $, api, takeToken } from "./api.js";
import * as memories from "./memories.js";
import * as graph from "./graph.js";
import * as recall from "./recall.js";
import * as code from "./code.js";
import * as server from "./server.js";

const PAGES = { memories, graph, recall, code, server };
const started = new Set();

function show() {
  const name = (location.hash || "#memories").slice(1);
  const page = PAGES[name] ? name : "memories";
  for (const key of Object.keys(PAGES)) $(`page-${key}`).hidden = key !== page;
  for (const a of document.querySelectorAll("#tabs a")) a.classList.toggle("active", a.dataset.page === page);
  if (!started.has(page)) { started.add(page); PAGES[page].start(); }
  PAGES[page].shown?.();
  document.body.dataset.page = page;
}

async function main() {
  if (!takeToken()) {
    $("banner").textContent = "No dashboard token: open the URL that memtrio ui printed.";
    $("banner").hidden = false;
    return;
  }
  try {
    const info = await api("overview");
    $("scope").textContent = `${info.current_scope} · ${info.home}`;
    document.body.dataset.embeddings = info.embeddings;
  } catch (error) {
    $("banner").textContent = error.message;
    $("banner").hidden = false;
    return;
  }
  window.addEventListener("hashchange", show);
  show();
  document.body.dataset.ready = "1";
}

main();
