// Object page: state, why not Ready, conditions, spec as YAML, events, timeline slice, a
// Process's or Job's log (followed live), a Deployment's rollout history, the control
// plot, and the edit role's actions (delete, scale, rollout undo) behind a confirmation.
import { ApiError, INSIGHT, get, keyOf, live, request, resourcePath, streamLines } from "./api.js";
import { HEALTH_LABEL, age, el, reasonOf, stateOf, when, yaml } from "./util.js";

// A Secret's values are never drawn: its keys only.
function masked(obj, field, value) {
  if (obj.kind !== "Secret" || !["data", "stringData"].includes(field) || !value || typeof value !== "object") return value;
  return Object.fromEntries(Object.keys(value).map((k) => [k, "***"]));
}
import { controlPlot } from "./control.js";

export function showObject({ main, kinds }, kind, namespace, name) {
  const info = kinds.get(kind);
  const key = `${kind}/${namespace}/${name}`;
  const ns = namespace || "default";
  const insightBase = `${INSIGHT}/namespaces/${encodeURIComponent(ns)}/${info ? info.plural : ""}/${encodeURIComponent(name)}`;
  const header = el("h1", { id: "object-title" }, `${kind}/${name}`);
  const graphLink = el("a", { href: `#/graph/${encodeURIComponent(kind)}/${encodeURIComponent(namespace || "_")}/${encodeURIComponent(name)}`, text: "graph around it" });
  const stateBadge = el("span", { class: "badge", id: "object-state" });
  const actions = el("div", { class: "actions hidden", id: "actions" });
  const why = el("section", { class: "why hidden", id: "why" });
  const conditions = el("table", { class: "grid", id: "conditions" });
  const spec = el("pre", { class: "yaml", id: "spec" });
  const events = el("table", { class: "grid", id: "events" });
  const timeline = el("table", { class: "grid", id: "object-timeline" });
  const extra = el("div", { id: "extra" });
  const message = el("p", { class: "error", id: "action-message" });
  main.append(
    el("div", { class: "title" }, header, stateBadge, graphLink, actions), message, why,
    el("h2", { text: "Conditions" }), conditions, extra,
    el("h2", { text: "Events" }), events,
    el("h2", { text: "Timeline" }), timeline,
    el("h2", { text: "Spec" }), spec,
  );
  const abort = new AbortController();
  let plot = null;
  let logShown = false;
  let lastWhy = "";

  function render() {
    const obj = live.objects.get(key);
    if (!obj) { stateBadge.textContent = "deleted"; stateBadge.className = "badge state-failed"; return; }
    const state = stateOf(obj);
    stateBadge.textContent = HEALTH_LABEL[state];
    stateBadge.className = `badge state-${state}`;
    spec.textContent = yaml(obj.spec !== undefined ? obj.spec : Object.fromEntries(Object.entries(obj).filter(([k]) => !["metadata", "status", "kind", "apiVersion"].includes(k)).map(([k, v]) => [k, masked(obj, k, v)]))).trimStart();
    const conds = (obj.status || {}).conditions || [];
    conditions.replaceChildren(el("tr", {}, ["Type", "Status", "Reason", "Message", "Last transition"].map((t) => el("th", { text: t }))),
      ...conds.map((c) => el("tr", { "data-type": c.type }, el("td", { text: c.type }), el("td", { class: `cond-${c.status}`, text: c.status }),
        el("td", { text: c.reason || "" }), el("td", { text: c.message || "" }), el("td", { text: c.lastTransitionTime ? `${c.lastTransitionTime} (${age(c.lastTransitionTime)})` : "" }))));
    const mine = [...live.objects.values()].filter((e) => e.kind === "Event" && e.involvedObject
      && e.involvedObject.kind === kind && e.involvedObject.name === name && (e.involvedObject.namespace || "") === (namespace || e.involvedObject.namespace || ""));
    mine.sort((a, b) => String(b.lastTimestamp || b.eventTime || "").localeCompare(String(a.lastTimestamp || a.eventTime || "")));
    events.replaceChildren(el("tr", {}, ["Type", "Reason", "Age", "Count", "Message"].map((t) => el("th", { text: t }))),
      ...mine.slice(0, 50).map((e) => el("tr", { class: e.type === "Warning" ? "warning" : "" }, el("td", { text: e.type || "" }), el("td", { text: e.reason || "" }),
        el("td", { text: age(e.lastTimestamp || e.eventTime || e.metadata.creationTimestamp) }), el("td", { text: String(e.count || 1) }), el("td", { text: e.message || "" }))));
    if (kind === "Deployment") rolloutHistory(obj);
    if (plot) plot.sample(obj);
    const whyKey = `${state}|${reasonOf(obj)}`;
    if (whyKey !== lastWhy) { lastWhy = whyKey; loadWhy(state); }
  }

  async function loadWhy(state) {
    if (state === "ready" || state === "none" || !info) { why.classList.add("hidden"); return; }
    try {
      const answer = await get(`${insightBase}/why`);
      const parts = [el("h2", { text: "Why not Ready" })];
      if (answer.rootBlocker) {
        const rb = answer.rootBlocker;
        parts.push(el("p", { id: "root-blocker" }, "Root blocker: ", el("a", { href: `#/object/${rb.object.kind}/${rb.object.namespace || "_"}/${rb.object.name}`, text: `${rb.object.kind}/${rb.object.name}` }),
          ` (${rb.state}) - ${rb.message}${rb.reason && !rb.message.includes(rb.reason) ? " - " + rb.reason : ""}`, el("br"), el("small", { text: `chain: ${rb.path.join(" -> ")}` })));
      } else parts.push(el("p", { id: "root-blocker", text: "Nothing it depends on holds it back." }));
      if (answer.topCause) parts.push(el("p", { id: "top-cause" }, "Probable cause: ", answer.topCause.reason));
      why.replaceChildren(...parts);
      why.classList.remove("hidden");
    } catch (e) { /* not shown when the object is gone */ }
  }

  async function loadTimeline() {
    if (!info) return;
    const answer = await get(`${insightBase}/timeline`).catch(() => ({ items: [] }));
    const items = answer.items.slice(-100).reverse();
    timeline.replaceChildren(el("tr", {}, ["When", "Type", "What"].map((t) => el("th", { text: t }))),
      ...items.map((e) => el("tr", { class: `entry-${e.type}` }, el("td", { text: when(e.ts) }), el("td", { text: e.type }), el("td", { text: summary(e) }))));
    if (!items.length) timeline.replaceChildren(el("tr", {}, el("td", { text: "no recorded history (the timeline is kept by setpoint up)" })));
  }

  function rolloutHistory(obj) {
    let box = document.getElementById("rollout-history");
    if (!box) {
      box = el("table", { class: "grid", id: "rollout-history" });
      extra.append(el("h2", { text: "Rollout history" }), box);
    }
    const revisions = [...live.objects.values()].filter((r) => r.kind === "ControllerRevision"
      && (r.metadata.labels || {})["setpoint.dev/deployment"] === name && r.metadata.namespace === obj.metadata.namespace)
      .sort((a, b) => Number(a.revision) - Number(b.revision));
    box.replaceChildren(el("tr", {}, el("th", { text: "Revision" }), el("th", { text: "Change cause" }), el("th", { text: "Created" })),
      ...revisions.map((r) => el("tr", {}, el("td", { text: String(r.revision) }),
        el("td", { text: (r.metadata.annotations || {})["kubernetes.io/change-cause"] || "<none>" }), el("td", { text: age(r.metadata.creationTimestamp) }))));
    box.revisions = revisions;
  }

  async function followLog() {
    if (logShown || !["Process", "Job"].includes(kind)) return;
    logShown = true;
    const pre = el("pre", { class: "log", id: "log" });
    extra.append(el("h2", { text: "Log" }), pre);
    try {
      await streamLines(`${insightBase}/log?tailLines=200&follow=true`, (line) => {
        pre.append(line + "\n");
        while (pre.childNodes.length > 1000) pre.firstChild.remove();
        pre.scrollTop = pre.scrollHeight;
      }, abort.signal);
    } catch (e) { /* aborted when leaving the page */ }
  }

  async function canEdit() {
    if (!info) return false;
    try {
      await request("PATCH", `${resourcePath(info, namespace, name)}?dryRun=All`, "{}", "application/merge-patch+json");
      return true;
    } catch (e) {
      return !(e instanceof ApiError && (e.status === 403 || e.status === 401 || e.status === 405));
    }
  }

  async function act(what, fn) {
    if (!window.confirm(`${what} ${kind}/${name}?`)) return;
    try { await fn(); message.textContent = `${what}: done`; } catch (e) { message.textContent = `${what}: ${e.message}`; }
  }

  async function showActions() {
    if (!(await canEdit())) return;
    const path = resourcePath(info, namespace, name);
    const buttons = [el("button", { type: "button", id: "action-delete", class: "danger", onclick: () => act("Delete", () => request("DELETE", path)) }, "Delete")];
    if (info.scale) {
      const replicas = el("input", { type: "number", min: "0", id: "scale-replicas", value: String(((live.objects.get(key) || {}).spec || {}).replicas ?? 1) });
      buttons.push(replicas, el("button", { type: "button", id: "action-scale", onclick: () => act(`Scale to ${replicas.value}`,
        () => request("PATCH", `${path}/scale`, { spec: { replicas: Number(replicas.value) } }, "application/merge-patch+json")) }, "Scale"));
    }
    if (kind === "Deployment") {
      buttons.push(el("button", { type: "button", id: "action-undo", onclick: () => act("Roll back", async () => {
        const revisions = (document.getElementById("rollout-history") || {}).revisions || [];
        if (revisions.length < 2) throw new Error("no earlier revision");
        const template = revisions[revisions.length - 2].data.template;
        await request("PATCH", path, { spec: { template } }, "application/merge-patch+json");
      }) }, "Rollout undo"));
    }
    actions.replaceChildren(...buttons);
    actions.classList.remove("hidden");
  }

  if (kind === "Thermostat" || kind === "Autoscaler") {
    plot = controlPlot(kind);
    extra.append(el("h2", { text: "Control" }), plot.node);
  }
  const unsubscribe = live.subscribe((changed) => {
    if (!changed.size || changed.has(key) || [...changed].some((k) => k.startsWith("Event/") || k.startsWith("ControllerRevision/"))) render();
  });
  render();
  loadTimeline();
  followLog();
  showActions();
  main.dataset.ready = "true";
  return () => { unsubscribe(); abort.abort(); };
}

export function summary(e) {
  const o = e.object || e.from || {};
  const who = `${o.kind || ""}/${o.name || ""}`;
  if (e.type === "condition") {
    const c = e.condition || {};
    return `${who} ${c.type}=${c.status} ${c.reason || ""} ${c.message || ""}`;
  }
  if (e.type === "event") return `${who} ${e.reason || ""}: ${e.message || ""}`;
  if (e.type === "exit") return `${who} exited ${e.exitCode ?? ""}${e.signal ? " signal " + e.signal : ""} ${e.reason || ""}`;
  if (e.type === "change") return `${who} ${e.action || "changed"}${e.actor ? " by " + e.actor : ""}: ${Object.keys(e.diff || {}).join(", ")}`;
  if (e.type === "write") return `${who} ${e.verb || "write"} by ${e.user || e.manager || "an unnamed writer"}, revision ${e.revision}`;
  if (e.type === "edge") return `${who} -> ${(e.to || {}).kind}/${(e.to || {}).name} ${e.relation || ""}`;
  if (e.type === "log") return `${who}: ${e.line || ""}`;
  return `${who} ${JSON.stringify(e).slice(0, 120)}`;
}
