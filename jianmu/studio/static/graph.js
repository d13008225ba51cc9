// Jianmu Studio: a run's behaviour tree as an SVG graph, laid out top-down by this page.
// Each node is a <g data-node="root/plan/execute" data-status="running">; names go in as
// text (textContent), never as markup. It pans (drag), zooms (wheel, buttons), folds
// subtrees (the ▸ under a node) and tells `onSelect` which node was clicked.
"use strict";

import {visible} from "./panels.js";

const SVG = "http://www.w3.org/2000/svg";
const BOX_H = 42;
const GAP_X = 14;
const GAP_Y = 46;
const MIN_W = 96;
const MAX_W = 300;
const FONT = "600 13px system-ui, 'DejaVu Sans', sans-serif";
const SUB_FONT = "11px system-ui, 'DejaVu Sans', sans-serif";
const COMPOSITE_MARK = {sequence: "→", selector: "?", parallel: "⇉", decorator: "◇",
                        skill: "✦", composite: "▣"};

function svg(tag, attrs) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
  return node;
}

const measurers = new Map();  // one canvas per font: setting a font is the costly part
function textWidth(text, font) {
  const wanted = font || FONT;
  let measurer = measurers.get(wanted);
  if (!measurer) {
    measurer = document.createElement("canvas").getContext("2d");
    measurer.font = wanted;
    measurers.set(wanted, measurer);
  }
  return measurer.measureText(text).width;
}

function subText(n) {
  return `${n.kind || "node"} · ${n.status === "invalid" ? "not run" : n.status}`;
}

function fitText(text, room) {
  if (textWidth(text) <= room) return text;
  // the longest start that fits, found by halving: a name of 50,000 characters (a tree, a
  // skill or an agent chose it) costs some 16 measures, not one per character cut
  let fits = 1;
  let over = text.length;
  while (over - fits > 1) {
    const mid = (fits + over) >> 1;
    if (textWidth(text.slice(0, mid) + "…") <= room) fits = mid; else over = mid;
  }
  const cut = text.slice(0, fits);
  return (/[\uD800-\uDBFF]$/.test(cut) ? cut.slice(0, -1) : cut) + "…";  // no half emoji
}

export class Graph {
  constructor(box, onSelect) {
    this.box = box;
    this.onSelect = onSelect;
    this.nodes = [];
    this.byKey = new Map();
    this.folded = new Set();
    this.selected = null;
    this.view = {x: 20, y: 20, k: 1};
    this.fitted = false;
    // a group, not an image: an image's children are hidden from a screen reader, and the
    // nodes and folds inside are controls (Tab reaches them, Enter opens or folds)
    this.svg = svg("svg", {class: "graph-svg", role: "group", "aria-label": "the run's tree"});
    this.layer = svg("g", {class: "viewport"});
    this.svg.append(this.layer);
    box.replaceChildren(this.svg);
    // the box's width is read once and then told by an observer: reading it while the page
    // changes would make the browser lay the whole page out again
    this.width = box.clientWidth || 800;
    new ResizeObserver((seen) => { this.width = seen[0].contentRect.width || this.width; })
      .observe(box);
    this._panZoom();
  }

  // -- data ---------------------------------------------------------------------------------
  update(nodes) {
    const same = nodes.length === this.nodes.length &&
      nodes.every((n, i) => this.nodes[i].key === n.key && this.nodes[i].name === n.name);
    this.nodes = nodes;
    this.byKey = new Map(nodes.map((n) => [n.key, n]));
    if (!same) {
      this.draw();
      return;
    }
    for (const n of nodes) {
      const g = this.groups.get(n.key);
      if (g && g.getAttribute("data-status") !== n.status) this._status(g, n);
    }
  }

  // -- drawing ------------------------------------------------------------------------------
  draw() {
    const kids = new Map();
    for (const n of this.nodes) {
      if (!n.parent) continue;
      if (!kids.has(n.parent)) kids.set(n.parent, []);
      kids.get(n.parent).push(n);
    }
    const root = this.nodes.find((n) => !n.parent);
    this.layer.replaceChildren();
    this.groups = new Map();
    if (!root) {
      const empty = svg("text", {x: 10, y: 24, class: "empty"});
      empty.textContent = "no nodes recorded";
      this.layer.append(empty);
      return;
    }
    const widths = new Map();
    const label = new Map();
    for (const n of this.nodes) {
      const composite = kids.has(n.key) || n.kind in COMPOSITE_MARK;
      const mark = composite ? (COMPOSITE_MARK[n.kind] || "▣") + " " : "";
      const text = mark + visible(n.name);  // a bidi override shown, not obeyed
      // room for the status line at its longest ("suspended")
      const sub = textWidth(`${n.kind || "node"} · suspended`, SUB_FONT);
      const w = Math.min(MAX_W, Math.max(MIN_W, textWidth(text) + 24, sub + 22));
      widths.set(n.key, w);
      label.set(n.key, fitText(text, w - 18));
    }
    const span = new Map();
    const measure = (n) => {
      const children = this.folded.has(n.key) ? [] : (kids.get(n.key) || []);
      let total = 0;
      for (const c of children) total += measure(c) + GAP_X;
      const wide = Math.max(widths.get(n.key), total - GAP_X);
      span.set(n.key, wide);
      return wide;
    };
    measure(root);
    const edges = svg("g", {class: "edges"});
    const boxes = svg("g", {class: "nodes"});
    this.layer.append(edges, boxes);
    const place = (n, left, depth) => {
      const wide = span.get(n.key);
      const w = widths.get(n.key);
      const cx = left + wide / 2;
      const y = depth * (BOX_H + GAP_Y);
      const children = kids.get(n.key) || [];
      const open = children.length && !this.folded.has(n.key);
      // a node before its children: the Tab key goes down the tree from its root
      boxes.append(this._node(n, cx - w / 2, y, w, label.get(n.key), children.length, open));
      if (open) {
        let total = -GAP_X;
        for (const c of children) total += span.get(c.key) + GAP_X;
        let x = cx - total / 2;
        for (const c of children) {
          const ccx = place(c, x, depth + 1);
          const top = (depth + 1) * (BOX_H + GAP_Y);
          const mid = y + BOX_H + GAP_Y / 2;
          edges.append(svg("path", {class: "edge", d: `M${cx},${y + BOX_H} C${cx},${mid} ` +
                                    `${ccx},${mid} ${ccx},${top}`}));
          x += span.get(c.key) + GAP_X;
        }
      }
      return cx;
    };
    place(root, 0, 0);
    this.size = {w: span.get(root.key), h: this._depth(root, kids) * (BOX_H + GAP_Y)};
    if (!this.fitted) {
      this.fitted = true;
      this.fit();
    } else {
      this._apply();
    }
  }

  _depth(n, kids) {
    const children = this.folded.has(n.key) ? [] : (kids.get(n.key) || []);
    return 1 + Math.max(0, ...children.map((c) => this._depth(c, kids)));
  }

  _node(n, x, y, w, text, childCount, open) {
    // a button (Enter opens its details), named by its <title>: path, type and status
    const g = svg("g", {class: "node", transform: `translate(${x},${y})`, tabindex: 0,
                        role: "button"});
    g.setAttribute("data-node", n.path);
    g.setAttribute("data-key", n.key);
    g.setAttribute("data-kind", n.kind);
    const title = svg("title");
    g.append(title, svg("rect", {class: "box", width: w, height: BOX_H, rx: 7}));
    const name = svg("text", {class: "name", x: 9, y: 17});
    name.textContent = text;
    const sub = svg("text", {class: "sub", x: 9, y: 34});
    g.append(name, sub);
    if (childCount) {
      const fold = svg("g", {class: "fold", transform: `translate(${w / 2},${BOX_H + 4})`});
      fold.append(svg("circle", {r: 8}));
      const mark = svg("text", {y: 4, "text-anchor": "middle"});
      mark.textContent = open ? "▾" : `▸${childCount}`;
      fold.append(mark);
      // a button for the keyboard too (Tab to it, Enter or Space), focused again once redrawn
      fold.setAttribute("tabindex", "0");
      fold.setAttribute("role", "button");
      fold.setAttribute("aria-label", `${open ? "fold" : "unfold"} ${visible(n.name)}`);
      const toggle = (keyboard) => {
        if (this.folded.has(n.key)) this.folded.delete(n.key); else this.folded.add(n.key);
        this.draw();
        const again = this.groups.get(n.key);
        if (keyboard && again) again.querySelector(":scope > g.fold").focus();
      };
      fold.addEventListener("click", (event) => {
        event.stopPropagation();
        toggle(false);
      });
      fold.addEventListener("keydown", (event) => {
        if (event.key !== "Enter" && event.key !== " ") return;
        event.preventDefault();  // no scrolling on Space
        event.stopPropagation();  // the node's own Enter selects it
        toggle(true);
      });
      g.append(fold);
    }
    g.addEventListener("click", () => this.select(n.key));
    g.addEventListener("keydown", (event) => { if (event.key === "Enter") this.select(n.key); });
    this.groups.set(n.key, g);
    this._status(g, n);
    if (this.selected === n.key) g.classList.add("selected");
    return g;
  }

  _status(g, n) {
    g.setAttribute("data-status", n.status);
    g.querySelector(":scope > text.sub").textContent = subText(n);
    g.querySelector(":scope > title").textContent =
      `${visible(n.path)}\n${n.type || n.kind} · ${n.status}`;
  }

  select(key) {
    this.selected = key;
    for (const g of this.layer.querySelectorAll("g.node.selected")) g.classList.remove("selected");
    const g = this.groups && this.groups.get(key);
    if (g) g.classList.add("selected");
    if (this.onSelect) this.onSelect(key);
  }

  // -- pan and zoom -------------------------------------------------------------------------
  _apply() {
    const {x, y, k} = this.view;
    this.layer.setAttribute("transform", `translate(${x},${y}) scale(${k})`);
  }

  fit() {
    const size = this.size || {w: 1, h: 1};
    const width = this.width;
    // a small tree gets a small box; a big one the most the page gives a graph
    const height = Math.round(Math.max(260, Math.min(460, size.h + 40)));
    this.box.style.height = height + "px";
    this.height = height;
    const k = Math.max(0.35, Math.min(1.2, (width - 40) / size.w, (height - 30) / size.h));
    const x = size.w * k < width ? (width - size.w * k) / 2 : 20;
    this.view = {x, y: 16, k};
    this._apply();
  }

  zoom(factor, cx, cy) {
    const {x, y, k} = this.view;
    const next = Math.max(0.1, Math.min(4, k * factor));
    const px = cx === undefined ? this.width / 2 : cx;
    const py = cy === undefined ? (this.height || 400) / 2 : cy;
    this.view = {x: px - (px - x) * (next / k), y: py - (py - y) * (next / k), k: next};
    this._apply();
  }

  _panZoom() {
    let drag = null;
    this.svg.addEventListener("pointerdown", (event) => {
      if (event.target.closest("g.node")) return;
      drag = {x: event.clientX, y: event.clientY, vx: this.view.x, vy: this.view.y};
      this.svg.setPointerCapture(event.pointerId);
      this.svg.classList.add("dragging");
    });
    this.svg.addEventListener("pointermove", (event) => {
      if (!drag) return;
      this.view = {...this.view, x: drag.vx + event.clientX - drag.x,
                   y: drag.vy + event.clientY - drag.y};
      this._apply();
    });
    const stop = () => { drag = null; this.svg.classList.remove("dragging"); };
    this.svg.addEventListener("pointerup", stop);
    this.svg.addEventListener("pointercancel", stop);
    this.svg.addEventListener("wheel", (event) => {
      event.preventDefault();
      const rect = this.svg.getBoundingClientRect();
      this.zoom(event.deltaY < 0 ? 1.15 : 1 / 1.15, event.clientX - rect.left,
                event.clientY - rect.top);
    }, {passive: false});
  }
}
