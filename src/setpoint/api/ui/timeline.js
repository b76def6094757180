// Timeline: changes, condition transitions, events and exits on a time axis, one lane per
// object, failures in red (the server's health of each entry) and progress in yellow;
// choosing a failure shows explain's ranked causes and marks their evidence entries on
// the axis. Beside it, the audit trail: who (user, else field
// manager) made which write (verb, object, revision), newest first.
import { INSIGHT, get, live } from "./api.js";
import { el, svg, systemKinds, when } from "./util.js";
import { summary } from "./object.js";

const LANE = 22, LEFT = 230, WIDTH = 1100;

// A failure is what the server says failed (setpoint.insight.health, the CLI's and
// explain's rules): waiting for a dependency, a probe pending or starting is progress.
export function isFailure(e) { return e.health === "failed"; }

// One write of the audit trail; every part is text (textContent), whatever a user is called.
function auditRow(e) {
  const o = e.object || {};
  return el("li", { class: "write", "data-object": refKey(o) },
    el("span", { class: "when", text: when(e.ts).slice(11, 19) }), " ",
    el("span", { class: "user", text: e.user || e.manager || "unnamed writer" }), " ",
    el("span", { class: "verb", text: e.verb || "" }), " ",
    el("span", { class: "object", text: `${o.kind}/${o.name}` }), " ",
    el("span", { class: "revision", text: `rev ${e.revision}` }),
    e.user && e.manager ? el("span", { class: "manager", text: ` (${e.manager})` }) : null);
}

function refKey(o) { return `${o.kind}/${o.namespace || "default"}/${o.name}`; }
function sameEntry(a, b) {
  return a.ts === b.ts && a.type === b.type && refKey(a.object || a.from || {}) === refKey(b.object || b.from || {});
}

export function showTimeline({ main, kinds }) {
  const chart = el("div", { class: "chart", id: "timeline-chart" });
  const failures = el("ul", { class: "failures", id: "failures" });
  const noFailure = el("p", { class: "hint", id: "no-failures", text: "no failure: progress (waiting, starting) is drawn in yellow" });
  const audit = el("ul", { class: "audit", id: "audit" });
  const panel = el("section", { class: "explain", id: "explain" }, el("p", { class: "hint", text: "choose a failure to see its probable causes" }));
  main.append(el("div", { class: "timeline-page" }, el("div", {}, el("h2", { text: "Failures" }), failures, noFailure, el("h2", { text: "Who changed what" }), audit), chart), panel);
  let entries = [];
  let evidence = [];
  let chosen = null;
  let reload = null;

  function draw() {
    const HIDDEN = systemKinds(); // the server's bookkeeping
    const shown = entries.filter((e) => e.type !== "edge" && e.type !== "log" && e.type !== "write" && !HIDDEN.has((e.object || {}).kind));
    const writes = entries.filter((e) => e.type === "write" && !HIDDEN.has((e.object || {}).kind));
    audit.replaceChildren(...writes.reverse().slice(0, 200).map(auditRow));
    const lanes = [...new Set(shown.map((e) => refKey(e.object || {})))].sort();
    if (!shown.length) { chart.replaceChildren(el("p", { class: "hint", text: "nothing recorded yet (the timeline is kept with a sqlite, postgresql or etcd store)" })); return; }
    const t0 = shown[0].ts, t1 = Math.max(shown[shown.length - 1].ts, t0 + 1);
    const x = (ts) => LEFT + ((ts - t0) / (t1 - t0)) * (WIDTH - LEFT - 20);
    const height = 40 + lanes.length * LANE;
    const root = svg("svg", { width: WIDTH, height, viewBox: `0 0 ${WIDTH} ${height}`, id: "timeline-svg" });
    lanes.forEach((lane, i) => {
      root.append(svg("text", { x: 4, y: 30 + i * LANE + 4, class: "lane", text: lane.replace(/\/default\//, "/").slice(0, 34) }),
        svg("line", { x1: LEFT, x2: WIDTH - 10, y1: 30 + i * LANE, y2: 30 + i * LANE, class: "laneline" }));
    });
    for (let i = 0; i <= 4; i++) {
      const ts = t0 + ((t1 - t0) * i) / 4;
      root.append(svg("text", { x: x(ts), y: 14, class: "tick", text: when(ts).slice(11, 19) }));
    }
    for (const e of shown) {
      const lane = lanes.indexOf(refKey(e.object || {}));
      const failed = isFailure(e);
      const marked = evidence.some((c) => sameEntry(c, e));
      const dot = svg("circle", { cx: x(e.ts), cy: 30 + lane * LANE, r: marked ? 7 : failed ? 5 : 3.5,
        class: `dot type-${e.type}${e.health ? " health-" + e.health : ""}${failed ? " failure" : ""}${marked ? " evidence" : ""}`, "data-health": e.health || "" }, svg("title", { text: `${when(e.ts)} ${summary(e)}` }));
      if (failed) dot.addEventListener("click", () => choose(e));
      root.append(dot);
    }
    chart.replaceChildren(root);
    noFailure.classList.toggle("hidden", shown.some(isFailure));
    failures.replaceChildren(...shown.filter(isFailure).reverse().slice(0, 200).map((e) =>
      el("li", {}, el("button", { type: "button", class: chosen && sameEntry(chosen, e) ? "failure chosen" : "failure", "data-object": refKey(e.object || {}), onclick: () => choose(e) },
        `${when(e.ts).slice(11, 19)} ${summary(e)}`))));
    main.dataset.ready = "true";
  }

  async function choose(e) {
    chosen = e;
    const o = e.object || {};
    const info = kinds.get(o.kind);
    panel.replaceChildren(el("h2", { text: `Why did ${o.kind}/${o.name} fail?` }));
    if (!info) { panel.append(el("p", { text: "unknown kind" })); return; }
    const answer = await get(`${INSIGHT}/namespaces/${encodeURIComponent(o.namespace || "default")}/${info.plural}/${encodeURIComponent(o.name)}/explain?at=${e.ts}`);
    evidence = answer.causes.map((c) => c.entry);
    if (!answer.causes.length) panel.append(el("p", { text: "the cause is not known (no candidate scored high enough)" }));
    panel.append(el("ol", { id: "causes" }, answer.causes.map((c, i) =>
      el("li", { class: i === 0 ? "cause top" : "cause" }, el("span", { class: "score", text: c.score.toFixed(3) }), " ", el("span", { class: "reason", text: c.reason }),
        el("div", { class: "entry", text: `${when(c.entry.ts)} ${summary(c.entry)}` })))));
    draw();
  }

  async function load() {
    const answer = await get(`${INSIGHT}/timeline?limit=5000`).catch(() => ({ items: [] }));
    entries = answer.items;
    draw();
  }
  // the recorded timeline grows as objects change: read it again after a change shows
  const unsubscribe = live.subscribe(() => { clearTimeout(reload); reload = setTimeout(load, 1000); });
  load();
  return () => { unsubscribe(); clearTimeout(reload); };
}
