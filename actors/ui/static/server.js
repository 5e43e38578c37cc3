// Server: the live supervision tree, calls in flight, the embedding model, recent traces.
import { $, api, h, plural, report, when } from "./api.js";

let timer = null;

export function start() {
  $("s-refresh").addEventListener("click", refresh);
  window.addEventListener("hashchange", () => { if (location.hash !== "#server") { clearInterval(timer); timer = null; } });
}

export function shown() {
  refresh();
  if (!timer) timer = setInterval(refresh, 3000);
}

function actor(a) {
  return h("li", { "data-actor": a.id, "data-restarts": a.restarts },
    h("span", {}, a.id, " "), h("span", { class: `state-${a.state}` }, a.state),
    h("span", { class: "muted" }, ` ${a.restart}${a.strategy ? ", " + a.strategy : ""} · `),
    h("span", { class: a.restarts ? "restarts" : "muted" }, plural(a.restarts, "restart")),
    a.last_error ? h("div", { class: "error" }, a.last_error) : null,
    a.children ? h("ul", { class: "tree" }, a.children.map(actor)) : null);
}

function timeline(t) {
  const total = Math.max(t.duration_ms, ...t.spans.map((s) => s.start_ms + s.duration_ms), 0.001);
  const rowH = 16, width = 900;
  const bars = t.spans.map((s, i) => h("g", {},
    h("rect", { x: (s.start_ms / total) * width * 0.6, y: i * rowH + 2, width: Math.max(1, (s.duration_ms / total) * width * 0.6), height: rowH - 4, class: s.outcome === "ok" ? "" : "error" }),
    h("text", { x: width * 0.62 + s.depth * 8, y: i * rowH + 12 }, `${s.actor} ${s.name}${s.tool ? " " + s.tool : ""} ${s.duration_ms} ms ${s.outcome}`)));
  return h("div", { class: "trace", "data-trace": t.trace_id },
    h("div", {}, h("strong", {}, t.tool || "request"), h("span", { class: "muted" }, ` ${when(t.at)} · ${t.duration_ms} ms · ${t.outcome}`)),
    h("svg", { viewBox: `0 0 ${width} ${t.spans.length * rowH + 4}`, preserveAspectRatio: "xMinYMin meet", height: t.spans.length * rowH + 4 }, bars));
}

export async function refresh() {
  try {
    const s = await api("server");
    $("s-summary").textContent = `memtrio ${s.version} · pid ${s.pid} · ${plural(s.sessions, "session")} · ${plural(s.calls_in_flight, "call")} in flight · ${s.features.join(", ")}`;
    $("s-tree").replaceChildren(...s.actors.map(actor));
    const e = s.embedding;
    $("s-model").textContent = e.enabled ? `${e.model} (${e.backend}, ${e.workers} worker${e.workers > 1 ? "s" : ""})` : "embeddings are off: recall is lexical";
    $("s-calls").replaceChildren(...(s.calls.length ? s.calls.map((c) => h("li", {}, `${c.session}: ${c.calls}`)) : [h("li", { class: "muted" }, "none")]));
    const traces = await api("traces", { limit: 10 });
    $("s-traces").replaceChildren(...(traces.traces.length ? traces.traces.map(timeline) : [h("p", { class: "muted" }, "no requests in the trace log yet")]));
    document.body.dataset.serverLoaded = String(Date.now());
  } catch (error) { report("s-summary", error); }
  $("page-server").dataset.loaded = "1";
}
