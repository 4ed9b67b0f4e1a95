// chat.js: the web chat's controller. Sign-in; the agents and the session list; opening a
// session (its newest history page; older ones on scroll or the button, in log.js);
// sending a message or a /command and showing its events as they stream (a dropped stream
// is picked up again from the last event); stop; the context meter. After each turn, and
// when the tab is shown again, the newest page is read again, so the page shows what the
// session's transcript holds, whichever tab or client wrote it.

import * as api from "./api.js";
import { busy, draw, followScroll, historyPath, loadOlder, resync, state, toEnd } from "./log.js";
import * as jobs from "./jobs.js";
import * as notify from "./notify.js";
import * as view from "./view.js";

const $ = (id) => document.getElementById(id);
const meterNodes = () => ({ root: $("meter"), fill: $("meter-fill"), flush: $("meter-flush"),
  compact: $("meter-compact"), text: $("meter-text"), tokens: $("meter-tokens") });

function showSignIn(message) {
  $("app").hidden = true;
  $("signin").hidden = false;
  $("signin-error").textContent = message || "";
  $("signin-error").hidden = !message;
  $("token").value = "";
  $("token").focus();
}

// An error outside a turn: sign in again, or a line in the log.
function report(err) {
  if (err.status === 401) {
    api.forget();
    showSignIn("The gateway refused the token; paste it again.");
    return;
  }
  const wait = err.retryAfter ? ` (try again in ${err.retryAfter} s)` : "";
  $("live").append(view.line("error", `${err.message}${wait}`));
  followScroll();
}

async function start() {
  let found;
  try {
    found = await api.json("/api/agents");
  } catch (err) {
    if (err.status === 401) api.forget();
    showSignIn(err.status === 401 ? "The gateway refused that token." :
      `The gateway did not answer: ${err.message}`);
    return;
  }
  $("signin").hidden = true;
  $("app").hidden = false;
  const agents = found.agents;
  const stored = localStorage.getItem("clawd.agent");
  const chosen = agents.find((a) => a.id === stored) || agents.find((a) => a.default) || agents[0];
  const select = $("agent");
  select.replaceChildren(...agents.map((a) => {
    const option = view.el("option", "", a.id);
    option.value = a.id;
    return option;
  }));
  select.hidden = agents.length < 2;
  await openAgent(chosen.id);
}

async function openAgent(agent) {
  state.agent = agent;
  $("agent").value = agent;
  localStorage.setItem("clawd.agent", agent);
  notify.watch(agent); // runs on: reminders delivered to the page, as they come
  await openSession(localStorage.getItem(`clawd.session.${agent}`) || `agent:${agent}:main`);
}

// Open a session by key; with `ended`, that ended session of the key, read-only.
async function openSession(key, ended = null) {
  leaveTurn();
  const opening = ++state.opening;
  Object.assign(state, { key, sessionId: null, items: [], before: null, extras: [], ended });
  readOnly(!!ended);
  $("items").replaceChildren();
  $("live").replaceChildren();
  $("title").textContent = key.split(":").slice(2).join(":") || key;
  busy(true);
  closeSidebar();
  let page;
  try {
    page = await api.json(historyPath(key));
  } catch (err) {
    busy(false);
    report(err);
    return;
  }
  if (opening !== state.opening) return;
  Object.assign(state, { key: page.sessionKey, sessionId: page.sessionId, items: page.items,
    before: page.before });
  if (!ended) localStorage.setItem(`clawd.session.${state.agent}`, state.key);
  draw();
  toEnd();
  busy(false);
  refreshSessions();
  if (!ended) refreshContext();
  refreshMcp();
  if (!ended) jobs.refresh(state.key, state.agent);
  else $("jobs").hidden = true;
  if (!ended && page.busy && page.busy.running) follow(page.busy.running);
}

// An ended session is shown, not written to.
function readOnly(on) {
  $("composer").classList.toggle("ended", on);
  for (const id of ["input", "send", "cmd-new", "cmd-compact"]) $(id).disabled = on;
  $("input").placeholder = on ? "This session has ended: it is shown read-only." :
    "Message, or /command";
  $("ended-note").hidden = !on;
  $("meter").hidden = on; // the context meter is a current session's
}

async function renameSession(s) {
  const title = window.prompt("A name for this session:", s.title || "");
  if (title === null || !title.trim()) return;
  const body = { title };
  if (s.current === false) body.sessionId = s.sessionId;
  try {
    await api.json(`/api/sessions/${encodeURIComponent(s.key)}?agent=` +
      `${encodeURIComponent(state.agent)}`, { method: "PATCH", body: JSON.stringify(body) });
  } catch (err) {
    report(err);
    return;
  }
  refreshSessions();
}

async function removeSession(s) {
  const name = s.title || s.key.split(":").slice(2).join(":");
  if (!window.confirm(`Delete "${name}"? It leaves the list; its transcript is kept aside.`)) {
    return;
  }
  const ended = s.current === false ? `&sessionId=${encodeURIComponent(s.sessionId)}` : "";
  try {
    await api.json(`/api/sessions/${encodeURIComponent(s.key)}?agent=` +
      `${encodeURIComponent(state.agent)}${ended}`, { method: "DELETE" });
  } catch (err) {
    report(err);
    return;
  }
  const open = s.current === false ? state.ended === s.sessionId : s.key === state.key &&
    !state.ended;
  if (open) await openSession(`agent:${state.agent}:main`);
  else refreshSessions();
}

async function refreshContext() {
  const opening = state.opening;
  try {
    const found = await api.json(api.sessionPath(state.key, "context", state.agent));
    if (opening !== state.opening) return;
    view.meter(meterNodes(), found);
    $("model").textContent = found.model;
  } catch (err) {
    if (err.status === 401) report(err);
  }
}

// The agent's MCP servers, on or off in this session (none: the section stays hidden).
async function refreshMcp() {
  const opening = state.opening;
  try {
    const found = await api.json(api.sessionPath(state.key, "mcp", state.agent));
    if (opening !== state.opening) return;
    $("mcp").hidden = !found.servers.length;
    view.mcpList($("mcp-list"), found.servers, (name, on) => {
      if (state.ended || state.turn) return refreshMcp(); // not while shown read-only or busy
      return send(`/mcp ${on ? "on" : "off"} ${name}`);
    });
  } catch (err) {
    if (err.status === 401) report(err);
  }
}

// The session list comes a page at a time (the newest first); "More sessions" asks for
// the page after the last one shown.
const listed = { sessions: [], next: null };

async function sessionPage(cursor) {
  const all = $("show-ended").checked ? "&all=true" : "";
  const after = cursor ? `&cursor=${encodeURIComponent(cursor)}` : "";
  return api.json(`/api/sessions?agent=${encodeURIComponent(state.agent)}${all}${after}`);
}

function showSessions() {
  const sessions = listed.sessions.filter((s) => s.key);
  if (!state.ended && !sessions.some((s) => s.key === state.key && s.current !== false)) {
    sessions.unshift({ key: state.key });
  }
  view.sessionList($("sessions"), sessions, { key: state.key, sessionId: state.ended },
    openSession, removeSession, renameSession);
  $("more-sessions").hidden = !listed.next;
}

async function refreshSessions() {
  try {
    const found = await sessionPage(null);
    listed.sessions = found.sessions;
    listed.next = found.nextCursor || null;
    showSessions();
  } catch (err) {
    if (err.status === 401) report(err);
  }
}

async function moreSessions() {
  if (!listed.next) return;
  try {
    const found = await sessionPage(listed.next);
    const seen = new Set(listed.sessions.map((s) => `${s.key} ${s.sessionId}`));
    listed.sessions.push(...found.sessions.filter((s) => !seen.has(`${s.key} ${s.sessionId}`)));
    listed.next = found.nextCursor || null;
    showSessions();
  } catch (err) {
    if (err.status === 401) report(err);
  }
}

function setRunning(running) {
  if (running) busy(true); // and not busy again once the history is read (finish)
  $("send").hidden = running;
  $("stop").hidden = !running;
  $("stop").disabled = false;
}

function newTurn(id, command = false) {
  const last = state.items[state.items.length - 1];
  const turn = { id, last: -1, controller: new AbortController(), key: state.key, command,
    sessionId: state.sessionId, before: last ? last.index + 1 : 0,
    live: new view.Live($("live"), followScroll) };
  // a tool that asks before it acts: the answer goes to the turn, wherever it runs
  turn.live.answer = (number, approve, values = null) => api.call(
    `/api/turns/${encodeURIComponent(turn.id)}/approvals/${number}`,
    { method: "POST", body: JSON.stringify(values ? { approve, values } : { approve }) });
  state.turn = turn;
  $("empty").hidden = true;
  setRunning(true);
  return turn;
}

// Show `response`'s events until the gateway ends the stream (the turn is over: a
// message's ends with `done`, a command's after its output); if the connection breaks
// first, follow the turn again from the last event seen (it goes on at the gateway).
async function play(turn, response) {
  for (let attempt = 0; ; attempt += 1) {
    try {
      for await (const { id, data } of api.events(response)) {
        if (id !== null) turn.last = id;
        turn.live.event(data);
      }
      return;
    } catch (err) {
      if (turn.controller.signal.aborted) throw err;
    }
    if (!turn.id || attempt >= 3) {
      throw new Error("the connection was lost; the reply will be in the history");
    }
    await new Promise((resolve) => setTimeout(resolve, 500 * (attempt + 1)));
    response = await api.call(`/api/turns/${encodeURIComponent(turn.id)}/events`,
      { headers: { "Last-Event-ID": String(turn.last) }, signal: turn.controller.signal });
  }
}

async function send(text) {
  if (!text.trim() || state.turn) return;
  const command = text.startsWith("/") && !text.startsWith("//");
  const turn = newTurn(null, command);
  if (command) turn.live.command(text);
  else turn.live.user(text.startsWith("//") ? text.slice(1) : text);
  turn.live.start();
  try {
    const response = await api.call(api.sessionPath(turn.key, "messages", state.agent), {
      method: "POST", body: JSON.stringify({ text, approvals: true }),
      signal: turn.controller.signal,
      headers: { "Idempotency-Key": api.newKey(), Accept: "text/event-stream" },
    });
    turn.id = response.headers.get("X-Clawd-Turn-Id");
    await play(turn, response);
  } catch (err) {
    if (turn.controller.signal.aborted) return;
    if (err.status === 401) return report(err);
    const wait = err.retryAfter ? ` (try again in ${err.retryAfter} s)` : "";
    turn.live.error(`${err.message}${wait}`);
    if (err.status) $("input").value = $("input").value || text; // not sent: keep it
  }
  await finish(turn);
}

// A turn already running in the session (another tab or client started it).
async function follow(id) {
  if (state.turn) return;
  const turn = newTurn(id);
  turn.live.start();
  try {
    const response = await api.call(`/api/turns/${encodeURIComponent(id)}/events`,
      { signal: turn.controller.signal });
    await play(turn, response);
  } catch (err) {
    if (turn.controller.signal.aborted) return;
    turn.live.error(err.message);
  }
  await finish(turn);
}

async function finish(turn) {
  if (state.turn !== turn) return;
  state.turn = null;
  setRunning(false);
  let page = null;
  try {
    page = await resync();
  } catch (err) {
    report(err);
  }
  if (page && state.key === turn.key) {
    // a command's lines go where it was typed (the top of a session /new started); a
    // message's after its reply
    const after = !turn.command ? page.total : page.sessionId === turn.sessionId ? turn.before : 0;
    // a notice the history keeps with its reply (a loop stopped) is shown from there
    const kept = new Set(page.items.map((item) => item.notice).filter(Boolean));
    for (const node of turn.live.extras) {
      if (node.classList.contains("notice") && kept.has(node.textContent)) continue;
      state.extras.push({ sessionId: page.sessionId, after, node });
    }
    $("live").replaceChildren();
    draw();
    toEnd();
  }
  busy(false);
  refreshContext();
  refreshSessions();
  refreshMcp();
  jobs.refresh(state.key, state.agent); // a reminder the turn set shows at once
  $("input").focus({ preventScroll: true });
}

// Stop showing this tab's turn (switching sessions); the turn goes on at the gateway.
function leaveTurn() {
  if (!state.turn) return;
  state.turn.controller.abort();
  state.turn = null;
  setRunning(false);
}

async function stop() {
  $("stop").disabled = true;
  try {
    await api.json(api.sessionPath(state.key, "abort", state.agent), { method: "POST" });
  } catch (err) {
    report(err);
  }
}

function submit() {
  const input = $("input");
  const text = input.value;
  if (!text.trim() || state.turn) return;
  input.value = "";
  autosize();
  send(text);
}

function autosize() {
  const input = $("input");
  input.style.height = "auto";
  input.style.height = `${Math.min(input.scrollHeight, 200)}px`;
}

function openSidebar() {
  $("sidebar").classList.add("open");
  $("backdrop").hidden = false;
}

function closeSidebar() {
  $("sidebar").classList.remove("open");
  $("backdrop").hidden = true;
}

function wire() {
  $("signin-form").addEventListener("submit", (e) => {
    e.preventDefault();
    api.setToken($("token").value, $("remember").checked);
    $("token").value = "";
    start();
  });
  $("composer").addEventListener("submit", (e) => {
    e.preventDefault();
    submit();
  });
  $("input").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing && !matchMedia("(pointer: coarse)").matches) {
      e.preventDefault();
      submit();
    }
  });
  $("input").addEventListener("input", autosize);
  $("stop").addEventListener("click", stop);
  $("cmd-new").addEventListener("click", () => send("/new"));
  $("cmd-compact").addEventListener("click", () => send("/compact"));
  const older = () => loadOlder().catch(report);
  $("older").addEventListener("click", older);
  new IntersectionObserver((seen) => {
    if (seen.some((s) => s.isIntersecting) && !$("older").hidden) older();
  }, { root: $("log") }).observe($("older"));
  $("menu").addEventListener("click", openSidebar);
  $("backdrop").addEventListener("click", closeSidebar);
  $("agent").addEventListener("change", () => openAgent($("agent").value));
  $("open-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const name = $("open-name").value.trim();
    if (!name) return;
    $("open-name").value = "";
    openSession(name.includes(":") ? name : `agent:${state.agent}:${name}`);
  });
  $("show-ended").addEventListener("change", refreshSessions);
  $("more-sessions").addEventListener("click", moreSessions);
  $("items").addEventListener("clawd-retry", () => send("/retry"));
  $("items").addEventListener("clawd-edit", async (e) => {
    await send("/undo");
    $("input").value = e.detail || "";
    $("input").focus();
  });
  $("signout").addEventListener("click", () => {
    leaveTurn();
    api.forget();
    showSignIn("");
  });
  document.addEventListener("visibilitychange", async () => {
    if (document.visibilityState !== "visible" || state.turn || !state.key) return;
    try {
      const page = await resync();
      if (page) draw();
      refreshContext();
      if (page && page.busy && page.busy.running) follow(page.busy.running);
    } catch (err) {
      report(err);
    }
  });
}

wire();
api.tokenFromFragment();
if (api.token()) start();
else showSignIn("");
