// Small helpers shared by the pages: DOM building, states, ages, YAML.

export function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) if (c !== null && c !== undefined) node.append(c instanceof Node ? c : String(c));
  return node;
}

export const SVG = "http://www.w3.org/2000/svg";
export function svg(tag, attrs, ...children) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "text") node.textContent = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v);
  }
  for (const c of children.flat()) if (c) node.append(c);
  return node;
}

export function condition(obj, type) {
  return ((obj.status || {}).conditions || []).find((c) => c.type === type) || null;
}

export function stateOf(obj) {
  const stalled = condition(obj, "Stalled");
  if (stalled && stalled.status === "True") return "Stalled";
  const ready = condition(obj, "Ready");
  if (ready && ready.status === "True") return "Ready";
  if (!ready && !stalled) return "None"; // reports neither (a CRD, an Event, not yet reconciled)
  return "Reconciling";
}

export function reasonOf(obj) {
  const s = stateOf(obj);
  const c = s === "Stalled" ? condition(obj, "Stalled") : condition(obj, "Ready");
  return c ? [c.reason, c.message].filter(Boolean).join(": ") : "";
}

export function age(timestamp) {
  if (!timestamp) return "";
  const s = Math.max(0, (Date.now() - Date.parse(timestamp)) / 1000);
  if (s < 120) return `${Math.floor(s)}s`;
  if (s < 7200) return `${Math.floor(s / 60)}m`;
  if (s < 172800) return `${Math.floor(s / 3600)}h`;
  return `${Math.floor(s / 86400)}d`;
}

export function objectHref(obj) {
  const m = obj.metadata || {};
  return `#/object/${encodeURIComponent(obj.kind)}/${encodeURIComponent(m.namespace || "_")}/${encodeURIComponent(m.name)}`;
}

export function refHref(kind, namespace, name) {
  return `#/object/${encodeURIComponent(kind)}/${encodeURIComponent(namespace || "_")}/${encodeURIComponent(name)}`;
}

function scalar(v) {
  if (v === null || v === undefined) return "null";
  if (typeof v === "string") {
    return /^[A-Za-z_./][\w./-]*$/.test(v) && !["true", "false", "null", "yes", "no"].includes(v) ? v : JSON.stringify(v);
  }
  return String(v);
}

export function yaml(value, indent = "") {
  if (Array.isArray(value)) {
    if (!value.length) return "[]";
    return value.map((item) => {
      const inner = yaml(item, indent + "  ");
      return `\n${indent}- ${typeof item === "object" && item !== null ? inner.trimStart() : inner}`;
    }).join("");
  }
  if (value && typeof value === "object") {
    const keys = Object.keys(value);
    if (!keys.length) return "{}";
    return keys.map((k) => {
      const v = value[k];
      const inner = yaml(v, indent + "  ");
      const nested = v && typeof v === "object" && (Array.isArray(v) ? v.length : Object.keys(v).length);
      return `\n${indent}${k}:${nested ? inner : " " + inner}`;
    }).join("");
  }
  return scalar(value);
}

export function when(ts) {
  return new Date(ts * 1000).toISOString().replace("T", " ").slice(0, 23);
}
