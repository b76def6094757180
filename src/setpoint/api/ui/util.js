// Small helpers shared by the pages: DOM building, states (by the server's rules), ages, YAML.

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

// How an object is doing: "ready", "progressing", "failed" or "none" (no Ready
// condition), by the rules the server sends with its list (setpoint.insight.health's
// RULES, the same the CLI's live view and the timeline use): this holds no list of its own.
let rules = null;
export function setHealthRules(r) { rules = r || null; }
export function systemKinds() { return new Set((rules && rules.systemKinds) || []); }
export const HEALTH_LABEL = { ready: "Ready", progressing: "progressing", failed: "failed", none: "-" };

function failureCondition(obj) {
  for (const type of (rules && rules.failureConditions) || []) {
    const c = condition(obj, type);
    if (c && c.status === "True") return c;
  }
  return null;
}

// Whether a False Ready turned False after the child last started (health.ready_since_start).
function readySinceStart(obj, ready) {
  const time = (v) => (typeof v === "string" && v ? Date.parse(v) : NaN);
  const started = time((obj.status || {}).startTime);
  const changed = time(ready.lastTransitionTime);
  return Number.isNaN(started) || Number.isNaN(changed) || changed > started;
}

// health.health: the same steps, on the server's rules.
export function stateOf(obj) {
  if (!rules) return "none";
  if (failureCondition(obj)) return "failed";
  const ready = condition(obj, rules.readyCondition);
  if (!ready) return "none";
  if (ready.status === "True" || rules.doneReasons.includes(ready.reason)) return "ready";
  if (rules.failedReasons.includes(ready.reason)) return "failed";
  if (rules.probeFailedReasons.includes(ready.reason) && readySinceStart(obj, ready)) return "failed";
  return "progressing";
}

export function reasonOf(obj) {
  const c = failureCondition(obj) || condition(obj, (rules && rules.readyCondition) || "Ready");
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
