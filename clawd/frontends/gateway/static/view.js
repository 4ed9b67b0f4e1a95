// view.js: the web chat's DOM: history items, a turn's events as they stream (Live), the
// session list and the context meter. Model and tool text reaches the page only through
// markdown.render (which escapes it first) or textContent, never as markup of its own.

import { render } from "./markdown.js";

export function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined && text !== null) node.textContent = text;
  return node;
}

// what a turn waits on (the `waiting` event's stage), as the REPL's waiting line says it
const STAGES = { recall: "searching memory", flush: "saving notes before compaction",
  compaction: "summarising older messages", consolidation: "updating MEMORY.md",
  model: "waiting for the model" };

function tag(text, cls = "") {
  return el("span", `tag ${cls}`.trim(), text);
}

export function tokens(n) {
  if (n === null || n === undefined) return "—";
  if (n >= 999500) return `${(n / 1e6).toFixed(1)}M`;
  return n >= 1000 ? `${(n / 1000).toFixed(1)}k` : String(n);
}

function when(iso) {
  if (!iso) return "";
  const minutes = Math.round((Date.now() - new Date(iso).getTime()) / 60000);
  if (minutes < 1) return "now";
  if (minutes < 60) return `${minutes}m`;
  if (minutes < 1440) return `${Math.round(minutes / 60)}h`;
  return `${Math.round(minutes / 1440)}d`;
}

// "14:05" (today) or "2026-11-27 14:05", with the whole time as a tooltip
function stamp(iso) {
  const at = new Date(iso);
  if (!iso || Number.isNaN(at.getTime())) return null;
  const pad = (n) => String(n).padStart(2, "0");
  const day = `${at.getFullYear()}-${pad(at.getMonth() + 1)}-${pad(at.getDate())}`;
  const time = `${pad(at.getHours())}:${pad(at.getMinutes())}`;
  const today = new Date().toDateString() === at.toDateString();
  const node = el("time", "stamp", today ? time : `${day} ${time}`);
  node.dateTime = at.toISOString();
  node.title = at.toLocaleString();
  return node;
}

// A button that copies `text()` and says so for a moment.
function copyButton(text, label = "copy") {
  const button = el("button", "act", label);
  button.type = "button";
  button.title = "copy to the clipboard";
  button.addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(text());
      button.textContent = "copied";
    } catch {
      button.textContent = "copy failed";
    }
    setTimeout(() => { button.textContent = label; }, 1500);
  });
  return button;
}

function actions(item, extra = []) {
  const row = el("div", "acts");
  const time = stamp(item.timestamp);
  if (time) row.append(time);
  row.append(...extra);
  return row;
}

// Code blocks get a copy button of their own (the code, without the fences).
function withCodeButtons(bubble) {
  for (const pre of bubble.querySelectorAll("pre")) {
    const code = pre.querySelector("code") || pre;
    const wrap = el("div", "code");
    pre.replaceWith(wrap);
    wrap.append(copyButton(() => code.textContent, "copy code"), pre);
  }
}

export function userNode(text, item = {}) {
  const node = el("div", "msg user");
  node.append(el("div", "bubble", text));
  if (item.refused) node.append(tag("not sent: too large", "warn"));
  if (item.undone) node.append(tag("taken back"));
  node.classList.toggle("undone", !!item.undone);
  if (item.timestamp) node.append(actions(item));
  return node;
}

export function assistantNode(text, item = {}) {
  const node = el("div", "msg assistant");
  const bubble = el("div", "bubble md");
  bubble.innerHTML = render(text); // escaped first: see markdown.js
  withCodeButtons(bubble);
  node.append(bubble);
  if (item.interrupted) node.append(tag("stopped", "warn"));
  if (item.undone) node.append(tag("taken back"));
  node.classList.toggle("undone", !!item.undone);
  if (item.timestamp) node.append(actions(item, [copyButton(() => text)]));
  return node;
}

// The last exchange of the session gets "retry" on its reply (the REPL's /retry: the
// answer is taken back and asked for again) and "edit" on its message (/undo, the text
// back in the box to change and send again); chat.js hears the events.
export function offerLast(reply, message) {
  for (const [node, name, title, detail] of [
    [reply, "retry", "take this answer back and ask again (/retry)", null],
    [message, "edit", "take this message back (/undo) and edit it",
      message && message.querySelector(".bubble").textContent]]) {
    const row = node && node.querySelector(".acts");
    if (!row || row.querySelector(`.${name}`)) continue;
    const button = el("button", `act ${name}`, name);
    button.type = "button";
    button.title = title;
    button.addEventListener("click", () => {
      node.dispatchEvent(new CustomEvent(`clawd-${name}`, { bubbles: true, detail }));
    });
    row.append(button);
  }
}

function brief(args) {
  const first = Object.values(args || {}).find((v) => typeof v === "string");
  if (!first) return "";
  const line = first.split("\n")[0];
  return line.length > 60 ? `${line.slice(0, 59)}…` : line;
}

// A tool call, collapsed: its name and first argument; its arguments and result inside.
export function toolNode(call) {
  const node = el("details", "tool");
  node.dataset.callId = call.id || "";
  const summary = el("summary");
  summary.append(el("span", "tool-name", call.name), el("span", "tool-arg", brief(call.arguments)),
    el("span", "tool-state", "running…"));
  node.append(summary, el("div", "label", "arguments"),
    el("pre", "args", JSON.stringify(call.arguments ?? {}, null, 2)));
  return node;
}

export function fillTool(node, result) {
  node.querySelector(".tool-state").textContent = result.isError ? "failed" : "done";
  node.classList.toggle("failed", !!result.isError);
  node.append(el("div", "label", result.truncated ? "result (cut)" : "result"),
    el("pre", "result", result.text || ""));
}

export function line(kind, text) {
  return el("div", `line ${kind}`, text);
}

// A tool's question (an MCP tool that asks before it acts): what it would run, and
// Approve / Deny; `answer(id, approve)` sends the choice. Answered: the buttons go.
export function approvalNode(e, answer) {
  const node = el("div", "approval");
  node.dataset.id = e.id;
  node.append(el("div", "approval-text", "Run this tool call?"), el("pre", "", e.text));
  const buttons = el("div", "approval-buttons");
  for (const [label, approve] of [["Approve", true], ["Deny", false]]) {
    const button = el("button", approve ? "approve" : "deny", label);
    button.type = "button";
    button.addEventListener("click", () => {
      for (const b of buttons.querySelectorAll("button")) b.disabled = true;
      answer(e.id, approve).catch((err) => {
        for (const b of buttons.querySelectorAll("button")) b.disabled = false;
        buttons.append(el("span", "error", ` ${err.message}`));
      });
    });
    buttons.append(button);
  }
  node.append(buttons);
  return node;
}

// A server's question during a call (MCP elicitation): its message and a form of its
// fields; `answer(id, values)` sends them (null: declined). A refused value is said beside.
export function questionNode(e, answer) {
  const node = el("form", "approval question");
  node.append(el("div", "approval-text", e.text));
  const inputs = new Map();
  for (const f of e.fields || []) {
    const row = el("label", "question-field");
    row.append(el("span", "", `${f.name}${f.required ? " *" : ""}` +
      (f.description ? ` — ${f.description}` : "")));
    let input;
    if (f.choices && f.choices.length) {
      input = el("select");
      for (const choice of f.choices) input.append(Object.assign(el("option", "", choice),
        { value: choice }));
    } else if (f.kind === "boolean") {
      input = el("select");
      for (const [label, value] of [["yes", "y"], ["no", "n"]]) {
        input.append(Object.assign(el("option", "", label), { value }));
      }
    } else {
      input = el("input");
      input.type = f.kind === "number" || f.kind === "integer" ? "number" : "text";
    }
    if (f.default !== null && f.default !== undefined) input.value = String(f.default);
    input.name = f.name;
    inputs.set(f.name, input);
    row.append(input);
    node.append(row);
  }
  const buttons = el("div", "approval-buttons");
  const said = el("span", "error");
  const send = (values) => {
    for (const b of buttons.querySelectorAll("button")) b.disabled = true;
    answer(e.id, values).catch((err) => {
      for (const b of buttons.querySelectorAll("button")) b.disabled = false;
      said.textContent = ` ${err.message}`;
    });
  };
  const submit = el("button", "approve", "Send");
  submit.type = "submit";
  const decline = el("button", "deny", "Decline");
  decline.type = "button";
  decline.addEventListener("click", () => send(null));
  node.addEventListener("submit", (event) => {
    event.preventDefault();
    send(Object.fromEntries([...inputs].map(([name, input]) => [name, input.value])));
  });
  buttons.append(submit, decline, said);
  node.append(buttons);
  return node;
}

// A web page a server asks the person to open (MCP elicitation, URL mode): its message, the
// address with its host set apart, Open (opens it in a new tab: accepted) and Decline. Only
// an http(s) address is a link (the gateway sends no other).
export function linkNode(e, answer) {
  const node = el("div", "approval question");
  node.append(el("div", "approval-text", e.text));
  let url = null;
  try { url = new URL(e.url); } catch { url = null; }
  const web = url && ["http:", "https:"].includes(url.protocol);
  const shown = el(web ? "a" : "span", "question-link", e.url);
  if (web) Object.assign(shown, { href: url.href, target: "_blank", rel: "noopener noreferrer" });
  node.append(el("div", "question-host", `host: ${e.host || (url && url.host) || "?"}`), shown);
  const buttons = el("div", "approval-buttons");
  const said = el("span", "error");
  let sent = false; // the link and Open both accept: once
  const send = (approve) => {
    if (sent) return;
    sent = true;
    for (const b of buttons.querySelectorAll("button")) b.disabled = true;
    answer(e.id, approve).catch((err) => {
      sent = false;
      for (const b of buttons.querySelectorAll("button")) b.disabled = b === open && !web;
      said.textContent = ` ${err.message}`;
    });
  };
  const open = el("button", "approve", "Open");
  const decline = el("button", "deny", "Decline");
  open.type = decline.type = "button";
  open.disabled = !web;
  open.addEventListener("click", () => {
    window.open(url.href, "_blank", "noopener,noreferrer");
    send(true);
  });
  if (web) shown.addEventListener("click", () => send(true));
  decline.addEventListener("click", () => send(false));
  buttons.append(open, decline, said);
  node.append(buttons);
  return node;
}

export function commandNode(name, text) {
  const node = el("div", "line command");
  node.dataset.command = name;
  node.append(el("pre", "", text));
  return node;
}

export function compactionNode(item) {
  const node = el("details", "compaction");
  node.append(el("summary", "", `older messages summarised · ${tokens(item.tokensBefore)} → ` +
    `${tokens(item.tokensAfter)} tokens`));
  const body = el("div", "bubble md");
  body.innerHTML = render(item.summary || "");
  node.append(body);
  return node;
}

// The notes automatic recall sent with a message (a `recall` event or history item).
function recallNode(found) {
  return line("info", `recalled ${found.results.length} note(s): ` +
    found.results.map((r) => `${r.path}:${r.startLine}`).join(", "));
}

// A history item's nodes; `calls` maps tool-call ids to their nodes, so a toolResult
// lands in its call's <details>.
export function itemNodes(item, calls) {
  if (item.type === "user") return [userNode(item.text, item)];
  if (item.type === "recall") return [recallNode(item)];
  if (item.type === "compaction") return [compactionNode(item)];
  if (item.type === "toolResult") {
    let node = calls.get(item.toolCallId);
    const out = [];
    if (!node) {
      node = toolNode({ id: item.toolCallId, name: item.name, arguments: {} });
      out.push(node);
    }
    fillTool(node, item);
    return out;
  }
  const out = item.text ? [assistantNode(item.text, item)] : [];
  for (const call of item.toolCalls || []) {
    const node = toolNode(call);
    calls.set(call.id, node);
    out.push(node);
  }
  if (!item.text && item.interrupted) out.push(tag("stopped", "warn"));
  if (item.notice) out.push(line("notice", item.notice)); // why it ends there (a loop)
  return out;
}

// One turn's events as they stream, in `container`. Lines that the history does not keep
// (notices, errors, command output) are collected in `extras` to be shown on after it.
export class Live {
  constructor(container, scroll) {
    this.container = container;
    this.scroll = scroll;
    this.calls = new Map();
    this.extras = [];
    this.bubble = null;
    this.text = "";
    this.pending = false;
    this.waiting = el("div", "msg assistant waiting");
    this.waitLabel = el("div", "bubble", "…");
    this.waiting.append(this.waitLabel);
    this.stage = "model";
    this.since = Date.now();
    this.timer = null;
    this.done = null;
    this.answer = async () => { throw new Error("this page cannot answer here"); };
    this.questions = new Map();
  }

  // Until the reply's first words: what the turn waits on, and for how long.
  wait(stage) {
    this.stage = stage;
    this.since = Date.now();
    if (!this.waiting.parentNode) this.container.append(this.waiting);
    this.tick();
    if (this.timer === null) this.timer = setInterval(() => this.tick(), 1000);
    this.scroll();
  }

  tick() {
    const seconds = Math.floor((Date.now() - this.since) / 1000);
    const what = STAGES[this.stage] || "working";
    this.waitLabel.textContent = seconds >= 1 ? `${what}… ${seconds} s` : `${what}…`;
  }

  stopWaiting() {
    this.waiting.remove();
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
  }

  add(node, extra = false) {
    this.container.insertBefore(node, this.waiting.parentNode ? this.waiting : null);
    if (extra) this.extras.push(node);
    this.scroll();
  }

  start() { this.wait("model"); }

  user(text) { this.add(userNode(text)); }

  command(text) { this.add(line("typed", `› ${text}`), true); }

  draw() {
    this.pending = false;
    if (this.bubble) this.bubble.firstChild.innerHTML = render(this.text); // escaped first
    this.scroll();
  }

  open() {
    if (!this.bubble) {
      this.bubble = assistantNode("");
      this.bubble.classList.add("streaming");
      this.add(this.bubble);
    }
    return this.bubble;
  }

  close() {
    if (this.bubble) this.draw();
    if (this.bubble) this.bubble.classList.remove("streaming");
    this.bubble = null;
    this.text = "";
  }

  event(e) {
    if (e.type === "waiting") return this.wait(e.stage);
    if (e.type !== "delta" && e.type !== "reply" && e.type !== "done") this.close();
    if (["delta", "reply", "command", "done", "approval", "question"].includes(e.type)) {
      this.stopWaiting();
    }
    switch (e.type) {
      case "delta":
        this.open();
        this.text += e.text;
        if (!this.pending) {
          this.pending = true;
          requestAnimationFrame(() => this.draw());
        }
        break;
      case "reply":
        if (e.text || this.bubble) {
          this.open();
          this.text = e.text;
          if (e.aborted) this.bubble.append(tag("stopped", "warn"));
        }
        this.close();
        break;
      case "tool": {
        const node = toolNode(e);
        this.calls.set(e.id, node);
        this.add(node);
        break;
      }
      case "toolResult": {
        const node = this.calls.get(e.id) || toolNode({ id: e.id, name: e.name });
        if (!node.parentNode) this.add(node);
        fillTool(node, e);
        break;
      }
      case "approval": {
        const node = approvalNode(e, (id, approve) => this.answer(id, approve));
        this.questions.set(e.id, node);
        this.add(node, true);
        break;
      }
      case "question": {
        this.stopWaiting();
        const node = e.url ? linkNode(e, (id, approve) => this.answer(id, approve)) :
          questionNode(e, (id, values) => this.answer(id, values !== null, values));
        this.questions.set(e.id, node);
        this.add(node, true);
        break;
      }
      case "approvalAnswered": {
        const node = this.questions.get(e.id);
        if (node) {
          node.querySelector(".approval-buttons").replaceChildren(
            tag(e.approved ? "approved" : "declined", e.approved ? "" : "warn"));
        }
        this.wait("model"); // the call goes on (or is refused), then the model again
        break;
      }
      case "notice": this.add(line("notice", e.text), true); break;
      case "error": this.add(line("error", e.message), true); break;
      case "recall": this.add(recallNode(e)); break; // the history keeps it too
      case "flush":
        this.add(line("info", e.skipped ? `memory flush skipped: ${e.skipped}` :
          `memory flush wrote ${(e.files || []).join(", ") || "nothing"}`), true);
        break;
      case "compaction": // the history shows it as a marker
        this.add(line("info", `older messages summarised · ${tokens(e.tokensBefore)} → ` +
          `${tokens(e.tokensAfter)} tokens`));
        break;
      case "command": if (e.text) this.add(commandNode(e.name, e.text), true); break;
      case "done": this.close(); this.done = e; break;
      default: break; // a type this page does not know
    }
  }

  error(message) {
    this.stopWaiting();
    this.add(line("error", message), true);
  }
}

// The MCP servers of the agent (`GET …/mcp`): each with its state, its tools (folded), and a
// switch that offers them in this session or not (`toggle(name, on)` sends /mcp on|off NAME).
export function mcpList(container, servers, toggle) {
  container.replaceChildren(...servers.map((s) => {
    const node = el("details", `mcp-server${s.on ? "" : " off"}`);
    const head = el("summary");
    const name = el("span", "mcp-name", s.name);
    const meta = el("span", "mcp-meta", `${s.tools.length} tools · ${s.state}` +
      (s.on ? "" : " · off here"));
    const box = el("input");
    box.type = "checkbox";
    box.checked = s.on;
    box.title = s.on ? "offered in this session: untick to switch off" :
      "switched off in this session: tick to offer again";
    box.setAttribute("aria-label", `offer ${s.name} in this session`);
    box.addEventListener("click", (event) => event.stopPropagation());
    box.addEventListener("change", () => toggle(s.name, box.checked));
    head.append(box, name, meta);
    node.append(head);
    if (s.error) node.append(el("div", "mcp-error error", s.error));
    const list = el("ul", "mcp-tools");
    for (const t of s.tools) {
      const item = el("li");
      item.append(el("code", "", t.name), document.createTextNode(` ${t.description}`));
      list.append(item);
    }
    node.append(list);
    return node;
  }));
}

// The sessions: each opens on a click; an ended one (listed with "all") opens read-only;
// each has a rename and a delete button (`rename`, `remove`).
export function sessionList(container, sessions, active, open, remove, rename) {
  container.replaceChildren(...sessions.map((s) => {
    const name = s.key.split(":").slice(2).join(":");
    const ended = s.current === false;
    const row = el("div", "session-row");
    const node = el("button", ended ? "session ended" : "session");
    node.type = "button";
    if (ended ? s.sessionId === active.sessionId : s.key === active.key && !active.sessionId) {
      node.classList.add("active");
    }
    node.dataset.key = s.key;
    if (ended) node.dataset.sessionId = s.sessionId;
    node.append(el("span", "session-title", s.title || name));
    const busy = s.busy && s.busy.running ? " · running" : "";
    node.append(el("span", "session-meta", `${ended ? "ended · " : ""}${name} · ` +
      `${s.messages || 0} msgs${s.lastActivity ? ` · ${when(s.lastActivity)}` : ""}${busy}`));
    node.addEventListener("click", () => open(s.key, ended ? s.sessionId : null));
    row.append(node);
    const label = s.title || name;
    for (const [act, cls, glyph, title] of [
      [rename, "session-rename", "✎", "rename this session"],
      [remove, "session-delete", "×", "delete this session (its transcript is kept aside)"]]) {
      if (!s.sessionId || !act) continue;
      const button = el("button", cls, glyph);
      button.type = "button";
      button.title = title;
      button.setAttribute("aria-label", `${title.split(" ")[0]} ${label}`);
      button.addEventListener("click", () => act(s));
      row.append(button);
    }
    return row;
  }));
}

// Before the first model call the meter shows the fixed layers' share (`fixed`: system
// prompt, workspace files, tool schemas, estimated), as the REPL's /status does.
export function meter(nodes, c) {
  const used = c.used ?? c.fixed ?? null;
  const pct = c.window && used !== null ? (100 * used) / c.window : null;
  nodes.fill.style.width = `${Math.min(100, pct || 0)}%`;
  nodes.flush.style.left = `${c.window ? (100 * c.flushAt) / c.window : 0}%`;
  nodes.compact.style.left = `${c.window ? (100 * c.compactAt) / c.window : 0}%`;
  nodes.root.classList.toggle("warm", used >= c.flushAt && c.flushAt > 0);
  nodes.root.classList.toggle("hot", used >= c.compactAt && c.compactAt > 0);
  nodes.text.textContent = pct === null ? "context —" : `context ${Math.round(pct)}%`;
  nodes.tokens.textContent = pct === null ? "" : `${tokens(used)} / ${tokens(c.window)}`;
  const what = c.used !== null && c.used !== undefined ? "" : " (no model call yet: system " +
    "prompt, workspace files and tools, estimated)";
  nodes.root.title = pct === null ? `no model call yet · window ${tokens(c.window)} tokens` :
    `${used.toLocaleString("en")} of ${c.window.toLocaleString("en")} tokens${what} · ` +
    `memory flush at ${c.flushAt.toLocaleString("en")} · compaction at ` +
    `${c.compactAt.toLocaleString("en")}`;
}
