// Jianmu Studio: a run page follows its run through server-sent events.
// Run data only ever goes into the page as text (textContent), never as markup.
"use strict";

const FINISHED = ["success", "failure", "timeout", "cancelled"];

function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

function setStatus(node, prefix, status) {
  for (const c of Array.from(node.classList)) {
    if (c.startsWith(prefix)) node.classList.remove(c);
  }
  node.classList.add(prefix + status);
}

function drawRequest(r) {
  const box = el("div", "request");
  box.dataset.id = r.id;
  const h = el("h3");
  h.append(el("span", "tool", r.tool), " ", el("code", "call-id", r.id));
  box.append(h, el("p", "summary", r.summary));
  const why = el("p", "why", "why: " + r.reason);
  if (r.rule) why.append(" ", el("span", "rule", "(rule " + r.rule + ")"));
  box.append(why, el("h4", null, "arguments"), el("pre", "arguments", r.arguments));
  if (r.details) box.append(el("h4", null, "details"), el("pre", "details", r.details));
  const actions = el("div", "actions");
  const approve = el("button", "approve", "Approve");
  approve.type = "button";
  const reason = el("input", "reason");
  reason.type = "text";
  reason.placeholder = "reason (the model sees it)";
  const reject = el("button", "reject", "Reject");
  reject.type = "button";
  actions.append(approve, reason, reject);
  box.append(actions);
  return box;
}

function drawTree(nodes) {
  const children = {};
  for (const n of nodes) {
    const parent = n.key.includes("/") ? n.key.slice(0, n.key.lastIndexOf("/")) : "";
    (children[parent] = children[parent] || []).push(n);
  }
  function draw(parent) {
    const kids = children[parent] || [];
    if (!kids.length) return null;
    const ul = el("ul");
    for (const n of kids) {
      const li = el("li", "node node-" + n.status);
      li.dataset.key = n.key;
      li.append(el("span", "dot"), el("span", "name", n.name), " ",
                el("span", "node-status", n.status));
      const sub = draw(n.key);
      if (sub) li.append(sub);
      ul.append(li);
    }
    return ul;
  }
  return draw("") || el("p", "empty", "no nodes recorded");
}

function updateTree(box, nodes) {
  const shown = Array.from(box.querySelectorAll("li.node")).map((li) => li.dataset.key);
  if (shown.sort().join(",") !== nodes.map((n) => n.key).sort().join(",")) {
    box.replaceChildren(drawTree(nodes));
    return;
  }
  for (const n of nodes) {
    const li = box.querySelector('li.node[data-key="' + CSS.escape(n.key) + '"]');
    if (!li) continue;
    setStatus(li, "node-", n.status);
    li.querySelector(":scope > .node-status").textContent = n.status;
  }
}

function drawJSON(value, key, depth) {
  const frag = el("span");
  const label = key === null ? null : el("span", "key", key);
  if (value !== null && typeof value === "object") {
    const entries = Array.isArray(value) ? value.map((v, i) => [String(i), v])
                                         : Object.entries(value);
    const details = el("details");
    details.open = depth < 2;
    const summary = el("summary");
    if (label) summary.append(label, ": ");
    summary.append(el("span", "kind", Array.isArray(value) ? "[" + entries.length + "]"
                                                            : "{" + entries.length + "}"));
    const ul = el("ul");
    for (const [k, v] of entries) {
      const li = el("li");
      li.append(drawJSON(v, k, depth + 1));
      ul.append(li);
    }
    details.append(summary, ul);
    return details;
  }
  if (label) frag.append(label, ": ");
  frag.append(el("span", "value", JSON.stringify(value)));
  return frag;
}

function drawTimeline(items) {
  const out = [];
  for (const item of items) {
    const li = el("li", "entry entry-" + item.kind);
    li.append(el("span", "title", item.title));
    for (const k of ["guard", "decision"]) if (item[k]) li.append(el("p", k, item[k]));
    if (item.text) li.append(el("pre", "text", item.text));
    out.push(li);
  }
  return out;
}

function follow(main) {
  const source = main.dataset.source;
  const run = main.dataset.run;
  const base = "/run/" + encodeURIComponent(source) + "/" + encodeURIComponent(run);
  const csrf = document.querySelector('meta[name="csrf"]').content;
  const live = document.getElementById("live");
  const said = document.getElementById("decision-msg");
  let lastState = null;

  function show(view) {
    const status = document.getElementById("status");
    status.textContent = view.status;
    setStatus(status, "status-", view.status);
    main.dataset.status = view.status;
    document.getElementById("note").textContent = view.note || "";
    document.getElementById("error").textContent = view.error || "";
    const result = view.result === null || view.result === undefined ? "" :
      (typeof view.result === "string" ? view.result : JSON.stringify(view.result, null, 2));
    document.getElementById("result").textContent = result;
    document.getElementById("pending").replaceChildren(...view.pending.map(drawRequest));
    updateTree(document.getElementById("tree"), view.nodes);
    document.getElementById("timeline").replaceChildren(...drawTimeline(view.timeline));
    const state = JSON.stringify(view.state);
    if (state !== lastState) {
      lastState = state;
      document.getElementById("state").replaceChildren(drawJSON(view.state, null, 0));
    }
  }

  let stream = null;
  function connect() {
    stream = new EventSource("/stream" + base);
    stream.onopen = () => { live.textContent = "live"; };
    stream.onmessage = (message) => {
      const view = JSON.parse(message.data);
      show(view);
      if (FINISHED.includes(view.status)) {
        stream.close();
        live.textContent = "finished";
      }
    };
    stream.onerror = () => { live.textContent = "reconnecting…"; };
  }
  connect();

  document.getElementById("pending").addEventListener("click", async (event) => {
    const button = event.target.closest("button");
    if (!button) return;
    const box = button.closest(".request");
    const approve = button.classList.contains("approve");
    const reason = box.querySelector("input.reason").value;
    for (const b of box.querySelectorAll("button")) b.disabled = true;
    said.textContent = (approve ? "approving " : "rejecting ") + box.dataset.id + "…";
    const answer = await fetch(base + "/" + (approve ? "approve" : "reject"), {
      method: "POST", credentials: "same-origin",
      headers: {"Content-Type": "application/json", "X-CSRF-Token": csrf},
      body: JSON.stringify({call_id: box.dataset.id, message: reason || null}),
    });
    const body = await answer.json().catch(() => ({error: "HTTP " + answer.status}));
    said.textContent = body.ok ? body.message : "refused: " + body.error;
    if (!body.ok) for (const b of box.querySelectorAll("button")) b.disabled = false;
    if (stream && stream.readyState === EventSource.CLOSED) connect();
  });
}

document.addEventListener("DOMContentLoaded", () => {
  const main = document.getElementById("run");
  if (main) follow(main);
});
