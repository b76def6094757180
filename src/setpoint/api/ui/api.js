// The API client: the token (kept in sessionStorage), JSON reads and writes, discovery,
// and the live object set fed by one list then one watch stream (fetch + ReadableStream).
// Nothing here polls: changes arrive on the watch. The one-step login: a `#login=CODE`
// fragment is exchanged (POST /ui/login) for a session token, then dropped from the URL.
import { setHealthRules } from "./util.js";

const TOKEN = "setpoint.token";
export const INSIGHT = "/apis/insight.setpoint.dev/v1alpha1";

export class ApiError extends Error {
  constructor(status, body) {
    super((body && body.message) || `HTTP ${status}`);
    this.status = status;
    this.body = body;
  }
}

// The code of a one-time login link (`#login=CODE`), exchanged for a session token; the
// fragment is never sent to the server, and is taken out of the address bar and history.
export async function redeemLoginCode() {
  const match = /^#login=([A-Za-z0-9_-]+)$/.exec(location.hash);
  if (!match) return null;
  history.replaceState(null, "", location.pathname + location.search);
  const response = await fetch("/ui/login", { method: "POST", headers: { "Content-Type": "application/json", Accept: "application/json" }, body: JSON.stringify({ code: match[1] }) });
  const body = await response.json().catch(() => null);
  if (!response.ok) return (body && body.message) || `HTTP ${response.status}`;
  setToken(body.token);
  return null;
}

export function token() { return sessionStorage.getItem(TOKEN) || ""; }
export function setToken(value) {
  if (value) sessionStorage.setItem(TOKEN, value); else sessionStorage.removeItem(TOKEN);
}

function headers(extra) {
  const h = Object.assign({ Accept: "application/json" }, extra || {});
  if (token()) h.Authorization = `Bearer ${token()}`;
  return h;
}

export async function request(method, path, body, contentType) {
  const init = { method, headers: headers(body === undefined ? {} : { "Content-Type": contentType || "application/json" }) };
  if (body !== undefined) init.body = typeof body === "string" ? body : JSON.stringify(body);
  const response = await fetch(path, init);
  const text = await response.text();
  let parsed = null;
  try { parsed = text ? JSON.parse(text) : null; } catch (e) { parsed = { message: text }; }
  if (!response.ok) throw new ApiError(response.status, parsed);
  return parsed;
}
export const get = (path) => request("GET", path);

// Read a streamed response line by line: `onLine(text)` for each complete line.
export async function streamLines(path, onLine, signal) {
  const response = await fetch(path, { headers: headers(), signal });
  if (!response.ok) throw new ApiError(response.status, await response.json().catch(() => null));
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let rest = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    rest += decoder.decode(value, { stream: true });
    let at;
    while ((at = rest.indexOf("\n")) >= 0) {
      const line = rest.slice(0, at);
      rest = rest.slice(at + 1);
      if (line) onLine(line);
    }
  }
}

// Kinds from discovery: kind name -> {kind, plural, namespaced, groupVersion, verbs, subresources}
export async function discover() {
  const kinds = new Map();
  const lists = [];
  lists.push(get("/api/v1").catch(() => null));
  const groups = await get("/apis");
  for (const g of groups.groups || []) {
    if (g.name === "insight.setpoint.dev") continue;
    lists.push(get(`/apis/${g.preferredVersion.groupVersion}`).catch(() => null));
  }
  for (const list of await Promise.all(lists)) {
    if (!list) continue;
    const subs = new Set();
    for (const r of list.resources) if (r.name.includes("/")) subs.add(r.name);
    for (const r of list.resources) {
      if (r.name.includes("/")) continue;
      kinds.set(r.kind, {
        kind: r.kind, plural: r.name, namespaced: r.namespaced, groupVersion: list.groupVersion,
        scale: subs.has(`${r.name}/scale`),
      });
    }
  }
  return kinds;
}

export function resourcePath(info, namespace, name) {
  const base = info.groupVersion === "v1" ? "/api/v1" : `/apis/${info.groupVersion}`;
  const ns = info.namespaced ? `/namespaces/${encodeURIComponent(namespace)}` : "";
  return `${base}${ns}/${info.plural}${name ? "/" + encodeURIComponent(name) : ""}`;
}

export function keyOf(obj) {
  const m = obj.metadata || {};
  return `${obj.kind}/${m.namespace || ""}/${m.name}`;
}

// Every object of every kind, kept current from one list and one watch.
export class Live {
  constructor() {
    this.objects = new Map();
    this.revision = 0;
    this.selector = "";
    this.listeners = new Set();
    this.statusListeners = new Set();
    this.abort = null;
    this.pending = false;
    this.generation = 0;
    this.changed = new Set();
  }
  subscribe(fn) { this.listeners.add(fn); return () => this.listeners.delete(fn); }
  onStatus(fn) { this.statusListeners.add(fn); }
  status(text) { for (const fn of this.statusListeners) fn(text); }
  notify(key) {
    if (key) this.changed.add(key);
    if (this.pending) return;
    this.pending = true;
    requestAnimationFrame(() => {
      this.pending = false;
      const changed = this.changed;
      this.changed = new Set();
      for (const fn of this.listeners) fn(changed);
    });
  }
  async start(selector) {
    this.selector = selector || "";
    if (this.abort) this.abort.abort();
    const generation = ++this.generation;
    const abort = new AbortController();
    this.abort = abort;
    const q = this.selector ? `labelSelector=${encodeURIComponent(this.selector)}` : "";
    const list = await get(`${INSIGHT}/objects${q ? "?" + q : ""}`);
    if (generation !== this.generation) return;
    setHealthRules({ ...list.healthRules, systemKinds: list.systemKinds });
    this.objects = new Map();
    for (const obj of list.items) this.objects.set(keyOf(obj), obj);
    this.revision = Number(list.metadata.resourceVersion);
    this.loaded = true;
    this.notify(null);
    this.follow(generation, abort, q);
  }
  async follow(generation, abort, q) {
    while (generation === this.generation) {
      try {
        this.status("live");
        await streamLines(`${INSIGHT}/objects?watch=true&resourceVersion=${this.revision}${q ? "&" + q : ""}`,
          (line) => this.apply(JSON.parse(line)), abort.signal);
      } catch (e) {
        if (abort.signal.aborted) return;
        if (e instanceof ApiError && e.status === 401) { this.status("unauthorized"); return; }
      }
      if (generation !== this.generation) return;
      this.status("reconnecting");
      await new Promise((resolve) => setTimeout(resolve, 1000)); // back off before resuming the watch
    }
  }
  apply(event) {
    if (event.type === "ERROR") { this.start(this.selector); return; }
    if (event.type === "BOOKMARK") return;
    const obj = event.object;
    const key = keyOf(obj);
    this.revision = Math.max(this.revision, Number(obj.metadata.resourceVersion) || 0);
    if (event.type === "DELETED") this.objects.delete(key); else this.objects.set(key, obj);
    this.notify(key);
  }
}

export const live = new Live();
