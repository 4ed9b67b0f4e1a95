// notify.js: what scheduled jobs delivered to the web page (docs/automation.md). The
// agent's recent `web` deliveries are read when an agent is opened (so a reminder that came
// while the page was closed is there after a reload) and asked for again every few seconds
// (GET /api/notifications?since=): no stream is held open, since a browser opens at most six
// connections to one server and every open tab would keep one. Each shows as a card at the
// top of the page until it is dismissed; dismissed ones are remembered in this browser.

import * as api from "./api.js";
import * as view from "./view.js";

const SEEN = "clawd.notifications.dismissed";
let following = null; // the round of asking of the agent shown ({stopped})

function dismissed() {
  try {
    return new Set(JSON.parse(localStorage.getItem(SEEN) || "[]"));
  } catch (_) {
    return new Set();
  }
}

function dismiss(id, card) {
  const seen = dismissed();
  seen.add(id);
  localStorage.setItem(SEEN, JSON.stringify([...seen].slice(-200)));
  card.remove();
}

function show(item) {
  const id = `${item.jobId}@${item.scheduledFor}`;
  const box = document.getElementById("notices");
  if (dismissed().has(id) || box.querySelector(`[data-id="${CSS.escape(id)}"]`)) return;
  const card = view.el("div", "notice-card");
  card.dataset.id = id;
  card.setAttribute("role", "status");
  const when = new Date(item.scheduledFor).toLocaleString();
  card.append(view.el("strong", "", item.name ? `Reminder: ${item.name}` : "Reminder"),
    view.el("span", "notice-time", when), view.el("p", "", item.text));
  const close = view.el("button", "link", "Dismiss");
  close.type = "button";
  close.addEventListener("click", () => dismiss(id, card));
  card.append(close);
  box.append(card);
}

const POLL_MS = 5000;

export async function watch(agent) {
  if (following) following.stopped = true;
  const me = { stopped: false };
  following = me;
  document.getElementById("notices").replaceChildren();
  const query = `/api/notifications?agent=${encodeURIComponent(agent)}`;
  let since = "";
  const take = (found) => found.notifications.forEach((item) => {
    show(item);
    if (item.deliveredAt && item.deliveredAt > since) since = item.deliveredAt;
  });
  try {
    take(await api.json(query));
  } catch (_) {
    return; // an older server without automation: nothing to show
  }
  const poll = async () => {
    if (me.stopped) return;
    try {
      take(await api.json(`${query}&since=${encodeURIComponent(since)}`));
    } catch (_) {
      // a server restarting, say: asked again at the next round
    }
    if (!me.stopped) setTimeout(poll, POLL_MS);
  };
  setTimeout(poll, POLL_MS);
}
