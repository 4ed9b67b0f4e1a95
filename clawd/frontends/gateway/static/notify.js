// notify.js: what scheduled jobs delivered to the web page (docs/automation.md). The
// agent's recent `web` deliveries are read when an agent is opened (so a reminder that came
// while the page was closed is there after a reload) and new ones are followed over the
// server-sent events of GET /api/notifications. Each shows as a card at the top of the page
// until it is dismissed; dismissed ones are remembered in this browser.

import * as api from "./api.js";
import * as view from "./view.js";

const SEEN = "clawd.notifications.dismissed";
let following = null; // the AbortController of the stream being followed

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

export async function watch(agent) {
  if (following) following.abort();
  document.getElementById("notices").replaceChildren();
  const query = `?agent=${encodeURIComponent(agent)}`;
  try {
    const found = await api.json(`/api/notifications${query}`);
    found.notifications.forEach(show);
  } catch (_) {
    return; // an older server without automation: nothing to show
  }
  const controller = new AbortController();
  following = controller;
  for (;;) {
    try {
      const response = await api.call(`/api/notifications${query}`, {
        headers: { Accept: "text/event-stream" }, signal: controller.signal });
      for await (const event of api.events(response)) show(event.data);
    } catch (_) {
      if (controller.signal.aborted) return;
    }
    await new Promise((done) => setTimeout(done, 3000)); // dropped: follow again
    if (controller.signal.aborted) return;
  }
}
