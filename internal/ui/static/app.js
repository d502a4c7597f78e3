// The page of `turnctl ui`: the timeline, a turn's files and diffs, search,
// and the actions, all through the server's /api (see internal/ui/api.go).
// Plain DOM, no build step; text from the history is only ever set as
// textContent, never parsed as HTML.
"use strict";

const csrf = document.querySelector('meta[name="csrf"]').content;
const $ = (sel) => document.querySelector(sel);

const state = {
  rows: [],          // timeline rows loaded so far (newest first)
  total: 0,
  width: 1,
  current: null,     // the turn the tree is in the state of
  start: null,       // where history starts ({turn, reason}), if turns were forgotten
  loading: false,
  key: "",           // latest/open/history as the last timeline load saw them
  selected: null,    // selected turn number
  step: null,        // its step shown ("3.2"), or null: the whole turn
  turn: null,        // its /api/turn reply
  changes: [],       // its changes loaded so far
  file: null,        // selected path
  view: localStorage.getItem("ckptfs-view") || "unified",
};

// el makes an element: el("div", {class: "x"}, child, "text", ...).
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else if (v !== undefined && v !== null && v !== false) e.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

// pathParam is encodeURIComponent for a file name. A byte of a name that
// is not UTF-8 comes in the API's JSON as a lone surrogate, U+DC80 to
// U+DCFF, and goes back to the server as that byte, %80 to %FF.
function pathParam(name) {
  let out = "";
  for (const ch of name) {
    const c = ch.codePointAt(0);
    out += c >= 0xdc80 && c <= 0xdcff ? "%" + (c - 0xdc00).toString(16).toUpperCase() : encodeURIComponent(ch);
  }
  return out;
}

async function api(path) {
  const r = await fetch(path, { credentials: "same-origin" });
  const body = await r.json().catch(() => ({ error: r.statusText }));
  if (!r.ok) throw new Error(body.error || r.statusText);
  return body;
}

async function post(path, body) {
  const r = await fetch(path, {
    method: "POST", credentials: "same-origin",
    headers: { "Content-Type": "application/json", "X-Ckptfs-Csrf": csrf },
    body: JSON.stringify(body),
  });
  const out = await r.json().catch(() => ({ error: r.statusText }));
  if (!r.ok) throw Object.assign(new Error(out.error || r.statusText), { code: out.code });
  return out;
}

function toast(msg, error) {
  const t = $("#toast");
  t.textContent = msg;
  t.className = error ? "error" : "";
  t.hidden = false;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => { t.hidden = true; }, error ? 8000 : 4000);
}

function when(iso) {
  if (!iso) return "open";
  const d = new Date(iso), now = new Date();
  const pad = (n) => String(n).padStart(2, "0");
  const hm = `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
  if (d.toDateString() === now.toDateString()) return hm;
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${hm}`;
}

function bytes(n) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return `${i ? n.toFixed(1) : n} ${units[i]}`;
}

// shown is a path as the page prints it: as is, or quoted with escapes
// if it holds a control character ("new\nline.txt"), as turnctl prints
// it, so that a name with a newline or a tab does not read as one with
// a space (the file lists draw on one line, where both are blanks).
// The escapes are Go's (strconv.Quote), as turnctl's: JSON's would leave
// DEL and the C1 controls as they are, unseen, between the quotes. A byte
// that is not UTF-8 (a lone U+DC80–U+DCFF: pathParam) is quoted as "\xff".
// visible writes out the control characters of a text (but newlines and
// tabs) and its bidirectional controls, as turnctl prints them: a label
// or prompt with an escape sequence or a U+202E is shown, not obeyed.
function visible(s) {
  return s.replace(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/gu, (ch) => {
    const c = ch.codePointAt(0);
    return c < 0x100 ? "\\x" + c.toString(16).padStart(2, "0") : "\\u" + c.toString(16).padStart(4, "0");
  });
}

function shown(p) {
  if (!/[\u0000-\u001f\u007f-\u009f]|[\udc80-\udcff]/u.test(p)) return p;
  const named = { 7: "\\a", 8: "\\b", 9: "\\t", 10: "\\n", 11: "\\v", 12: "\\f", 13: "\\r", 34: '\\"', 92: "\\\\" };
  let q = "";
  for (const ch of p) {
    const c = ch.codePointAt(0);
    if (named[c]) q += named[c];
    else if (c < 0x20 || c === 0x7f) q += "\\x" + c.toString(16).padStart(2, "0");
    else if (c >= 0x80 && c <= 0x9f) q += "\\u" + c.toString(16).padStart(4, "0");
    else if (c >= 0xdc80 && c <= 0xdcff) q += "\\x" + (c - 0xdc00).toString(16);
    else q += ch;
  }
  return `"${q}"`;
}

// changeName is a change's path, "FROM → PATH" for a rename.
const changeName = (c, arrow = "→") => (c.from ? `${shown(c.from)} ${arrow} ${shown(c.path)}` : shown(c.path));

function plural(n, word) { return `${n} ${word}${n === 1 ? "" : "s"}`; }

// counts is a turn's "N files +A -D", .git's changes apart.
function counts(st) {
  if (!st) return ["", ""];
  let n = st.files, a = st.lines_added, d = st.lines_deleted;
  if (st.git) { n -= st.git.files; a -= st.git.lines_added; d -= st.git.lines_deleted; }
  const files = plural(n, "file") + (st.git ? ` + ${st.git.files} in .git` : "");
  return [files, st.lines_skipped ? "lines not counted" : `+${a} -${d}`];
}

// ---- the keyboard ----

// The timeline, the search results and a turn's files are listboxes:
// Tab reaches one option of each (the selected one, else the first),
// the arrow keys, Home and End move between them, and Enter or Space
// opens the one focused, as a click does. A turn's steps are buttons.

// rove makes opt the option of list that Tab reaches (a roving tabindex).
function rove(list, opt) {
  if (!opt) return;
  for (const o of list.querySelectorAll('[role="option"][tabindex="0"]')) if (o !== opt) o.tabIndex = -1;
  opt.tabIndex = 0;
}

// optionKeys is the keydown handler of a listbox.
function optionKeys(ev) {
  const list = ev.currentTarget, opt = ev.target.closest('[role="option"]');
  if (!opt || ev.altKey || ev.ctrlKey || ev.metaKey) return;
  if (ev.key === "Enter" || ev.key === " ") {
    ev.preventDefault();
    opt.click();
    return;
  }
  const opts = [...list.querySelectorAll('[role="option"]')], i = opts.indexOf(opt);
  const to = { ArrowDown: opts[i + 1], ArrowUp: opts[i - 1], Home: opts[0], End: opts[opts.length - 1] }[ev.key];
  if (!(ev.key in { ArrowDown: 1, ArrowUp: 1, Home: 1, End: 1 })) return;
  ev.preventDefault(); // not the pane's scrolling
  if (to) { rove(list, to); to.focus(); }
}

// listbox makes list (an element kept across renderings) a listbox
// named label.
function listbox(list, label) {
  list.setAttribute("role", "listbox");
  list.setAttribute("aria-label", label);
  list.addEventListener("keydown", optionKeys);
  // A click focuses an option too: Tab comes back to it.
  list.addEventListener("focusin", (ev) => { const o = ev.target.closest('[role="option"]'); if (o) rove(list, o); });
  return list;
}

// focused is the data-KEY of the element focused inside within, or null.
function focused(within, key) {
  const a = document.activeElement;
  return a && a !== document.body && within && within.contains(a) ? a.closest(`[data-${key}]`)?.dataset[key] ?? null : null;
}

// refocus gives the tab stop of list to its option whose data-KEY is
// had (focusing it: it had the focus before list was drawn again),
// else to the selected option, else to the first.
function refocus(list, key, had) {
  const opts = [...list.querySelectorAll('[role="option"]')];
  const again = had != null ? opts.find((o) => o.dataset[key] === had) : null;
  rove(list, again || opts.find((o) => o.classList.contains("selected")) || opts[0]);
  if (again) again.focus({ preventScroll: true });
}

// ---- the timeline ----

const LANE = 14, ROW = 26;

// laneSVG draws a row's lanes: lines from above into the node, the lanes
// passing by, the line down to the parent.
function laneSVG(r, width) {
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  const w = Math.max(width, 1) * LANE + 6;
  svg.setAttribute("width", w); svg.setAttribute("height", ROW);
  const x = (c) => c * LANE + LANE / 2 + 3, mid = ROW / 2;
  const line = (x1, y1, x2, y2) => {
    const l = document.createElementNS(ns, "line");
    l.setAttribute("x1", x1); l.setAttribute("y1", y1); l.setAttribute("x2", x2); l.setAttribute("y2", y2);
    l.setAttribute("stroke", "#8c959f"); l.setAttribute("stroke-width", "2");
    svg.append(l);
  };
  const lane = r.lane;
  for (const c of lane.through) line(x(c), 0, x(c), ROW);
  for (const c of lane.up) line(x(c), 0, x(lane.col), mid);
  if (lane.down) line(x(lane.col), mid, x(lane.col), ROW);
  const dot = document.createElementNS(ns, "circle");
  dot.setAttribute("cx", x(lane.col)); dot.setAttribute("cy", mid);
  dot.setAttribute("r", r.num === state.current ? 6 : 4);
  dot.setAttribute("fill", r.num === state.current ? "#0969da" : r.kind === "rewind" || r.kind === "revert" ? "#cf222e" : "#57606a");
  if (r.pin) { dot.setAttribute("stroke", "#8250df"); dot.setAttribute("stroke-width", "3"); }
  svg.append(dot);
  svg.dataset.col = lane.col;
  return svg;
}

// mergedNote is turnctl log's "[with turns A-B]" of a turn the forgotten
// turns A..B were merged into ("" if none).
function mergedNote(r) {
  if (!r.merged_from) return "";
  return r.merged_from === r.num - 1 ? `[with turn ${r.merged_from}]` : `[with turns ${r.merged_from}-${r.num - 1}]`;
}

function rowElement(r, withLane) {
  const [files, lines] = counts(r.stats);
  const name = visible(r.label || (r.kind === "rewind" && r.target != null ? `rewind to ${r.target}` : ""));
  const label = [mergedNote(r), name, ...r.refs.map((x) => "ref:" + x)].filter(Boolean).join(" ");
  const e = el("div", {
    class: "row" + (r.num === state.current ? " current" : "") + (r.num === state.selected ? " selected" : ""),
    "data-turn": r.num, title: label,
    role: "option", tabindex: -1, "aria-selected": String(r.num === state.selected),
    onclick: () => selectTurn(r.num),
  },
  withLane ? laneSVG(r, state.width) : null,
  el("span", { class: "num" }, r.num),
  el("span", { class: "time" }, r.open ? "open" : when(r.end)),
  el("span", { class: "kind kind-" + r.kind }, r.kind),
  el("span", { class: "label" }, label),
  r.num === state.current ? el("span", { class: "badge current" }, "current") : null,
  r.open ? el("span", { class: "badge open" }, "open") : null,
  r.pin ? el("span", { class: "badge pin", title: r.pin.note || "pinned" }, "pinned") : null,
  el("span", { class: "files" }, r.num === 0 ? "" : files),
  el("span", { class: "lines" }, r.num === 0 ? "" : lines),
  el("span", { class: "programs" }, r.programs.join(", ")));
  return e;
}

// loadTimeline loads the first page again (reset) or the next page.
async function loadTimeline(reset) {
  if (state.loading) return;
  if (!reset && state.rows.length >= state.total && state.total > 0) return;
  state.loading = true;
  try {
    const offset = reset ? 0 : state.rows.length;
    const limit = reset ? Math.max(200, state.rows.length) : 200;
    const t = await api(`/api/timeline?offset=${offset}&limit=${limit}`);
    state.total = t.total; state.width = t.width; state.current = t.current; state.start = t.start;
    state.key = `${t.latest}/${t.open}/${t.history}`;
    state.rows = reset ? t.rows : state.rows.concat(t.rows);
    renderTimeline(t.start);
    // An open turn shown on the right has changed or ended since: show
    // it again, as it is now, on the same file.
    if (reset && state.turn && state.turn.turn.open && state.selected === state.turn.turn.num) selectTurn(state.selected, state.file, state.step);
  } catch (err) {
    toast("timeline: " + err.message, true);
  } finally {
    state.loading = false;
  }
}

function renderTimeline(start) {
  const tl = $("#timeline");
  const had = focused(tl, "turn");
  tl.replaceChildren(...state.rows.map((r) => rowElement(r, true)));
  refocus(tl, "turn", had);
  $("#tl-count").textContent = `(${state.total} turns, showing ${state.rows.length})`;
  const more = $("#tl-more");
  more.replaceChildren();
  if (state.rows.length < state.total) {
    more.append(el("button", { id: "tl-load-more", onclick: () => loadTimeline(false) }, `Load ${Math.min(200, state.total - state.rows.length)} more`));
  } else if (start) {
    more.append(`history starts at turn ${start.turn} (older turns forgotten by ${start.reason})`);
  }
  tl.dataset.loaded = state.rows.length;
}

// ---- one turn ----

// prevOf is the turn whose end a turn's changes start from: the one
// before it, or before the forgotten turns merged into it (merged_from).
const prevOf = (turn) => (turn.merged_from ? turn.merged_from - 1 : turn.num - 1);

// selectTurn shows turn num: its changes, or with step ("3.2") that
// step's own changes (turnctl show 3.2).
async function selectTurn(num, keepFile, step) {
  state.selected = num;
  state.step = step || null;
  state.file = null;
  for (const e of document.querySelectorAll(".row.selected")) { e.classList.remove("selected"); e.setAttribute("aria-selected", "false"); }
  for (const e of document.querySelectorAll(`.row[data-turn="${num}"]`)) { e.classList.add("selected"); e.setAttribute("aria-selected", "true"); }
  // What had the focus on the right (a step, a file), to focus again
  // once the turn is drawn again.
  const had = { step: focused($("#steps"), "step"), path: focused($("#files"), "path") };
  const d = $("#detail");
  const name = step || String(num);
  // Another turn: "loading" at once. The same turn (a step of it, or all
  // of it again) stays as it is until it is drawn again, the focus in it.
  if (!state.turn || state.turn.turn.num !== num) d.replaceChildren(el("p", { class: "hint" }, `loading turn ${name}…`));
  try {
    const t = await api(`/api/turn?n=${name}&limit=500`);
    if (state.selected !== num || state.step !== (step || null)) return;
    state.turn = t;
    state.changes = t.changes;
    renderTurn(keepFile, had);
  } catch (err) {
    d.replaceChildren(el("p", { class: "hint" }, `turn ${name}: ${err.message}`));
  }
}

function renderTurn(keepFile, had) {
  const t = state.turn, turn = t.turn;
  // The head is the turn's, also while one of its steps is shown.
  const [files, lines] = counts(t.step ? turn.stats : t.stats);
  const prompt = turn.prompt || "";
  const atStart = state.start != null && turn.num === state.start.turn;
  const head = el("div", { class: "turn-head", id: "turn-head", "data-turn": turn.num },
    el("h2", {}, `Turn ${turn.num} `, el("span", { class: "kind-" + turn.kind }, turn.kind),
      turn.num === state.current ? el("span", { class: "badge current" }, "current") : null,
      t.pin ? el("span", { class: "badge pin" }, "pinned" + (t.pin.note ? ": " + visible(t.pin.note) : "")) : null),
    el("div", { class: "label" }, visible(turn.label || "")),
    el("div", { class: "meta" },
      `${when(turn.start)} → ${turn.open ? "open" : when(turn.end)} · ${files} ${lines}`,
      turn.programs && turn.programs.length ? ` · ${turn.programs.join(", ")}` : "",
      turn.refs && turn.refs.length ? ` · ${turn.refs.map((r) => "ref:" + r).join(" ")}` : "",
      turn.merged_from ? ` · with the forgotten turns ${turn.merged_from}-${turn.num - 1}` : "",
      t.parent != null && t.parent !== prevOf(turn) ? ` · continues from ${turn.target_step ? `step ${t.parent}.${turn.target_step}` : `turn ${t.parent}`}` : ""),
    prompt ? el("details", { id: "prompt" }, el("summary", {}, "Full prompt"), el("pre", { class: "prompt" }, visible(prompt))) : null,
    atStart ? el("p", { class: "hint", id: "at-start" }, "History starts here, as this turn ended: what it changed is no longer known (the turns before it were forgotten).") : null,
    el("div", { class: "actions" },
      el("button", { id: "act-rewind", onclick: () => action("rewind", { turn: String(turn.num) }, `Rewind the tree to the end of turn ${turn.num}`) }, "Rewind to here…"),
      turn.num > 0 && !atStart ? el("button", { id: "act-revert", onclick: () => action("revert", { turn: String(turn.num) }, `Revert turn ${turn.num}, keeping later turns`) }, "Revert this turn…") : null,
      t.pin ? el("button", { id: "act-unpin", onclick: () => pinAction("unpin", turn.num) }, "Unpin")
        : el("button", { id: "act-pin", onclick: () => pinAction("pin", turn.num) }, "Pin…"),
      turn.num > 0 && !atStart ? el("a", { id: "dl-patch", class: "button", href: `/api/patch?n=${turn.num}&from=${prevOf(turn)}`, download: `turn-${turn.num}.patch`, title: "what this turn changed, as a patch git apply takes (turnctl diff)" }, "Download patch") : null));
  const steps = t.steps && t.steps.length ? el("div", { class: "steps", id: "steps" },
    el("div", { class: "pane-title" }, `${t.steps.length} steps (one tool call each)`),
    ...t.steps.map((st) => {
      const name = `${st.turn}.${st.num}`;
      const open = () => selectTurn(turn.num, null, name === state.step ? null : name);
      return el("div", { class: "step" + (name === state.step ? " selected" : ""), "data-step": name, title: `show step ${name}'s own changes`,
        onclick: (ev) => { if (!ev.target.closest("button")) open(); } },
        el("button", { class: "step-open", type: "button", "aria-pressed": String(name === state.step), onclick: open },
          el("span", { class: "num" }, name), " ",
          el("span", { class: "tool" }, st.tool || ""), " ",
          el("span", { class: "label" }, visible(st.label || ""))), " ",
        el("button", { class: "small", onclick: () => action("rewind", { turn: name }, `Rewind the tree to the end of step ${name}`) }, "Rewind to here…"));
    })) : null;
  // The arrow keys move between the steps too.
  if (steps) steps.addEventListener("keydown", (ev) => {
    const b = ev.target.closest(".step-open");
    if (!b || ev.altKey || ev.ctrlKey || ev.metaKey || !(ev.key === "ArrowDown" || ev.key === "ArrowUp")) return;
    const all = [...steps.querySelectorAll(".step-open")], to = all[all.indexOf(b) + (ev.key === "ArrowDown" ? 1 : -1)];
    ev.preventDefault();
    if (to) to.focus();
  });
  const list = listbox(el("div", { class: "files-list", id: "files" }), "Changes");
  renderChanges(list);
  $("#detail").replaceChildren(head, ...(steps ? [steps] : []),
    el("div", { class: "pane-title", id: "changes-title" }, state.step ? `${plural(t.total, "change")} in step ${state.step} ` : `${plural(t.total, "change")}`,
      state.step ? el("button", { class: "small", id: "whole-turn", onclick: () => selectTurn(turn.num) }, `all of turn ${turn.num}`) : null),
    list,
    el("div", { class: "more", id: "files-more-box" }),
    el("div", { id: "file-view" }));
  renderMoreChanges();
  if (had?.step) $("#steps")?.querySelector(`[data-step="${had.step}"] .step-open`)?.focus({ preventScroll: true });
  if (had?.path != null) refocus(list, "path", had.path);
  // The first file's diff at once: what most clicks want to see.
  const first = state.changes.find((c) => c.path === keepFile) || state.changes.find((c) => !c.git && c.before?.type !== "dir" && c.after?.type !== "dir") || state.changes[0];
  if (first) showFile(first);
}

function renderChanges(list) {
  const had = focused(list, "path");
  list.replaceChildren(...state.changes.map((c) => el("div", {
    class: "file" + (c.path === state.file ? " selected" : ""), "data-path": c.path,
    role: "option", tabindex: -1, "aria-selected": String(c.path === state.file),
    onclick: () => showFile(c),
  },
  el("span", { class: "k" }, c.kind),
  el("span", { class: "p" }, changeName(c)),
  c.binary ? el("span", {}, "binary") : el("span", {}, el("span", { class: "add" }, `+${c.lines_added}`), " ", el("span", { class: "del" }, `-${c.lines_deleted}`)))));
  refocus(list, "path", had);
}

// renderMoreChanges draws the button that loads more of the turn's
// changes, below the list (a listbox holds options only).
function renderMoreChanges() {
  const box = $("#files-more-box");
  if (!box) return;
  const left = state.turn.total - state.changes.length;
  box.hidden = left <= 0;
  box.replaceChildren(left > 0 ? el("button", { id: "files-more", onclick: loadMoreChanges }, `Load more (${left} left)`) : "");
}

async function loadMoreChanges() {
  const num = state.selected;
  const step = state.step;
  const t = await api(`/api/turn?n=${step || num}&offset=${state.changes.length}&limit=500`);
  if (state.selected !== num || state.step !== step) return;
  const first = state.changes.length, more = document.activeElement?.id === "files-more";
  state.changes = state.changes.concat(t.changes);
  renderChanges($("#files"));
  renderMoreChanges();
  // Loaded from the keyboard: on to the first file loaded.
  if (more) {
    const o = $("#files").querySelectorAll('[role="option"]')[first];
    if (o) { rove($("#files"), o); o.focus(); }
  }
}

const imageExt = /\.(png|jpe?g|gif|webp|bmp|ico)$/i;

async function showFile(c) {
  state.file = c.path;
  for (const e of document.querySelectorAll(".file")) {
    e.classList.toggle("selected", e.dataset.path === c.path);
    e.setAttribute("aria-selected", String(e.dataset.path === c.path));
  }
  // Tab comes to the file shown, unless the keys are moving in the list.
  const list = $("#files");
  if (list && !list.contains(document.activeElement)) rove(list, list.querySelector(".file.selected"));
  const view = $("#file-view");
  const num = state.selected, step = state.step;
  // name is the state after the change shown, prev the one before it: a
  // step's are its end and the end of the step before (or of the turn
  // before, for the first step).
  const name = step || String(num);
  const k = step ? Number(step.split(".")[1]) : 0;
  const prev = k > 1 ? `${num}.${k - 1}` : state.turn && state.turn.turn.num === num ? prevOf(state.turn.turn) : num - 1;
  const what = step ? `step ${step}` : `turn ${num}`;
  const head = el("div", { class: "diff-head" },
    el("span", { class: "path" }, changeName(c)),
    el("span", {}, c.kind),
    el("button", { id: "view-toggle", onclick: () => { state.view = state.view === "unified" ? "split" : "unified"; localStorage.setItem("ckptfs-view", state.view); showFile(c); } },
      state.view === "unified" ? "Side by side" : "Unified"),
    el("button", { id: "file-history", onclick: () => search({ path: c.path }) }, "History of this file"),
    num > 0 ? el("button", { id: "act-restore", onclick: () => restoreBefore(c, prev, what) }, step ? "Restore as before this step…" : "Restore as before this turn…") : null,
    el("button", { id: "act-restore-after", onclick: () => restoreAfter(c, name, what) }, "Restore as after…"));
  view.replaceChildren(head, el("div", { id: "diff" }, el("p", { class: "hint" }, "loading diff…")));
  let d;
  try {
    d = await api(`/api/diff?n=${name}&path=${pathParam(c.path)}`);
  } catch (err) {
    $("#diff").replaceChildren(el("p", { class: "hint" }, err.message));
    return;
  }
  if (state.selected !== num || state.step !== step || state.file !== c.path) return;
  const box = $("#diff");
  box.dataset.path = c.path;
  box.replaceChildren();
  if (imageExt.test(c.path) && (d.before || d.after)) {
    box.append(el("div", { class: "images" },
      d.before && num > 0 ? el("figure", {}, el("figcaption", {}, "before"), el("img", { src: `/api/cat?n=${prev}&path=${pathParam(c.from || c.path)}` })) : null,
      d.after ? el("figure", {}, el("figcaption", {}, "after"), el("img", { src: `/api/cat?n=${name}&path=${pathParam(c.path)}` })) : null));
  }
  if (d.binary || d.not_captured || !d.patch) {
    const size = (s) => (s ? `${s.type} ${s.mode}${s.type === "file" ? ", " + s.size + " bytes" : ""}${s.target ? " → " + s.target : ""}` : "absent");
    box.append(el("pre", { "data-keep": "1" }, el("span", { class: "l m" },
      d.not_captured ? "bytes never captured (changed while unmounted)" : d.binary ? "binary file" : "no text change",
      `\nbefore: ${size(d.before)}\nafter:  ${size(d.after)}`)));
    // A binary file's GIT binary patch (base85) says nothing to a reader.
    if (!d.patch || d.binary) return;
  }
  renderPatch(box, d.patch, c.path, false);
}

// restoreBefore restores what change c of turn or step `what` changed
// as it was before (at the end of prev). For a rename that is both its
// names: the old one back, the new one as it was (most often absent,
// so removed; "also": the server leaves it be if it is absent then and
// now). Restoring the old name alone left the file under both.
function restoreBefore(c, prev, what) {
  const at = `end of ${String(prev).includes(".") ? "step" : "turn"} ${prev}`;
  if (c.from) {
    action("restore", { turn: String(prev), paths: [c.from], also: [c.path] },
      `Undo the rename ${changeName(c)}: restore ${shown(c.from)} and ${shown(c.path)} as they were before ${what} (${at})`);
  } else {
    action("restore", { turn: String(prev), paths: [c.path] }, `Restore ${shown(c.path)} as it was before ${what} (${at})`);
  }
}

// restoreAfter restores what change c of turn or step `what` (named
// name) changed as it was at its end. For a rename that is both its
// names: the new one with its bytes then, the old one as it was then
// (absent: a file made there since is removed; "also": left be if it is
// absent now too).
function restoreAfter(c, name, what) {
  if (c.from) {
    action("restore", { turn: name, paths: [c.path], also: [c.from] },
      `Redo the rename ${changeName(c)}: restore ${shown(c.path)} and ${shown(c.from)} as they were at the end of ${what}`);
  } else {
    action("restore", { turn: name, paths: [c.path] }, `Restore ${shown(c.path)} as it was at the end of ${what}`);
  }
}

// maxDiffLines is how many lines of a patch the page draws at first: a
// generated file's 200,000 lines took the page 7 s to draw (side by side
// longer), during which it did not answer.
const maxDiffLines = 5000;

// renderPatch draws patch into box, its first maxDiffLines lines unless
// all, with a button that draws the rest.
function renderPatch(box, patch, path, all) {
  let shown = patch, total = 0;
  if (!all) {
    let i = -1;
    for (let n = 0; n < maxDiffLines && (i = patch.indexOf("\n", i + 1)) >= 0; n++);
    if (i >= 0 && i < patch.length - 1) {
      shown = patch.slice(0, i + 1);
      total = patch.split("\n").length - (patch.endsWith("\n") ? 1 : 0);
    }
  }
  box.replaceChildren(...[...box.childNodes].filter((n) => n.classList?.contains("images") || n.dataset?.keep === "1"));
  box.append(state.view === "unified" ? unified(shown, path) : sideBySide(shown, path));
  if (total) {
    box.append(el("p", { class: "hint", id: "diff-cut" },
      `Showing the first ${maxDiffLines} of ${total} lines of this diff. `,
      el("button", { id: "diff-all", onclick: () => renderPatch(box, patch, path, true) }, `Show all ${total} lines`),
      " (slow) or download the turn's patch."));
  }
}

// ---- diffs ----

// lineClass is a patch line's class: "h" a hunk's head, "a" added, "d"
// deleted, "" context, "m" the rest (git's headers, ckptfs's notes).
// Inside a hunk (inHunk: after an "@@" line, until the next "diff ")
// a line is what its first character says: a deleted "-- comment"
// reads "--- comment", an added "++i" "+++i", like git's headers.
function lineClass(l, inHunk) {
  if (l.startsWith("@@")) return "h";
  if (inHunk && l.startsWith("+")) return "a";
  if (inHunk && l.startsWith("-")) return "d";
  if (inHunk && l.startsWith(" ")) return "";
  if (l.startsWith("#") || l.startsWith("+++") || l.startsWith("---") || l.startsWith("diff ") || l.startsWith("index ") || l.startsWith("old mode") || l.startsWith("new mode") || l.startsWith("new file") || l.startsWith("deleted file") || l.startsWith("rename ") || l.startsWith("similarity") || l.startsWith("\\")) return "m";
  if (l.startsWith("+")) return "a";
  if (l.startsWith("-")) return "d";
  return "";
}

function unified(patch, path) {
  const pre = el("pre", { class: "unified" });
  const lines = patch.replace(/\n$/, "").split("\n");
  let inHunk = false;
  for (const l of lines) {
    const k = lineClass(l, inHunk);
    inHunk = k === "h" || inHunk && !l.startsWith("diff ");
    const span = el("span", { class: "l " + k });
    if (k === "a" || k === "d" || k === "") {
      span.append(l.slice(0, 1), highlight(l.slice(1), path));
    } else {
      span.textContent = l;
    }
    pre.append(span);
  }
  return pre;
}

// sideBySide pairs each hunk's deleted lines with the added lines that
// follow them, row by row.
function sideBySide(patch, path) {
  const table = el("table", { class: "split" },
    el("colgroup", {}, el("col", { class: "n" }), el("col", {}), el("col", { class: "n" }), el("col", {})));
  let oldN = 0, newN = 0, dels = [], adds = [];
  const flush = () => {
    for (let i = 0; i < Math.max(dels.length, adds.length); i++) {
      const a = dels[i], b = adds[i];
      table.append(el("tr", {},
        el("td", { class: "n" }, a ? a[0] : ""), el("td", { class: a ? "d" : "" }, a ? highlight(a[1], path) : ""),
        el("td", { class: "n" }, b ? b[0] : ""), el("td", { class: b ? "a" : "" }, b ? highlight(b[1], path) : "")));
    }
    dels = []; adds = [];
  };
  let inHunk = false;
  for (const l of patch.replace(/\n$/, "").split("\n")) {
    const k = lineClass(l, inHunk);
    inHunk = k === "h" || inHunk && !l.startsWith("diff ");
    if (k === "h") {
      flush();
      const m = /^@@ -(\d+)(?:,\d+)? \+(\d+)/.exec(l);
      if (m) { oldN = +m[1]; newN = +m[2]; }
      table.append(el("tr", { class: "h" }, el("td", { colspan: 4 }, l)));
    } else if (k === "m") {
      // What the two columns cannot show (a mode, a rename, ckptfs's
      // notes) spans them; the file's header lines the page shows above.
      if (/^(diff |index |--- |\+\+\+ )/.test(l)) continue;
      flush();
      table.append(el("tr", { class: "m" }, el("td", { colspan: 4 }, l)));
    } else if (k === "d") {
      dels.push([oldN++, l.slice(1)]);
    } else if (k === "a") {
      adds.push([newN++, l.slice(1)]);
    } else {
      flush();
      const t = l.slice(1);
      table.append(el("tr", {}, el("td", { class: "n" }, oldN++), el("td", {}, highlight(t, path)), el("td", { class: "n" }, newN++), el("td", {}, highlight(t, path))));
    }
  }
  flush();
  return table;
}

// highlight marks comments, strings, numbers and keywords of a line of
// code: a light, per-line highlighter (no state across lines), enough to
// read a diff by. It returns a fragment of text nodes and spans.
const keywords = new Set(("break case catch class const continue def default defer do elif else enum export extends false fn for from func function go if impl import in interface let match mod nil None null package pub return self static struct switch this throw true True False try type use var while yield async await").split(" "));
const codeExt = /\.(go|js|mjs|ts|tsx|jsx|py|rs|c|h|cc|cpp|hpp|java|kt|rb|sh|bash|php|cs|swift|scala|lua|pl)$/i;
function highlight(text, path) {
  const frag = document.createDocumentFragment();
  if (!codeExt.test(path) || text.length > 2000) { frag.append(text); return frag; }
  const hash = /\.(py|sh|bash|rb|pl)$/i.test(path);
  const re = hash
    ? /(#.*$)|("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')|(\b\d[\d_.xXa-fA-F]*\b)|([A-Za-z_]\w*)/g
    : /(\/\/.*$|\/\*.*?(?:\*\/|$))|("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`?)|(\b\d[\d_.xXa-fA-F]*\b)|([A-Za-z_]\w*)/g;
  let last = 0, m;
  while ((m = re.exec(text))) {
    const cls = m[1] ? "tok-c" : m[2] ? "tok-s" : m[3] ? "tok-n" : keywords.has(m[4]) ? "tok-k" : "";
    if (!cls) continue;
    frag.append(text.slice(last, m.index), el("span", { class: cls }, m[0]));
    last = m.index + m[0].length;
  }
  frag.append(text.slice(last));
  return frag;
}

// ---- search ----

async function search(q) {
  // Not URLSearchParams: it would make a name's lone surrogate U+FFFD.
  const p = Object.entries(q).filter(([, v]) => v).map(([k, v]) => `${k}=${k === "path" ? pathParam(v) : encodeURIComponent(v)}`);
  if (p.length === 0) return;
  if (q.path) $("#q-path").value = q.path;
  const box = $("#results");
  box.hidden = false;
  // The count is the results': none until they come (an error has none).
  $("#results-count").textContent = "";
  $("#results-list").replaceChildren(el("div", { class: "more" }, "searching…"));
  try {
    const r = await api("/api/search?" + p.join("&"));
    $("#results-count").textContent = `(${plural(r.rows.length, "turn")})`;
    $("#results-list").replaceChildren(...(r.rows.length ? r.rows.map((x) => rowElement(x, false)) : [el("div", { class: "more" }, "no turn matches")]));
    refocus($("#results-list"), "turn", null);
  } catch (err) {
    $("#results-list").replaceChildren(el("div", { class: "more" }, err.message));
  }
}

$("#search").addEventListener("submit", (ev) => {
  ev.preventDefault();
  search({ s: $("#q-s").value, grep: $("#q-grep").value, program: $("#q-program").value, path: $("#q-path").value });
});
$("#q-clear").addEventListener("click", () => {
  for (const id of ["#q-s", "#q-grep", "#q-program", "#q-path"]) $(id).value = "";
  $("#results").hidden = true;
});

// ---- actions: preview (dry run), then confirm ----

function confirmDialog(title, body) {
  return new Promise((resolve) => {
    const d = $("#dialog");
    $("#dialog-title").textContent = title;
    $("#dialog-body").replaceChildren(...body);
    const done = (ok) => { d.close(); resolve(ok); };
    $("#dialog-confirm").onclick = () => done(true);
    $("#dialog-cancel").onclick = () => done(false);
    d.oncancel = () => resolve(false);
    d.showModal();
  });
}

function reportBody(rep) {
  const [files, lines_] = counts(rep.stats);
  const lines = [el("div", { class: "summary" },
    rep.changes.length === 0 && !rep.git ? "Nothing would change." : `${files} (${lines_}) would change:`)];
  for (const c of rep.changes) lines.push(el("div", { class: "change" }, `${c.kind.padEnd(9)} ${changeName(c, "->")}  +${c.lines_added} -${c.lines_deleted}`));
  if (rep.more) lines.push(el("div", {}, `… and ${rep.more} more`));
  if (rep.git) lines.push(el("div", { class: "change", id: "report-git" }, `git: ${plural(rep.git, "file")} in .git`));
  if (rep.conflicts && rep.conflicts.length) {
    lines.push(el("div", { class: "summary del" }, "Conflicts:"));
    for (const c of rep.conflicts) lines.push(el("div", {}, `${shown(c.path)}: ${c.reason}`));
  }
  if (rep.split_links && rep.split_links.length) {
    lines.push(el("div", { class: "summary" }, rep.reverted != null
      ? "Hard links split (the names not reverted keep their bytes):"
      : "Hard links split (the names not restored keep their bytes; restore them too, or rewind, to link them again):"));
    for (const l of rep.split_links) lines.push(el("div", {}, `${shown(l.path)} from ${l.names.map(shown).join(", ")}`));
  }
  if (rep.not_restored && rep.not_restored.length) lines.push(el("div", { class: "summary" }, "Not restored (bytes never captured): " + rep.not_restored.map(shown).join(", ")));
  if (rep.left && rep.left.length) lines.push(el("div", { class: "summary" }, "Left in place (they hold unversioned paths): " + rep.left.map(l => shown(l.path + "/")).join(", ")));
  return lines;
}

// markersHint is the refusal's pointer to turnctl's flag, left out of the
// page's dialog, which offers the choice itself.
const markersHint = /; --conflicts=markers writes [^;]*$/;

async function action(name, req, title) {
  let preview, body;
  try {
    preview = await post("/api/" + name, { ...req, dry_run: true });
    body = reportBody(preview);
  } catch (err) {
    // A revert refused for conflicts: offer it with conflict markers,
    // previewed as any action is, if that would go through (the
    // conflicts are all in text).
    if (name !== "revert" || req.conflicts || err.code !== "conflict") {
      toast(`${name}: ${err.message}`, true);
      return;
    }
    try {
      preview = await post("/api/revert", { ...req, conflicts: "markers", dry_run: true });
    } catch (err2) {
      toast(`${name}: ${err.message}`, true);
      return;
    }
    req = { ...req, conflicts: "markers" };
    title += ", with conflict markers";
    body = [el("div", { class: "summary del", id: "markers-why" }, err.message.replace(markersHint, ".")),
      el("div", { class: "summary" }, "Revert anyway, writing the conflicting lines of text files between <<<<<<< and >>>>>>> markers?"),
      ...reportBody(preview)];
  }
  if (!(await confirmDialog(title, body))) return;
  try {
    const rep = await post("/api/" + name, req);
    const done = rep.turn ? `${name} done as turn ${rep.turn.num}: ${counts(rep.stats)[0]}` : `${name}: nothing changed`;
    // Done, but its record may not survive a power loss: shown as an error is.
    toast(rep.warning ? `${done}; but ${rep.warning}` : done, !!rep.warning);
    await loadTimeline(true);
    if (rep.turn) selectTurn(rep.turn.num);
  } catch (err) {
    toast(`${name}: ${err.message}`, true);
  }
}

async function pinAction(name, num) {
  let note = "";
  if (name === "pin") {
    const input = el("input", { id: "pin-note", placeholder: "why it is kept (optional)", size: 50 });
    const body = [el("div", { class: "summary" }, `A pinned turn is kept whatever the retention policy, and always rewinds exactly.`), input];
    setTimeout(() => input.focus(), 0);
    if (!(await confirmDialog(`Pin turn ${num}`, body))) return;
    note = input.value;
  }
  try {
    await post("/api/" + name, { turn: String(num), note });
    toast(`turn ${num} ${name}ned`);
    await loadTimeline(true);
    selectTurn(num);
  } catch (err) {
    toast(`${name}: ${err.message}`, true);
  }
}

$("#act-undo").addEventListener("click", () => action("undo", {}, "Undo the last turn that changed something"));
$("#act-gc").addEventListener("click", async () => {
  let rep;
  try { rep = await post("/api/gc", { dry_run: true }); } catch (err) { toast("gc: " + err.message, true); return; }
  const forgot = rep.forgot || [];
  const body = [el("div", { class: "summary", id: "gc-preview" },
    forgot.length ? `Forgets ${plural(forgot.length, "turn")} (${forgot[0]}–${forgot[forgot.length - 1]}), by the retention policy; history then starts at turn ${rep.start ? rep.start.turn : "?"}.` : "Forgets no turn.",
    el("br"),
    `Frees ${bytes(rep.chunk_bytes + rep.attic_bytes)}: the store goes from ${bytes(rep.before_bytes)} to about ${bytes(rep.after_bytes)}.`)];
  if (!(await confirmDialog("Apply the retention policy and reclaim space", body))) return;
  try {
    await post("/api/gc", {});
    toast("gc done");
    loadTimeline(true);
  } catch (err) { toast("gc: " + err.message, true); }
});

// ---- live updates ----

function listen() {
  const es = new EventSource("/api/events");
  es.addEventListener("update", (ev) => {
    $("#live").classList.add("on");
    const u = JSON.parse(ev.data);
    if (`${u.latest}/${u.open}/${u.history}` !== state.key) loadTimeline(true);
  });
  es.onerror = () => { $("#live").classList.remove("on"); };
}

listbox($("#timeline"), "Timeline");
listbox($("#results-list"), "Search results");

// Load the next page when the end of the timeline comes into view.
new IntersectionObserver((entries) => {
  if (entries.some((e) => e.isIntersecting) && state.rows.length < state.total) loadTimeline(false);
}, { root: $("#left") }).observe($("#tl-more"));

loadTimeline(true).then(() => {
  window.ckptfsReadyAt = performance.now(); // make bench reads it
  document.body.dataset.ready = "1";
  listen();
});
