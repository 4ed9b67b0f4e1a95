// log.js: the session's log as this tab shows it: the state of the open session (its
// history items, the pages read, the lines the history does not keep), drawing it, reading
// older pages (loadOlder) and the newest page again (resync), and the log's scrolling.

import * as api from "./api.js";
import * as view from "./view.js";

const $ = (id) => document.getElementById(id);
const PAGE = 50;

export const state = {
  agent: null,
  key: null,
  sessionId: null,
  ended: null, // the id of an ended session shown read-only, else null
  items: [], // the history items shown, in order
  before: null, // where the next older page ends (null: nothing older)
  extras: [], // lines the history does not keep: {sessionId, after, node}
  turn: null, // the turn this tab shows as it streams
  opening: 0, // bumped on each session switch: late answers for another one are dropped
  olderLoading: false,
};

function nearEnd() {
  const log = $("log");
  return log.scrollHeight - log.scrollTop - log.clientHeight < 80;
}

export function toEnd() {
  const log = $("log");
  log.scrollTop = log.scrollHeight;
}

export function followScroll() {
  if (nearEnd()) requestAnimationFrame(toEnd);
}

// Whether the log is still changing (history loading, a turn streaming): aria-busy.
export function busy(on) {
  $("log").setAttribute("aria-busy", on ? "true" : "false");
}

// The path of a page of the session's history: the newest, or the one before `before`.
export function historyPath(key, before = null) {
  return `${api.sessionPath(key, "history", state.agent)}&limit=${PAGE}` +
    (before === null ? "" : `&before=${before}`) +
    (state.ended ? `&sessionId=${encodeURIComponent(state.ended)}` : "");
}

// The history items and the extra lines, in order.
export function draw() {
  const extras = state.extras.filter((x) => x.sessionId === state.sessionId)
    .sort((a, b) => a.after - b.after);
  const nodes = [];
  const calls = new Map();
  let next = 0;
  for (const item of state.items) {
    while (next < extras.length && extras[next].after <= item.index) nodes.push(extras[next++].node);
    nodes.push(...view.itemNodes(item, calls));
  }
  while (next < extras.length) nodes.push(extras[next++].node);
  $("items").replaceChildren(...nodes);
  const replies = $("items").querySelectorAll(".msg.assistant:not(.undone)");
  const messages = $("items").querySelectorAll(".msg.user:not(.undone)");
  if (!state.ended) view.offerLast(replies[replies.length - 1], messages[messages.length - 1]);
  $("older").hidden = state.before === null;
  $("empty").hidden = nodes.length > 0 || $("live").childElementCount > 0;
}

// The page before the oldest shown; an error is the caller's to show.
export async function loadOlder() {
  if (state.before === null || state.olderLoading) return;
  state.olderLoading = true;
  const opening = state.opening;
  const log = $("log");
  try {
    const page = await api.json(historyPath(state.key, state.before));
    if (opening !== state.opening) return;
    const fromEnd = log.scrollHeight - log.scrollTop;
    const first = state.items.length ? state.items[0].index : Infinity;
    state.items = page.items.filter((i) => i.index < first).concat(state.items);
    state.before = page.before;
    draw();
    log.scrollTop = log.scrollHeight - fromEnd;
  } finally {
    state.olderLoading = false;
  }
}

// Read the newest page again and merge it with the older pages shown; null when another
// session was opened meanwhile.
export async function resync() {
  const opening = state.opening;
  const page = await api.json(historyPath(state.key));
  if (opening !== state.opening) return null;
  const first = page.items.length ? page.items[0].index : page.total;
  const kept = state.items.filter((i) => i.index < first);
  const joined = kept.length && kept[kept.length - 1].index === first - 1;
  if (page.sessionId !== state.sessionId || !joined) {
    Object.assign(state, { sessionId: page.sessionId, items: page.items, before: page.before });
  } else {
    state.items = kept.concat(page.items);
  }
  return page;
}
