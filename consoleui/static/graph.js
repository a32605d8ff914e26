// eddy console: draws the topology (GET topology.dot) with Graphviz compiled to
// WebAssembly (vendor/graphviz.js, @hpcc-js/wasm-graphviz, see vendor/README.md), and
// redraws it when its labels (the sub-topologies' rates) change.
import { Graphviz } from "./vendor/graphviz.js";

const el = document.getElementById("graph");
let last = "";

async function draw(gv) {
  const r = await fetch(el.dataset.dot, { credentials: "same-origin" });
  if (!r.ok) return;
  const dot = await r.text();
  if (dot === last) return;
  last = dot;
  const svg = new DOMParser().parseFromString(gv.dot(dot), "image/svg+xml").documentElement;
  el.replaceChildren(document.importNode(svg, true));
  el.dataset.nodes = String(el.querySelectorAll("g.node").length);
}

if (el) {
  const gv = await Graphviz.load();
  await draw(gv);
  setInterval(() => { if (!document.hidden) draw(gv).catch(() => {}); }, 5000);
}
