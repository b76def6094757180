// Control view: a live plot of setpoint, measurement and output (Thermostat) or target
// metric, current metric, replicas and the last decision's predicted replicas (Autoscaler,
// `status.lastDecision.prediction`: the predictive algorithm), sampled from each watched update.
import { el, svg } from "./util.js";

const W = 720, H = 240, PAD = 36, KEEP = 600;

function numbers(kind, obj) {
  const spec = obj.spec || {}, status = obj.status || {};
  if (kind === "Thermostat") return [spec.target, status.temperature, status.output];
  const metric = spec.metric || {};
  const target = metric.target ?? metric.targetValue ?? metric.targetAverageValue ?? metric.averageValue;
  const prediction = (status.lastDecision || {}).prediction;
  return [target, status.currentMetric, status.currentReplicas ?? status.desiredReplicas, prediction];
}

export function controlPlot(kind) {
  const names = kind === "Thermostat" ? ["setpoint", "measurement", "output"] : ["target", "metric", "replicas", "prediction"];
  const samples = [];
  const box = el("div", { class: "control", id: "control" });
  const legend = el("div", { class: "legend" }, names.map((n, i) => el("span", { class: `series-${i}`, text: n })));
  const node = el("div", {}, legend, box);
  let lastVersion = "";

  function draw() {
    const root = svg("svg", { width: W, height: H, viewBox: `0 0 ${W} ${H}`, id: "control-svg" });
    const values = samples.flatMap((s) => s.v.filter((v) => typeof v === "number"));
    if (samples.length && values.length) {
      const t0 = samples[0].t, t1 = Math.max(samples[samples.length - 1].t, t0 + 1);
      let lo = Math.min(...values), hi = Math.max(...values);
      if (hi - lo < 1e-9) { lo -= 1; hi += 1; }
      const x = (t) => PAD + ((t - t0) / (t1 - t0)) * (W - 2 * PAD);
      const y = (v) => H - PAD + -((v - lo) / (hi - lo)) * (H - 2 * PAD);
      root.append(svg("text", { x: 2, y: PAD, class: "tick", text: hi.toFixed(1) }), svg("text", { x: 2, y: H - PAD, class: "tick", text: lo.toFixed(1) }));
      names.forEach((_, i) => {
        const pts = samples.filter((s) => typeof s.v[i] === "number").map((s) => `${x(s.t).toFixed(1)},${y(s.v[i]).toFixed(1)}`);
        if (pts.length) root.append(svg("polyline", { points: pts.join(" "), class: `line series-${i}` }));
      });
    }
    box.replaceChildren(root);
  }

  return {
    node,
    sample(obj) {
      if (obj.metadata.resourceVersion === lastVersion) return;
      lastVersion = obj.metadata.resourceVersion;
      if (!samples.length && kind === "Thermostat" && ((obj.status || {}).trace || []).length) {
        // the controller's own trace: [simulated seconds, setpoint, temperature, output]
        for (const row of obj.status.trace) samples.push({ t: row[0], v: [row[1], row[2], row[3]], simulated: true });
      }
      const last = samples[samples.length - 1];
      const t = last && last.simulated ? (obj.status || {}).simulatedSeconds ?? last.t + 1 : Date.now() / 1000;
      samples.push({ t, v: numbers(kind, obj), simulated: last ? last.simulated : false });
      if (samples.length > KEEP) samples.splice(0, samples.length - KEEP);
      draw();
    },
  };
}
