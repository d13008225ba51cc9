// Jianmu Studio: the run page's panels — the timeline (grouped by point), the state as
// collapsible JSON with the keys changed at a point marked, a node's details, a pending
// request. Everything from a run goes in as text (textContent), never as markup.
"use strict";

export function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

const two = (n) => String(n).padStart(2, "0");

// What Python's str.isprintable() calls non-printable (controls such as ANSI escapes,
// bidi overrides, zero-width and other spaces, line separators, private and unassigned
// characters) as JSON escapes, lines, tabs and the plain space kept: the page shows what the
// text holds, as the server does (jianmu/_text.py).
// The zero-width joiners a script needs are kept where it needs them, as the server keeps them
// (jianmu/_text.py says which): after a virama, the non-joiner between two letters of a joining
// script, the joiner between two pictographs; anywhere else they hide, and are escaped.
const HIDDEN = /[\p{Cc}\p{Cf}\p{Cs}\p{Co}\p{Cn}\p{Zl}\p{Zp}\p{Zs}]/gu;
const VIRAMAS = new Set([
  0x094D, 0x09CD, 0x0A4D, 0x0ACD, 0x0B4D, 0x0BCD, 0x0C4D, 0x0CCD, 0x0D3B, 0x0D3C, 0x0D4D,
  0x0DCA, 0x0E3A, 0x0EBA, 0x0F84, 0x1039, 0x103A, 0x1714, 0x1715, 0x1734, 0x17D2, 0x1A60,
  0x1B44, 0x1BAA, 0x1BAB, 0x1BF2, 0x1BF3, 0x2D7F, 0xA806, 0xA82C, 0xA8C4, 0xA953, 0xA9C0,
  0xAAF6, 0xABED]);
const pictograph = (code) => (code >= 0x2600 && code <= 0x27BF) ||
  (code >= 0x2B00 && code <= 0x2BFF) || (code >= 0x1F000 && code <= 0x1FAFF);
const joining = (code) => (code >= 0x0600 && code <= 0x08FF && !(code >= 0x07B2 && code <= 0x07BF)) ||
  (code >= 0xFB50 && code <= 0xFDFF) || (code >= 0xFE70 && code <= 0xFEFF);
function before(text, at) {  // the code point that ends at UTF-16 offset `at`, or -1
  if (at <= 0) return -1;
  const unit = text.charCodeAt(at - 1);
  if (unit >= 0xDC00 && unit <= 0xDFFF && at >= 2) {
    const code = text.codePointAt(at - 2);
    if (code > 0xFFFF) return code;
  }
  return unit;
}
function needed(c, at, text) {  // whether the joiner `c` at `at` is one its script needs
  let prev = before(text, at);
  const next = at + 1 < text.length ? text.codePointAt(at + 1) : -1;
  if (VIRAMAS.has(prev)) return true;
  if (c === "\u200d") {
    if (prev === 0xFE0F) prev = before(text, at - 1);  // an emoji's presentation selector
    return pictograph(prev) && pictograph(next);
  }
  return joining(prev) && joining(next);
}
export function visible(text) {
  return String(text).replace(HIDDEN, (c, at, whole) => {
    if (c === "\n" || c === "\t" || c === " ") return c;
    if ((c === "\u200c" || c === "\u200d") && needed(c, at, whole)) return c;
    let out = "";
    for (let i = 0; i < c.length; i++) out += "\\u" + c.charCodeAt(i).toString(16).padStart(4, "0");
    return out;
  });
}

// A run's JSON as the page reads it: a whole number past 2**53 (an account, an id) kept as
// a BigInt from its source text, where a JavaScript number would round it (the server writes
// it exactly). Browsers without the source text (before JSON.parse's context) round as before.
// Text with no run of 16 digits holds no such number and is read the plain (fast) way.
const LONG_DIGITS = /\d{16}/;
let bigSeen = false;  // whether a BigInt was read: only then is writing one slower
export function readJSON(text) {
  if (!LONG_DIGITS.test(text)) return JSON.parse(text);
  return JSON.parse(text, (key, value, context) => {
    if (typeof value === "number" && !Number.isSafeInteger(value) && context &&
        /^-?\d+$/.test(context.source || "")) {
      bigSeen = true;
      return BigInt(context.source);
    }
    return value;
  });
}

// JSON text of what `readJSON` read, its BigInts written as the numbers they are.
export function writeJSON(value, indent) {
  if (!bigSeen) return JSON.stringify(value, null, indent);
  return JSON.stringify(value, (key, v) => (typeof v !== "bigint" ? v
    : (JSON.rawJSON ? JSON.rawJSON(v.toString()) : v.toString())), indent);
}

export function clock(stamp) {  // HH:MM:SS.mmm (toLocaleTimeString costs ~0.1 ms a call)
  if (!stamp) return "";
  const d = new Date(stamp * 1000);
  return `${two(d.getHours())}:${two(d.getMinutes())}:${two(d.getSeconds())}.` +
    String(d.getMilliseconds()).padStart(3, "0");
}

// -- the timeline ----------------------------------------------------------------------------
function entryItem(item) {
  const li = el("li", `entry entry-${item.kind} depth-${Math.min(item.depth || 0, 4)}`);
  li.append(el("span", "title", item.title));
  if (item.node) li.title = visible(item.node);
  if (item.text) li.append(breakable("pre", "text", item.text));
  return li;
}

// One <li data-point=N> per point, its entries under it in the order they happened; entries
// that belong to no point (a run that kept none, a call still running) are listed on their own.
// A live run's timeline grows by a few entries an update: what is drawn already is kept (found
// by what it shows), and only what is new or changed is drawn and put in place.
const SHOWS = new WeakMap();  // a drawn timeline item -> the JSON text of what it shows

export function drawTimeline(list, entries, points) {
  const drawn = new Map();  // what each kept item shows -> the items showing it
  for (const item of Array.from(list.children)) {
    const key = SHOWS.get(item);
    if (key === undefined) continue;
    if (!drawn.has(key)) drawn.set(key, []);
    drawn.get(key).push(item);
  }
  const reuse = (key, make) => {
    const kept = drawn.get(key);
    const item = kept && kept.length ? kept.shift() : make();
    SHOWS.set(item, key);
    return item;
  };
  const loose = (item) => reuse(writeJSON(item), () => entryItem(item));
  const items = [];
  if (!points.length) {
    for (const item of entries) items.push(loose(item));
  } else {
    const byPoint = new Map();
    const apart = [];  // of no point, or of the point a running call will lead to (not made yet)
    const known = new Set(points.map((p) => p.n));
    for (const item of entries) {
      if (!known.has(item.point)) apart.push(item);
      else {
        if (!byPoint.has(item.point)) byPoint.set(item.point, []);
        byPoint.get(item.point).push(item);
      }
    }
    let next = 0;
    for (const p of points) {
      while (next < apart.length && (apart[next].time || 0) <= p.time) {
        items.push(loose(apart[next++]));
      }
      const said = byPoint.get(p.n) || [];
      items.push(reuse(writeJSON([p, said]), () => pointGroup(p, said)));
    }
    while (next < apart.length) items.push(loose(apart[next++]));
  }
  const wanted = new Set(items);
  for (const old of Array.from(list.children)) if (!wanted.has(old)) old.remove();
  items.forEach((item, i) => {  // in order, moving only what must move
    if (list.children[i] !== item) list.insertBefore(item, list.children[i] || null);
  });
}

function pointGroup(p, said) {
  const group = el("li", "point-group");
  group.dataset.point = String(p.n);
  const head = el("div", "point-head");
  head.append(el("span", "point", String(p.n)), el("span", "when", clock(p.time)));
  if (!said.length) {  // node names: a long one breaks within the list, not past its edge
    const changes = el("span", "changes");
    appendBreakable(changes, p.label);
    head.append(changes);
  }
  group.append(head);
  if (said.length) {
    const ul = el("ol", "entries");
    ul.append(...said.map(entryItem));
    group.append(ul);
  }
  return group;
}

// -- the state -------------------------------------------------------------------------------
// ``changed`` holds the state keys changed at the shown point: "key" (root), "ns/key", "ns/*".
function marks(changed) {
  const out = new Set();
  for (const full of changed || []) {
    const cut = full.lastIndexOf("/");
    if (cut < 0) out.add("root\u0000" + full);
    else {
      const ns = full.slice(0, cut);
      const key = full.slice(cut + 1);
      out.add(key === "*" ? "namespaces\u0000" + ns : "namespaces\u0000" + ns + "\u0000" + key);
    }
  }
  return out;
}

const BATCH = 500;  // how many items of an object or list are drawn at a time

function drawValue(value, key, path, marked, depth) {
  const here = path.join("\u0000");
  const wrap = el("span", marked.has(here) ? "changed" : null);
  const label = key === null ? null : el("span", "key", visible(key));
  if (value !== null && typeof value === "object") {
    const entries = Array.isArray(value) ? value.map((v, i) => [String(i), v])
                                         : Object.entries(value);
    const details = el("details");
    const summary = el("summary");
    if (label) summary.append(label, ": ");
    summary.append(el("span", "kind", Array.isArray(value) ? `[${entries.length}]`
                                                          : `{${entries.length}}`));
    details.append(summary);
    const inside = [...marked].some((m) => m.startsWith(here + "\u0000"));
    let filled = false;
    const fill = () => {  // children are built when first opened: a long state stays light
      if (filled) return;
      filled = true;
      const ul = el("ul");
      let next = 0;
      const more = el("li");
      const button = el("button", "more");
      button.type = "button";
      more.append(button);
      const draw = () => {  // a part at a time: a list of 50,000 drawn at once froze the page
        const stop = Math.min(entries.length, next + BATCH);
        const items = [];
        for (; next < stop; next++) {
          const [k, v] = entries[next];
          const li = el("li");
          li.append(drawValue(v, k, [...path, k], marked, depth + 1));
          items.push(li);
        }
        more.before(...items);
        const left = entries.length - next;
        if (left) button.textContent = `show ${Math.min(BATCH, left)} more (${left} not shown)`;
        else more.remove();
      };
      button.addEventListener("click", draw);
      ul.append(more);
      draw();
      details.append(ul);
    };
    details.addEventListener("toggle", () => { if (details.open) fill(); });
    if (depth < 2 || inside) {
      details.open = true;
      fill();
    }
    wrap.append(details);
    return wrap;
  }
  if (label) wrap.append(label, ": ");
  wrap.append(breakable("span", "value", visible(writeJSON(value))));
  return wrap;
}

export function drawState(box, state, changed) {
  const marked = marks(changed);
  const parts = [];
  if (changed && changed.length) {
    // state keys a node chose (and namespaces): hidden characters shown, as in the tree below
    parts.push(el("p", "changed-keys", "changed here: " + changed.map(visible).join(", ")));
  }
  if (state && typeof state === "object" && "root" in state) {
    parts.push(drawValue(state.root, "root", ["root"], marked, 1));
    const spaces = state.namespaces || {};
    if (Object.keys(spaces).length) {
      parts.push(drawValue(spaces, "namespaces", ["namespaces"], marked, 1));
    }
  } else {
    parts.push(drawValue(state, null, [], marked, 0));
  }
  box.replaceChildren(...parts);
}

// -- a node's details ------------------------------------------------------------------------
// Chromium lays out a word of thousands of characters wrapped at any point (break-word) in
// time that grows with its square: a node path of 50,000 characters froze the page for
// seconds on a click. A <wbr> every 64 characters inside such words gives the lines places to
// break; the text (copied, read) is the same.
const LONG_WORD = /\S{65,}/gu;
export function appendBreakable(node, text) {
  if (text.length < 65) {  // no word that long: most of a timeline's texts
    node.append(text);
    return;
  }
  let at = 0;
  for (const found of text.matchAll(LONG_WORD)) {
    node.append(text.slice(at, found.index));
    const pieces = found[0].match(/[\s\S]{1,64}/gu);  // whole code points, never half a pair
    pieces.forEach((piece, i) => (i ? node.append(el("wbr"), piece) : node.append(piece)));
    at = found.index + found[0].length;
  }
  node.append(text.slice(at));
}

// An element holding ``text`` with its long words breakable (`appendBreakable`): a tool's
// arguments, a result or an answer may be one word of 200,000 characters (base64, a JSON
// string of many lines), which took seconds to lay out each time it was drawn.
export function breakable(tag, cls, text) {
  const node = el(tag, cls);
  appendBreakable(node, String(text));
  return node;
}

function row(dl, term, value) {
  if (value === undefined || value === null || value === "" ||
      (Array.isArray(value) && !value.length)) return;
  const dd = el("dd");
  appendBreakable(dd, String(Array.isArray(value) ? value.join(", ") : value));
  dl.append(el("dt", null, term), dd);
}

const CALL_KINDS = ["call", "result", "error", "ask", "decision", "guard", "model"];

export function drawDetails(box, node, entries) {
  if (!node) {
    box.replaceChildren(el("p", "hint", "Click a node for its details."));
    return;
  }
  const dl = el("dl");
  row(dl, "path", visible(node.path));
  row(dl, "kind", node.kind);
  row(dl, "type", node.type);
  row(dl, "status", node.status === "invalid" ? "not run (invalid)"
    : node.status === "stopped" ? "stopped: running when the run ended" : node.status);
  row(dl, "namespace", node.namespace ? visible(node.namespace) : "(the root state)");
  row(dl, "reads", (node.reads || []).map(visible));
  row(dl, "writes", (node.writes || []).map(visible));
  const head = el("h3", "node-name");  // a long name wraps in the panel, as its path does
  appendBreakable(head, visible(node.name));
  const parts = [head, dl];
  if (node.error) {
    parts.push(el("h4", null, "last error"), breakable("pre", "error", node.error));
  }
  // a sub-agent's turns and calls are made by the nodes of its own tree, which hangs at
  // "<its path>[<call>]/..." (the agent tool's call): all of them are the agent's
  const inside = node.kind === "agent" ? node.path + "[" : null;
  const own = entries.filter((e) => CALL_KINDS.includes(e.kind) && (e.node === node.path ||
    (inside !== null && String(e.node || "").startsWith(inside))));
  parts.push(el("h4", null, own.length ? "tool calls and turns" : "no tool calls recorded"));
  if (own.length) {
    const ol = el("ol", "node-calls");
    for (const e of own) {
      const li = el("li", "entry entry-" + e.kind);
      if (e.point !== null && e.point !== undefined) li.append(el("span", "point", e.point));
      li.append(el("span", "title", e.title));
      if (e.text) li.append(breakable("pre", "text", e.text));
      ol.append(li);
    }
    parts.push(ol);
  }
  box.replaceChildren(...parts);
}

// -- a pending request -----------------------------------------------------------------------
function drawQuestion(r) {
  // a question the run asks (ask_user, AskUser): its text and a box for the answer
  const box = el("div", "request question");
  box.dataset.id = r.id;
  box.dataset.kind = "question";
  const call = visible(r.id);  // each control names its question (as the server draws it)
  box.setAttribute("role", "group");
  box.setAttribute("aria-label", `question ${call}`);
  const h = el("h3");
  h.append(el("span", "tool", "question"), " ", el("code", "call-id", visible(r.id)));
  box.append(h);
  if (r.asker) box.append(el("p", "asker", "asked by the sub-agent " + r.asker));
  box.append(breakable("p", "question-text", r.question));
  const actions = el("div", "actions");
  const text = el("textarea", "answer-text");
  text.rows = 3;
  text.placeholder = "your answer (the run reads it)";
  text.setAttribute("aria-label", `your answer to ${call}`);
  const answer = el("button", "answer", "Answer");
  answer.type = "button";
  answer.setAttribute("aria-label", `Answer ${call}`);
  actions.append(text, answer);
  box.append(actions);
  return box;
}

// The edit box of a request's box, filled with its arguments (as the box shows them) when
// first opened: a text area of 200 KB of arguments cost the page a second to load, opened or
// not. Its default value is them: `decision` sends an edit only when it differs.
export function fillEdit(box) {
  const area = box && box.querySelector("textarea.edit-arguments");
  if (!area || area.dataset.filled) return;
  area.dataset.filled = "1";
  area.defaultValue = box.querySelector("pre.arguments").textContent;
}

export function drawRequest(r) {
  if (r.kind === "question") return drawQuestion(r);
  const box = el("div", "request");
  box.dataset.id = r.id;
  // each control names its call (several may wait): "Approve" alone, read by a screen
  // reader, does not say which call it lets run (as the server draws it)
  const call = `${r.tool} ${visible(r.id)}`;
  box.setAttribute("role", "group");
  box.setAttribute("aria-label", `approval: ${call}`);
  const h = el("h3");
  h.append(el("span", "tool", r.tool), " ", el("code", "call-id", visible(r.id)));
  box.append(h, breakable("p", "summary", r.summary));
  const why = el("p", "why", "why: " + r.reason);
  if (r.rule) why.append(" ", el("span", "rule", "(rule " + r.rule + ")"));
  box.append(why, el("h4", null, "arguments"), breakable("pre", "arguments", r.arguments));
  if (r.details) box.append(el("h4", null, "details"), breakable("pre", "details", r.details));
  const edit = el("details", "edit");
  const area = el("textarea", "edit-arguments");  // filled when opened (`fillEdit`)
  area.rows = 6;
  area.spellcheck = false;
  area.setAttribute("aria-label", `arguments of ${call} (JSON: edit, then approve)`);
  edit.append(el("summary", null, "edit the arguments, then approve"), area);
  box.append(edit);
  const actions = el("div", "actions");
  const approve = el("button", "approve", "Approve");
  approve.type = "button";
  approve.setAttribute("aria-label", `Approve ${call}`);
  const reason = el("input", "reason");
  reason.type = "text";
  reason.placeholder = "reason (the model sees it)";
  reason.setAttribute("aria-label", `reason for ${call} (the model sees it)`);
  const reject = el("button", "reject", "Reject");
  reject.type = "button";
  reject.setAttribute("aria-label", `Reject ${call}`);
  actions.append(approve, reason, reject);
  box.append(actions);
  return box;
}
