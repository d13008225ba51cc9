// Jianmu Studio: a run page follows its run through server-sent events, draws its tree,
// travels back to any recorded point (the time slider, a click on the timeline) and forks
// a new run from there. Run data only ever goes into the page as text, never as markup.
"use strict";

import {Graph} from "./graph.js";
import {applyPatch} from "./patch.js";
import {appendBreakable, clock, drawDetails, drawRequest, drawState, drawTimeline, fillEdit,
        readJSON, visible, writeJSON} from "./panels.js";

const FINISHED = ["success", "failure", "timeout", "cancelled"];

function setStatus(node, prefix, status) {
  for (const c of Array.from(node.classList)) {
    if (c.startsWith(prefix)) node.classList.remove(c);
  }
  node.classList.add(prefix + status);
}

const NO_ANSWER = "the studio did not answer (stopped?): try again once it is back (a " +
  "decision already taken is not taken twice)";

// POST a JSON body with the page's CSRF token; the server's answer, or one saying there was
// none (the studio stopped): the page always hears back, so its buttons work again
async function post(url, body, csrf) {
  let answer;
  try {
    answer = await fetch(url, {
      method: "POST", credentials: "same-origin",
      headers: {"Content-Type": "application/json", "X-CSRF-Token": csrf},
      body: JSON.stringify(body),
    });
  } catch (error) {
    return {error: NO_ANSWER};
  }
  // the studio's own refusals (a token it no longer holds, a server error) are plain text:
  // said as they are, not as a bare status
  const text = (await answer.text().catch(() => "")).trim();
  try {
    return JSON.parse(text);
  } catch (error) {
    const status = String(answer.status);
    return {error: text.startsWith(status) ? text : `HTTP ${status}` + (text ? `: ${text}` : "")};
  }
}

// what a refused request's body says: the studio's {"error": ...}, else its text or status
function refusal(text, status) {
  try {
    const said = JSON.parse(text);
    if (said && typeof said.error === "string") return said.error;
  } catch (error) {
    // plain text (the door's refusals)
  }
  return text.trim() || `HTTP ${status}`;
}

function role(name) {
  return document.querySelector(`[data-role="${name}"]`);
}

class RunPage {
  constructor(main) {
    this.main = main;
    this.base = "/run/" + encodeURIComponent(main.dataset.source) + "/" +
      encodeURIComponent(main.dataset.run);
    this.csrf = document.querySelector('meta[name="csrf"]').content;
    this.view = null;
    this.shown = null;  // the point shown; null: the run as it is now
    this.frame = null;  // what the page shows of that point (from /api/.../point/N)
    this.cache = new Map();
    this.wanted = null;
    this.loading = false;
    this.lastState = null;
    this.drawn = {pending: null, timeline: null, points: null};
    this.selected = null;
    this.stream = null;
    this.closing = false;  // the studio said it is stopping
    this.gone = false;  // the run was deleted under the page: its stream is not opened again
    this.forkText = null;  // the fork box's text as the server wrote it
    this.graph = new Graph(document.getElementById("tree"), (key) => {
      this.selected = key;
      this.drawDetails();
    });
    this.slider = role("time");
    // the point travelled to is kept in the address (#point=N): a reload, or coming back to
    // the page, shows that point again, not the run as it is now
    const asked = /^#point=(\d+)$/.exec(window.location.hash);
    this.startAt = asked ? Number(asked[1]) : null;
  }

  async start() {
    this.wire();
    try {
      const first = await fetch("/api" + this.base, {credentials: "same-origin"});
      if (first.ok) this.show(readJSON(await first.text()));
    } catch (error) {
      // the stream below brings the run as well
    }
    this.connect();
  }

  // -- the run as it is now ------------------------------------------------------------------
  connect() {
    const live = document.getElementById("live");
    this.stream = new EventSource("/stream" + this.base);
    this.stream.onopen = () => {
      this.closing = false;
      live.textContent = "live";
    };
    this.stream.addEventListener("closing", () => {
      // the studio is stopping (Ctrl-C): the browser tries again, and goes on if it comes back
      this.closing = true;
      live.textContent = "the studio stopped: shown as it last was (this page goes on once " +
        "the studio is back)";
    });
    // each connection sends the whole run first, then only what changed in it
    const shown = (view) => {
      this.show(view);
      // ended, and all of it recorded (its checkpoint comes a moment before its last events)
      if (FINISHED.includes(view.status) && view.settled !== false) {
        this.stream.close();
        live.textContent = "finished";
      }
    };
    this.stream.onmessage = (message) => shown(readJSON(message.data));
    this.stream.addEventListener("patch", (message) => {
      if (this.view) shown(applyPatch(this.view, readJSON(message.data).patch));
    });
    this.stream.addEventListener("gone", (message) => {
      // the run was deleted while the page showed it: nothing more will come
      this.stream.close();
      this.gone = true;
      live.textContent = "gone: " + readJSON(message.data).error + " (shown as it last was)";
    });
    this.stream.onerror = () => {
      // the browser tries again after a dropped connection, never after a refusal (a studio
      // started again has a new token): said, not "reconnecting…" for ever
      live.textContent = this.stream.readyState === EventSource.CLOSED
        ? "disconnected: the studio refused this page (started again? the run gone?): " +
          "reload, or open the URL it printed"
        : (this.closing ? "the studio stopped: reconnecting…" : "reconnecting…");
    };
  }

  show(view) {
    const started = performance.now();
    this.view = view;
    const status = document.getElementById("status");
    status.textContent = view.status;
    setStatus(status, "status-", view.status);
    this.main.dataset.status = view.status;
    document.getElementById("note").textContent = view.note || "";
    this.text("error", view.error || "");
    document.getElementById("usage").textContent = view.usage || "";
    const result = view.result === null || view.result === undefined ? "" :
      (typeof view.result === "string" ? view.result
                                       : visible(writeJSON(view.result, 2)));
    // an ended run without an answer says so (an empty box read as a page not drawn yet)
    this.text("result", result ||
      (FINISHED.includes(view.status)
        ? `no final answer: the run ended in ${view.status}` +
          (view.error ? " (its error is above)" : "")
        : `no result yet: the run is ${view.status}`));
    // redrawn only when they change: a reason being typed, a click, a scroll are kept
    const asked = writeJSON(view.pending);
    if (asked !== this.drawn.pending) {
      this.drawn.pending = asked;
      this.drawPending(view.pending);
      document.getElementById("approvals").hidden = !view.pending.length;
    }
    if (view.timeline !== this.drawn.timeline || view.points !== this.drawn.points) {
      // a patch that left them alone keeps the very same lists: nothing to look at
      this.drawn.timeline = view.timeline;
      this.drawn.points = view.points;
      drawTimeline(document.getElementById("timeline"), view.timeline, view.points);
    }
    const last = view.points.length ? view.points[view.points.length - 1].n : 0;
    if (this.slider) {
      this.slider.max = String(last);
      if (this.shown === null) this.slider.value = String(last);
    }
    if (this.shown === null) this.showNow();
    else {  // travelling: the label counts the points that came meanwhile
      this.markPoint(this.shown);
      this.label(view.points.find((p) => p.n === this.shown), false);
    }
    // the page's own script time per update, for anyone measuring (the browser tests do)
    performance.measure("jianmu:show", {start: started});
    if (this.startAt !== null && view.points.length) {
      const n = this.startAt;
      this.startAt = null;
      this.go(n);
    }
  }

  // a box's text, its long words breakable, redrawn only when it changed: a result of one
  // word of 200,000 characters cost seconds of layout each update
  text(id, said) {
    const box = document.getElementById(id);
    if (box.textContent === said) return;
    box.replaceChildren();
    appendBreakable(box, said);
  }

  // the address says the point shown (replaced, not pushed: Back leaves the page, as before)
  remember(number) {
    const url = window.location.pathname + window.location.search +
      (number === null ? "" : `#point=${number}`);
    if (url !== window.location.pathname + window.location.search + window.location.hash) {
      window.history.replaceState(window.history.state, "", url);
    }
  }

  // Each request's box is kept while the request is the same: deciding one of two does not
  // wipe the reason or the edited arguments being written in the other.
  drawPending(requests) {
    const list = document.getElementById("pending");
    const had = new Map();
    for (const box of Array.from(list.children)) {
      let drawn = box.dataset.drawn;
      if (drawn === undefined) {  // the server drew it: kept for its request, with what was
        const same = requests.find((r) => r.id === box.dataset.id);  // typed in it already
        if (same) drawn = box.dataset.drawn = writeJSON(same);
      }
      if (drawn === undefined || had.has(drawn)) box.remove();
      else had.set(drawn, box);
    }
    const boxes = requests.map((r) => {
      const drawn = writeJSON(r);
      const box = had.get(drawn) || drawRequest(r);
      box.dataset.drawn = drawn;
      had.delete(drawn);
      return box;
    });
    for (const gone of had.values()) gone.remove();
    boxes.forEach((box, i) => {  // in order, moving only what must move (focus stays)
      if (list.children[i] !== box) list.insertBefore(box, list.children[i] || null);
    });
  }

  showNow() {
    const view = this.view;
    if (!view) return;
    this.graph.update(view.nodes);
    const state = writeJSON(view.state) + "|" + (view.changed || []).join(",");
    if (state !== this.lastState) {
      this.lastState = state;
      drawState(document.getElementById("state"), view.state, view.changed || []);
    }
    const points = view.points;
    const at = points.length ? points[points.length - 1] : null;
    document.getElementById("state-at").textContent = at ? `at point ${at.n} (now)` : "";
    this.label(at, true);
    const back = role("live");
    if (back) back.disabled = true;
    this.markPoint(at ? at.n : null);
    this.drawDetails();
  }

  label(point, now) {
    const label = role("time-label");
    if (!label || !point) return;
    const last = this.view.points[this.view.points.length - 1].n;
    label.textContent = `point ${point.n} of ${last}${now ? " (now)" : ""} · tick ` +
      `${point.tick} · ${clock(point.time)} · ${point.label}`;
  }

  markPoint(number) {
    for (const g of document.querySelectorAll("#timeline .point-group.current")) {
      g.classList.remove("current");
    }
    if (number === null) return;
    const group = document.querySelector(`#timeline .point-group[data-point="${number}"]`);
    if (group) group.classList.add("current");
    return group;
  }

  drawDetails() {
    const box = document.getElementById("details");
    const nodes = this.shown === null || !this.frame ? this.view && this.view.nodes
                                                      : this.frame.nodes;
    const node = (nodes || []).find((n) => n.key === this.selected);
    drawDetails(box, node, this.view ? this.view.timeline : []);
  }

  // -- time travel ---------------------------------------------------------------------------
  go(number) {
    const points = this.view ? this.view.points : [];
    if (!points.length) return;
    const last = points[points.length - 1].n;
    const n = Math.max(0, Math.min(last, number));
    if (this.slider) this.slider.value = String(n);
    const point = points.find((p) => p.n === n);
    if (n === last && !FINISHED.includes(this.view.status)) {
      this.shown = null;  // the newest point of a live run: follow it again
      this.frame = null;
      this.remember(null);
      this.showNow();
      return;
    }
    this.shown = n;
    this.remember(n === last ? null : n);
    this.label(point, false);
    const back = role("live");
    if (back) back.disabled = n === last;
    this.wanted = n;
    this.load();
  }

  async load() {
    if (this.loading) return;  // the newest wish is fetched when this one is back
    while (this.wanted !== null) {
      const n = this.wanted;
      this.wanted = null;
      let frame = this.cache.get(n);
      if (!frame) {
        this.loading = true;
        let failed = null;
        try {
          const answer = await fetch(`/api${this.base}/point/${n}`, {credentials: "same-origin"});
          const text = await answer.text();
          if (answer.ok) frame = readJSON(text);
          else failed = refusal(text, answer.status);
        } catch (error) {
          failed = "the studio did not answer (stopped?)";  // the next move asks again
        } finally {
          this.loading = false;
        }
        if (failed !== null) {
          // said where the point is named: the tree and state below are still another's
          if (this.wanted === null && this.shown === n) {
            document.getElementById("state-at").textContent =
              `cannot show point ${n}: ${failed}; the tree and state below are not of it`;
          }
          continue;
        }
        this.cache.set(n, frame);
        if (this.cache.size > 64) this.cache.delete(this.cache.keys().next().value);
      }
      if (this.wanted !== null || this.shown !== n) continue;
      const started = performance.now();
      this.frame = frame;
      this.graph.update(frame.nodes);
      drawState(document.getElementById("state"), frame.state, frame.changed);
      this.lastState = null;
      document.getElementById("state-at").textContent = `at point ${n}`;
      const group = this.markPoint(n);
      if (group) group.scrollIntoView({block: "nearest"});
      this.drawDetails();
      performance.measure("jianmu:point", {start: started});
    }
  }

  // -- fork ----------------------------------------------------------------------------------
  async openFork() {
    const panel = document.getElementById("fork-panel");
    // clicked before the run's view came (a slow answer): the page's own newest point
    const n = this.shown !== null ? this.shown
      : this.view ? this.view.points[this.view.points.length - 1].n : Number(this.slider.max);
    const area = role("fork-state");
    const start = role("fork-start");
    const said = document.getElementById("fork-msg");
    panel.dataset.point = String(n);
    panel.querySelector("p").firstChild.textContent =
      `The new run starts from point ${n} with the state below (edit it as JSON); the ` +
      "original run is not changed. Tool calls that finished before this point do not run " +
      "again; later ones go through the guard.";
    panel.hidden = false;
    // the state as the server writes it: read as JavaScript numbers, a whole number past
    // 2**53 would be rounded, and the fork would start from a state no one edited
    area.value = "";
    this.forkText = null;
    start.disabled = true;
    said.textContent = `loading the state at point ${n}…`;
    let text = null;
    try {
      const answer = await fetch(`/api${this.base}/point/${n}/state`,
                                 {credentials: "same-origin"});
      text = await answer.text();
      // refused: what the studio said (the run gone), not a bare status
      if (!answer.ok) throw new Error(refusal(text, answer.status));
    } catch (error) {
      if (panel.dataset.point === String(n)) {
        said.textContent = `cannot read the state at point ${n}: ${error.message}`;
      }
      return;
    }
    if (panel.dataset.point !== String(n)) return;  // opened again meanwhile
    this.forkText = text;
    area.value = this.forkText;
    said.textContent = "";
    start.disabled = false;
  }

  async startFork() {
    const panel = document.getElementById("fork-panel");
    const said = document.getElementById("fork-msg");
    const text = role("fork-state").value;
    // untouched: the point's own state (the server's, exactly); edited: the text as typed,
    // read by the server (which says where it is not JSON)
    const body = {point: Number(panel.dataset.point)};
    if (text !== this.forkText) body.state_text = text;
    const start = role("fork-start");
    start.disabled = true;
    said.textContent = "starting the fork…";
    const told = await post(this.base + "/fork", body, this.csrf);
    if (told.ok) {
      said.textContent = told.message;
      window.location.assign(told.url);
      return;
    }
    start.disabled = false;
    said.textContent = "refused: " + told.error;
  }

  // -- wiring --------------------------------------------------------------------------------
  wire() {
    window.addEventListener("hashchange", () => {  // a #point=N typed in the address bar
      const asked = /^#point=(\d+)$/.exec(window.location.hash);
      if (asked) this.go(Number(asked[1]));
    });
    if (this.slider) {
      this.slider.addEventListener("input", () => this.go(Number(this.slider.value)));
    }
    const back = role("live");
    if (back) back.addEventListener("click", () => this.go(Infinity));
    document.getElementById("timeline").addEventListener("click", (event) => {
      if (String(window.getSelection() || "")) return;  // selecting text, not travelling
      const group = event.target.closest("[data-point]");
      if (group) this.go(Number(group.dataset.point));
    });
    const fork = role("fork");
    if (fork) fork.addEventListener("click", () => this.openFork());
    const start = role("fork-start");
    if (start) start.addEventListener("click", () => this.startFork());
    const cancel = role("fork-cancel");
    if (cancel) {
      cancel.addEventListener("click", () => {
        document.getElementById("fork-panel").hidden = true;
      });
    }
    role("zoom-in").addEventListener("click", () => this.graph.zoom(1.25));
    role("zoom-out").addEventListener("click", () => this.graph.zoom(1 / 1.25));
    role("fit").addEventListener("click", () => this.graph.fit());
    const pending = document.getElementById("pending");
    pending.addEventListener("click", (event) => {
      // an edit box opened (by mouse or keyboard): filled before anything is typed in it
      const opened = event.target.closest("details.edit > summary");
      if (opened) fillEdit(opened.closest(".request"));
      else this.decide(event);
    });
    pending.addEventListener("toggle", (event) => {  // opened some other way
      if (event.target.open) fillEdit(event.target.closest(".request"));
    }, true);
  }

  async decide(event) {
    const button = event.target.closest("button");
    if (!button) return;
    const said = document.getElementById("decision-msg");
    const box = button.closest(".request");
    const request = this.decision(button, box, said);
    if (!request) return;
    for (const b of box.querySelectorAll("button")) b.disabled = true;
    said.textContent = request.doing + visible(box.dataset.id) + "…";
    const body = await post(this.base + "/" + request.action, request.body, this.csrf);
    said.textContent = body.ok ? body.message : "refused: " + body.error;
    if (!body.ok) for (const b of box.querySelectorAll("button")) b.disabled = false;
    if (this.stream && this.stream.readyState === EventSource.CLOSED && !this.gone) {
      this.connect();
    }
  }

  decision(button, box, said) {
    // what the button asks for: an answer to a question, or an approval (the arguments
    // edited when the person changed them) or a rejection; null when it cannot be sent
    const call = box.dataset.id;
    if (button.classList.contains("answer")) {
      const area = box.querySelector("textarea.answer-text");
      if (!area.value.trim()) {  // an Answer clicked before writing one: not sent as ""
        said.textContent = "write the answer in the box first: the run goes on with it";
        area.focus();
        return null;
      }
      return {action: "answer", doing: "answering ", body: {call_id: call, answer: area.value}};
    }
    const approve = button.classList.contains("approve");
    const reason = box.querySelector("input.reason").value;
    const body = {call_id: call, message: reason || null};
    const area = box.querySelector("textarea.edit-arguments");
    if (approve && area && area.value.trim() !== area.defaultValue.trim()) {
      let read;
      try {
        read = JSON.parse(area.value);
      } catch (error) {
        said.textContent = "the edited arguments are not JSON: " + error.message;
        return null;
      }
      if (!read || typeof read !== "object" || Array.isArray(read)) {
        said.textContent = "the edited arguments must be a JSON object";
        return null;
      }
      // sent as the text in the box, read by the server: as JavaScript numbers, a whole
      // number past 2**53 (an account, an amount) would run as another than the one approved
      body.arguments_text = area.value;
    }
    return {action: approve ? "approve" : "reject",
            doing: approve ? (body.arguments_text ? "approving (edited) " : "approving ")
                           : "rejecting ",
            body};
  }
}

// the runs list's start times in the browser's time zone, as the run page's clock() shows
// them (the server writes its own zone's)
function localTimes() {
  const two = (n) => String(n).padStart(2, "0");
  for (const node of document.querySelectorAll("time[data-stamp]")) {
    const d = new Date(Number(node.dataset.stamp) * 1000);
    if (Number.isNaN(d.getTime())) continue;
    node.textContent = `${d.getFullYear()}-${two(d.getMonth() + 1)}-${two(d.getDate())} ` +
      `${two(d.getHours())}:${two(d.getMinutes())}:${two(d.getSeconds())}`;
  }
}

function main() {
  localTimes();
  const run = document.getElementById("run");
  if (run) new RunPage(run).start();
}

if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", main);
else main();
