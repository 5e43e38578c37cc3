// The dashboard's token and its calls to /api/ (the token travels in a header, never a cookie).
const KEY = "memtrio-token";

export function takeToken() {
  const url = new URL(location.href);
  const given = url.searchParams.get("token");
  if (given) {
    sessionStorage.setItem(KEY, given);
    url.searchParams.delete("token");
    history.replaceState(null, "", url.pathname + url.search + url.hash);
  }
  return sessionStorage.getItem(KEY);
}

export class ApiError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

export async function api(name, params = {}, body = undefined) {
  const query = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== "") query.set(k, v);
  const init = { headers: { "X-Memtrio-Token": sessionStorage.getItem(KEY) || "" } };
  if (body !== undefined) {
    init.method = "POST";
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const reply = await fetch(`/api/${name}${query.size ? "?" + query : ""}`, init);
  const data = await reply.json();
  if (!reply.ok) throw new ApiError(reply.status, data.error || reply.statusText);
  return data;
}

// h("td", {class: "x", onclick: f}, child...): a DOM element (text children are escaped).
export function h(tag, attrs = {}, ...children) {
  const svg = ["svg", "g", "circle", "line", "text", "rect", "title", "defs", "marker", "path"].includes(tag);
  const el = svg ? document.createElementNS("http://www.w3.org/2000/svg", tag) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

export const $ = (id) => document.getElementById(id);

// "1 memory", "2 memories".
export const plural = (n, one, many = one + "s") => `${n} ${n === 1 ? one : many}`;

export function when(iso) {
  return iso ? iso.replace("T", " ").slice(0, 16) : "never";
}

export function report(where, error) {
  const el = $(where);
  el.textContent = error instanceof Error ? error.message : String(error);
  el.classList.add("error");
}

// Replace ``where``'s content with ``children`` (clearing an earlier error).
export function fill(where, ...children) {
  const el = $(where);
  el.classList.remove("error");
  el.replaceChildren(...children);
}

export function say(where, text) {
  const el = $(where);
  el.textContent = text;
  el.classList.remove("error");
}
