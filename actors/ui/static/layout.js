// Where the Graph page draws entities and relation labels: a force-directed layout (nodes
// repel, relations pull, the middle of each relation pushes other nodes away so its label has
// room), then each label on its relation, at the first place near the middle that covers no
// entity (circle or name) and no other label. Deterministic: the same graph, the same drawing.
export const R = 16; // node radius
const NODE_FONT = "12px system-ui, sans-serif";
const LABEL_FONT = "10px system-ui, sans-serif";
const K = 120; // ideal relation length
const ITERATIONS = 300;
const PAD = 3; // clearance kept around boxes
const MARGIN = 24, GAP = 48;
const MAX_ZOOM = 2; // a small drawing is enlarged to fill its canvas, its names at most 24px
const ALONG = [0.5, 0.42, 0.58, 0.34, 0.66, 0.27, 0.73, 0.2, 0.8];
const ACROSS = [0, 11, -11, 22, -22, 33, -33, 44, -44];

const ctx = document.createElement("canvas").getContext("2d");
function textWidth(text, font) { ctx.font = font; return ctx.measureText(text).width; }

const overlaps = (a, b) => a.x < b.x + b.w + PAD && b.x < a.x + a.w + PAD && a.y < b.y + b.h + PAD && b.y < a.y + a.h + PAD;

function nodeBox(x, y, w) {
  const half = Math.max(R, w / 2);
  return { x: x - half, y: y - R, w: 2 * half, h: 2 * R + 18 };
}

function forces(n, pairs, c) {
  const x = new Float64Array(n), y = new Float64Array(n);
  const order = [...Array(n).keys()].sort((a, b) => (b === c) - (a === c) || a - b);
  order.forEach((i, j) => { // a sunflower spiral, the centre entity first
    const r = K * 0.7 * Math.sqrt(j), a = j * 2.39996;
    x[i] = r * Math.cos(a); y[i] = r * Math.sin(a);
  });
  const fx = new Float64Array(n), fy = new Float64Array(n);
  let temp = K;
  for (let it = 0; it < ITERATIONS; it++) {
    fx.fill(0); fy.fill(0);
    for (let i = 0; i < n; i++) {
      for (let j = i + 1; j < n; j++) {
        let dx = x[i] - x[j], dy = y[i] - y[j];
        if (dx === 0 && dy === 0) { dx = 0.1 * (i - j); dy = 0.1; }
        const d2 = dx * dx + dy * dy, f = (K * K) / d2;
        fx[i] += dx * f; fy[i] += dy * f; fx[j] -= dx * f; fy[j] -= dy * f;
      }
    }
    for (const [a, b] of pairs) {
      const dx = x[a] - x[b], dy = y[a] - y[b], f = Math.hypot(dx, dy) / K;
      fx[a] -= dx * f; fy[a] -= dy * f; fx[b] += dx * f; fy[b] += dy * f;
      const mx = (x[a] + x[b]) / 2, my = (y[a] + y[b]) / 2; // room for the label
      for (let i = 0; i < n; i++) {
        if (i === a || i === b) continue;
        const ex = x[i] - mx, ey = y[i] - my, d2 = Math.max(ex * ex + ey * ey, 1);
        if (d2 > K * K * 0.5) continue;
        const g = (K * K * 0.5) / d2;
        fx[i] += ex * g; fy[i] += ey * g; fx[a] -= ex * g / 2; fy[a] -= ey * g / 2; fx[b] -= ex * g / 2; fy[b] -= ey * g / 2;
      }
    }
    for (let i = 0; i < n; i++) {
      fx[i] -= x[i] * 0.03; fy[i] -= y[i] * 0.03 * 1.3; // gravity, a little wider than tall
      const len = Math.hypot(fx[i], fy[i]);
      if (len > 0) { const s = Math.min(len, temp) / len; x[i] += fx[i] * s; y[i] += fy[i] * s; }
    }
    temp = Math.max(temp * 0.98, 2);
  }
  return { x, y };
}

// Push apart the entities whose circle-and-name boxes still touch.
function separate(x, y, widths) {
  const n = x.length;
  for (let round = 0; round < 60; round++) {
    let moved = false;
    for (let i = 0; i < n; i++) {
      for (let j = i + 1; j < n; j++) {
        const a = nodeBox(x[i], y[i], widths[i]), b = nodeBox(x[j], y[j], widths[j]);
        if (!overlaps(a, b)) continue;
        let dx = x[i] - x[j], dy = y[i] - y[j];
        if (dx === 0 && dy === 0) { dx = 1; dy = 0.5; }
        const over = Math.min(a.x + a.w - b.x, b.x + b.w - a.x, a.y + a.h - b.y, b.y + b.h - a.y) + PAD + 1;
        const d = Math.hypot(dx, dy);
        x[i] += (dx / d) * over / 2; y[i] += (dy / d) * over / 2; x[j] -= (dx / d) * over / 2; y[j] -= (dy / d) * over / 2;
        moved = true;
      }
    }
    if (!moved) return;
  }
}

// The positions turned so that their longest extent (principal axis) lies horizontally:
// the drawing area is wider than tall.
function level(x, y) {
  const n = x.length;
  if (n < 3) return [x, y];
  const mx = x.reduce((a, b) => a + b) / n, my = y.reduce((a, b) => a + b) / n;
  let sxx = 0, syy = 0, sxy = 0;
  for (let i = 0; i < n; i++) { const dx = x[i] - mx, dy = y[i] - my; sxx += dx * dx; syy += dy * dy; sxy += dx * dy; }
  const angle = -0.5 * Math.atan2(2 * sxy, sxx - syy), cos = Math.cos(angle), sin = Math.sin(angle);
  return [x.map((v, i) => (v - mx) * cos - (y[i] - my) * sin), y.map((v, i) => (x[i] - mx) * sin + (v - my) * cos)];
}

// The connected components of the graph, biggest first (each a list of node indexes).
function components(n, pairs) {
  const parent = [...Array(n).keys()];
  const find = (i) => (parent[i] === i ? i : (parent[i] = find(parent[i])));
  for (const [a, b] of pairs) parent[find(a)] = find(b);
  const groups = new Map();
  for (let i = 0; i < n; i++) groups.set(find(i), [...(groups.get(find(i)) || []), i]);
  return [...groups.values()].sort((a, b) => b.length - a.length || a[0] - b[0]);
}

// Each component laid out on its own, then the components packed in rows (so an isolated
// entity or a small cluster sits beside the rest instead of being pushed far away).
function arrange(n, pairs, c, widths, aspect) {
  const x = new Float64Array(n), y = new Float64Array(n);
  const parts = components(n, pairs).map((members) => {
    const local = new Map(members.map((g, i) => [g, i]));
    const sub = pairs.filter(([a]) => local.has(a)).map(([a, b]) => [local.get(a), local.get(b)]);
    const placed = forces(members.length, sub, local.has(c) ? local.get(c) : -1);
    const [px, py] = level([...placed.x], [...placed.y]), pw = members.map((g) => widths[g]);
    separate(px, py, pw);
    const boxes = members.map((_, i) => nodeBox(px[i], py[i], pw[i]));
    const x0 = Math.min(...boxes.map((b) => b.x)), y0 = Math.min(...boxes.map((b) => b.y));
    const w = Math.max(...boxes.map((b) => b.x + b.w)) - x0, h = Math.max(...boxes.map((b) => b.y + b.h)) - y0;
    return { members, px, py, x0, y0, w, h };
  });
  const area = parts.reduce((sum, p) => sum + (p.w + GAP) * (p.h + GAP), 0);
  const rowWidth = Math.max(Math.sqrt(area * aspect), ...parts.map((p) => p.w));
  let left = 0, top = 0, rowHeight = 0;
  for (const p of parts) {
    if (left > 0 && left + p.w > rowWidth) { left = 0; top += rowHeight + GAP; rowHeight = 0; }
    p.members.forEach((g, i) => { x[g] = p.px[i] - p.x0 + left; y[g] = p.py[i] - p.y0 + top; });
    left += p.w + GAP; rowHeight = Math.max(rowHeight, p.h);
  }
  return { x, y };
}

function placeLabel(text, candidates, taken) {
  const w = textWidth(text, LABEL_FONT) + 8, h = 15;
  for (const [cx, cy] of candidates) {
    const box = { x: cx - w / 2, y: cy - h / 2, w, h };
    if (!taken.some((t) => overlaps(box, t))) { taken.push(box); return box; }
  }
  return null; // no free place: the relation keeps its name in its tooltip only
}

// {nodes: [{name, x, y, r, labelY}], edges: [{source, relation, target, x1..y2 | loop, label}], viewBox}
// for a drawing area of ``width`` x ``height`` (the viewBox has its proportions and holds the
// whole drawing, enlarged at most MAX_ZOOM times).
export function layout(names, edges, center, width = 900, height = 620) {
  const n = names.length;
  const index = new Map(names.map((name, i) => [name, i]));
  const widths = names.map((name) => textWidth(name, NODE_FONT));
  const known = edges.filter((e) => index.has(e.source) && index.has(e.target));
  const pairs = known.filter((e) => e.source !== e.target).map((e) => [index.get(e.source), index.get(e.target)]);
  const { x, y } = arrange(n, pairs, index.has(center) ? index.get(center) : -1, widths, width / height);
  const boxes = names.map((_, i) => nodeBox(x[i], y[i], widths[i]));
  const taken = [...boxes];
  const placed = known.map((e) => {
    const a = index.get(e.source), b = index.get(e.target);
    if (a === b) {
      const cx = x[a], top = y[a] - R;
      const loop = `M ${cx - 6} ${top + 1} C ${cx - 34} ${top - 42}, ${cx + 34} ${top - 42}, ${cx + 6} ${top + 1}`;
      const spots = ACROSS.map((o) => [cx + o * 2, top - 40 - Math.abs(o)]);
      return { ...e, loop, label: placeLabel(e.relation, spots, taken) };
    }
    const dx = x[b] - x[a], dy = y[b] - y[a], d = Math.hypot(dx, dy) || 1, ux = dx / d, uy = dy / d;
    const spots = ALONG.flatMap((t) => ACROSS.map((o) => [x[a] + dx * t - uy * o, y[a] + dy * t + ux * o]));
    return { ...e, x1: x[a] + ux * R, y1: y[a] + uy * R, x2: x[b] - ux * (R + 2), y2: y[b] - uy * (R + 2),
      label: placeLabel(e.relation, spots, taken) };
  });
  let x0 = Infinity, y0 = Infinity, x1 = -Infinity, y1 = -Infinity;
  for (const box of [...boxes, ...placed.map((e) => e.label).filter(Boolean)]) {
    x0 = Math.min(x0, box.x); y0 = Math.min(y0, box.y); x1 = Math.max(x1, box.x + box.w); y1 = Math.max(y1, box.y + box.h);
  }
  for (const e of placed) if (e.loop) y0 = Math.min(y0, y[index.get(e.source)] - R - 48);
  // The drawing fills its canvas: shrunk to fit, or enlarged (at most MAX_ZOOM times), in a
  // viewBox of the canvas's own proportions, centred.
  const scale = Math.min(width / (x1 - x0 + 2 * MARGIN), height / (y1 - y0 + 2 * MARGIN), MAX_ZOOM);
  const w = width / scale, h = height / scale;
  const left = (x0 + x1) / 2 - w / 2, top = (y0 + y1) / 2 - h / 2;
  return {
    nodes: names.map((name, i) => ({ name, x: x[i], y: y[i], r: R, labelY: y[i] + R + 14 })),
    edges: placed,
    viewBox: `${left.toFixed(1)} ${top.toFixed(1)} ${w.toFixed(1)} ${h.toFixed(1)}`,
  };
}
