// Dependency graph: dependsOn, ownership and Service -> endpoint edges (the Processes its
// status names), a layered layout (longest path from the
// objects nothing depends on), nodes coloured by state, redrawn live; a click opens the
// object, a hover shows its root blocker and top explanation.
import { INSIGHT, get, keyOf, live } from "./api.js";
import { HEALTH_LABEL, el, objectHref, stateOf, svg, systemKinds } from "./util.js";

const W = 170, H = 34, GAP_X = 60, GAP_Y = 18;

export function edgesOf(objects) {
  const byName = new Map();
  const byUid = new Map();
  for (const obj of objects) {
    byName.set(`${obj.kind}/${obj.metadata.namespace || ""}/${obj.metadata.name}`, obj);
    if (obj.metadata.uid) byUid.set(obj.metadata.uid, obj);
  }
  const edges = [];
  for (const obj of objects) {
    const ns = obj.metadata.namespace || "";
    for (const dep of (obj.spec || {}).dependsOn || []) {
      const key = `${dep.kind}/${dep.namespace || ns}/${dep.name}`;
      if (byName.has(key)) edges.push({ from: keyOf(obj), to: key, type: "dependsOn" });
    }
    if (obj.kind === "Service") {
      for (const endpoint of (obj.status || {}).endpoints || []) {
        const key = `Process/${ns}/${endpoint.name}`;
        if (byName.has(key)) edges.push({ from: keyOf(obj), to: key, type: "endpoint" });
      }
    }
    for (const owner of obj.metadata.ownerReferences || []) {
      const o = byUid.get(owner.uid) || byName.get(`${owner.kind}/${ns}/${owner.name}`);
      if (o) edges.push({ from: keyOf(o), to: keyOf(obj), type: "owns" });
    }
  }
  return edges;
}

export function layers(keys, edges) {
  // a node's layer: 0 for those that depend on / are owned by nothing shown, else one more
  // than the deepest of those it depends on (dependsOn edges point to the left).
  const before = new Map(keys.map((k) => [k, []]));
  for (const e of edges) {
    if (e.type === "owns") before.get(e.to).push(e.from); else before.get(e.from).push(e.to);
  }
  const layer = new Map();
  const visiting = new Set();
  function depth(k) {
    if (layer.has(k)) return layer.get(k);
    if (visiting.has(k)) return 0; // a cycle: cut it here
    visiting.add(k);
    let d = 0;
    for (const p of before.get(k)) d = Math.max(d, depth(p) + 1);
    visiting.delete(k);
    layer.set(k, d);
    return d;
  }
  for (const k of keys) depth(k);
  return layer;
}

// The objects connected to `key` by any edge (its part of the graph), or all of them.
function around(key, objects, edges) {
  if (!key) return objects;
  const near = new Set([key]);
  for (let grown = true; grown;) {
    grown = false;
    for (const e of edges) {
      if (near.has(e.from) !== near.has(e.to)) { near.add(e.from); near.add(e.to); grown = true; }
    }
  }
  return objects.filter((o) => near.has(keyOf(o)));
}

export function showGraph({ main, kinds }, focus) {
  const tip = el("div", { class: "tip hidden", id: "graph-tip" });
  const box = el("div", { class: "graph", id: "graph" });
  main.append(el("p", { class: "hint", text: "dependsOn, ownership and Service -> endpoint edges; click a node to open it, hover for why it is not Ready" }), box, tip);
  let hoverToken = 0;

  function draw() {
    const hidden = systemKinds();
    const all = [...live.objects.values()].filter((o) => !hidden.has(o.kind));
    const objects = around(focus, all, edgesOf(all));
    const keys = objects.map(keyOf);
    const edges = edgesOf(objects);
    const layer = layers(keys, edges);
    const columns = [];
    for (const obj of objects) {
      const l = layer.get(keyOf(obj));
      (columns[l] = columns[l] || []).push(obj);
    }
    // order each layer by the mean row of what its nodes are joined to on the left
    // (connected nodes first in the first layer): fewer crossings, chains on one line
    const pos = new Map();
    const linked = new Set(edges.flatMap((e) => [e.from, e.to]));
    const left = new Map(keys.map((k) => [k, []]));
    for (const e of edges) {
      if (e.type === "owns") left.get(e.to).push(e.from); else left.get(e.from).push(e.to);
    }
    columns.forEach((col, x) => {
      const rank = (obj) => {
        const rows = left.get(keyOf(obj)).map((k) => pos.get(k)).filter(Boolean).map((p) => p.y);
        return rows.length ? rows.reduce((a, b) => a + b, 0) / rows.length : linked.has(keyOf(obj)) ? -1 : 1e9;
      };
      col.sort((a, b) => rank(a) - rank(b) || keyOf(a).localeCompare(keyOf(b)));
      col.forEach((obj, y) => pos.set(keyOf(obj), { x: 10 + x * (W + GAP_X), y: 10 + y * (H + GAP_Y) }));
    });
    const width = 20 + columns.length * (W + GAP_X);
    const height = 20 + Math.max(1, ...columns.map((c) => c.length)) * (H + GAP_Y);
    const root = svg("svg", { width, height, viewBox: `0 0 ${width} ${height}`, id: "graph-svg" },
      svg("defs", {}, svg("marker", { id: "arrow", viewBox: "0 0 10 10", refX: "10", refY: "5", markerWidth: "7", markerHeight: "7", orient: "auto-start-reverse" },
        svg("path", { d: "M 0 0 L 10 5 L 0 10 z", class: "arrowhead" }))));
    for (const e of edges) {
      const a = pos.get(e.from), b = pos.get(e.to);
      // dependsOn: from the dependent (right) to what it waits for (left); endpoint: from
      // the Service (right) to the replica it sends to (left); owns: owner -> owned
      const [x1, y1, x2, y2] = e.type !== "owns"
        ? [a.x, a.y + H / 2, b.x + W, b.y + H / 2]
        : [a.x + W, a.y + H / 2, b.x, b.y + H / 2];
      const mid = (x1 + x2) / 2;
      // an edge over more than one layer bows below the nodes it would cross
      const span = Math.abs(layer.get(e.from) - layer.get(e.to));
      const d = span > 1 && y1 === y2
        ? `M ${x1} ${y1} C ${x1 - GAP_X} ${y1 + H * 1.4}, ${x2 + GAP_X} ${y2 + H * 1.4}, ${x2} ${y2}`
        : `M ${x1} ${y1} C ${mid} ${y1}, ${mid} ${y2}, ${x2} ${y2}`;
      root.append(svg("path", { d, class: `edge edge-${e.type}`,
        "data-from": e.from, "data-to": e.to, "data-type": e.type, "marker-end": "url(#arrow)" }));
    }
    for (const obj of objects) {
      const p = pos.get(keyOf(obj));
      const state = stateOf(obj);
      const node = svg("a", { href: objectHref(obj), class: `node state-${state}`, "data-key": keyOf(obj), "data-state": state },
        svg("rect", { x: p.x, y: p.y, width: W, height: H, rx: 6 }),
        svg("text", { x: p.x + 8, y: p.y + 14, class: "kind", text: obj.kind }),
        svg("text", { x: p.x + 8, y: p.y + 28, class: "label", text: obj.metadata.name.slice(0, 24) }));
      node.addEventListener("mouseenter", (ev) => hover(obj, state, ev));
      node.addEventListener("mouseleave", () => { hoverToken++; tip.classList.add("hidden"); });
      root.append(node);
    }
    box.replaceChildren(root);
    main.dataset.ready = "true";
  }

  async function hover(obj, state, ev) {
    const mine = ++hoverToken;
    tip.style.left = `${ev.pageX + 12}px`;
    tip.style.top = `${ev.pageY + 12}px`;
    tip.replaceChildren(el("strong", { text: `${obj.kind}/${obj.metadata.name}: ${HEALTH_LABEL[state]}` }));
    tip.classList.remove("hidden");
    if (state === "ready" || state === "none") return;
    const info = obj.metadata;
    const plural = (kinds.get(obj.kind) || {}).plural;
    if (!plural) return;
    const answer = await get(`${INSIGHT}/namespaces/${encodeURIComponent(info.namespace || "default")}/${plural}/${encodeURIComponent(info.name)}/why`).catch(() => null);
    if (!answer || mine !== hoverToken) return;
    if (answer.rootBlocker) tip.append(el("div", { class: "tip-blocker", text: `root blocker: ${answer.rootBlocker.object.kind}/${answer.rootBlocker.object.name} - ${answer.rootBlocker.message}` }));
    if (answer.topCause) tip.append(el("div", { class: "tip-cause", text: `probable cause: ${answer.topCause.reason}` }));
  }

  const unsubscribe = live.subscribe(draw);
  draw();
  return () => { unsubscribe(); hoverToken++; };
}
