// Overview: the user's objects first (workloads, Services, Secrets by name, custom kinds;
// the server's own kinds behind the "with the server's kinds" filter), each with its kind,
// namespace, state (Ready / progressing / failed, `-` without a Ready condition), reason
// and age; counts by state; filters (kind, namespace, free text here; label selector on
// the server), in a virtualised list.
import { live } from "./api.js";
import { HEALTH_LABEL, age, el, objectHref, reasonOf, stateOf, systemKinds } from "./util.js";

const ROW = 28;
const COUNTED = ["ready", "progressing", "failed"];
const filters = { kind: "", namespace: "", text: "", selector: "", system: false };
// what a row needs, worked out once per version of an object (an update is a new object)
const rowOf = new WeakMap();
function row(obj) {
  let r = rowOf.get(obj);
  if (!r) {
    const m = obj.metadata;
    const state = stateOf(obj);
    const reason = reasonOf(obj);
    r = { obj, state, reason, sort: `${obj.kind}/${m.name}/${m.namespace || ""}`,
      text: `${obj.kind} ${m.namespace || ""} ${m.name} ${HEALTH_LABEL[state]} ${reason}`.toLowerCase() };
    rowOf.set(obj, r);
  }
  return r;
}

export function showOverview({ main }) {
  const counts = el("div", { class: "counts", id: "counts" });
  const kindSelect = el("select", { id: "filter-kind", "aria-label": "kind" });
  const nsSelect = el("select", { id: "filter-namespace", "aria-label": "namespace" });
  const text = el("input", { id: "filter-text", type: "search", placeholder: "filter", value: filters.text });
  const selector = el("input", { id: "filter-selector", type: "search", placeholder: "label selector (app=web)", value: filters.selector });
  const system = el("input", { id: "filter-system", type: "checkbox", checked: filters.system });
  const systemLabel = el("label", { for: "filter-system", title: "Events, CustomResourceDefinitions, ControllerRevisions, Leases" }, system, " with the server's kinds");
  const viewport = el("div", { class: "viewport", id: "objects" });
  const spacer = el("div", { class: "spacer" });
  const rows = el("div", { class: "rows" });
  viewport.append(spacer, rows);
  main.append(
    el("section", { class: "toolbar" }, kindSelect, nsSelect, selector, text, systemLabel, counts),
    el("div", { class: "row head" }, ["Kind", "Namespace", "Name", "State", "Reason", "Age"].map((t) => el("span", { text: t }))),
    viewport,
  );
  let shown = [];

  function options(select, values, current, all) {
    const wanted = ["", ...values].join("\u0000");
    if (select.dataset.values !== wanted) {
      select.dataset.values = wanted;
      select.replaceChildren(el("option", { value: "", text: all }), ...values.map((v) => el("option", { value: v, text: v })));
    }
    select.value = current;
  }

  function compute() {
    const kinds = new Set();
    const namespaces = new Set();
    const tally = Object.fromEntries(COUNTED.map((s) => [s, 0]));
    const needle = filters.text.toLowerCase();
    const hidden = filters.system || filters.kind ? new Set() : systemKinds();
    shown = [];
    for (const obj of live.objects.values()) {
      const m = obj.metadata;
      kinds.add(obj.kind); // every kind can be chosen, the server's too
      if (hidden.has(obj.kind)) continue;
      if (m.namespace) namespaces.add(m.namespace);
      if (filters.kind && obj.kind !== filters.kind) continue;
      if (filters.namespace && m.namespace !== filters.namespace) continue;
      const r = row(obj);
      if (needle && !r.text.includes(needle)) continue;
      if (r.state in tally) tally[r.state] += 1;
      shown.push(r);
    }
    shown.sort((a, b) => (a.sort < b.sort ? -1 : a.sort > b.sort ? 1 : 0));
    options(kindSelect, [...kinds].sort(), filters.kind, "all kinds");
    options(nsSelect, [...namespaces].sort(), filters.namespace, "all namespaces");
    counts.replaceChildren(
      el("span", { class: "count total", text: `${shown.length} objects` }),
      ...COUNTED.map((s) => el("span", { class: `count state-${s}`, "data-state": s, text: `${HEALTH_LABEL[s]} ${tally[s]}` })),
    );
    spacer.style.height = `${shown.length * ROW}px`;
    paint();
  }

  function paint() {
    const first = Math.max(0, Math.floor(viewport.scrollTop / ROW) - 5);
    const last = Math.min(shown.length, first + Math.ceil(viewport.clientHeight / ROW) + 10);
    rows.style.transform = `translateY(${first * ROW}px)`;
    const out = [];
    for (let i = first; i < last; i++) {
      const { obj, state, reason } = shown[i];
      const m = obj.metadata;
      out.push(el("a", { class: `row state-${state}`, href: objectHref(obj), "data-name": m.name, "data-kind": obj.kind },
        el("span", { text: obj.kind }), el("span", { text: m.namespace || "" }), el("span", { class: "name", text: m.name }),
        el("span", { class: "state", "data-state": state, text: HEALTH_LABEL[state] }), el("span", { class: "reason", text: reason, title: reason }),
        el("span", { text: age(m.creationTimestamp) })));
    }
    rows.replaceChildren(...out);
    main.dataset.ready = "true";
  }

  kindSelect.addEventListener("change", () => { filters.kind = kindSelect.value; compute(); });
  nsSelect.addEventListener("change", () => { filters.namespace = nsSelect.value; compute(); });
  text.addEventListener("input", () => { filters.text = text.value; compute(); });
  system.addEventListener("change", () => { filters.system = system.checked; compute(); });
  selector.addEventListener("change", () => { filters.selector = selector.value.trim(); live.start(filters.selector); });
  viewport.addEventListener("scroll", () => requestAnimationFrame(paint));
  const unsubscribe = live.subscribe(compute);
  if (live.selector !== filters.selector) live.start(filters.selector);
  compute();
  return unsubscribe;
}
