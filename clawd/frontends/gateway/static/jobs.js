// jobs.js: the open session's scheduled jobs (docs/automation.md): the reminders set in its
// chat and the jobs that run in it, each with its next run in the user's time zone (as the
// server works it out, agents.defaults.userTimezone) or "paused", and buttons to pause,
// resume or delete it. Read again when a session is opened, after each turn (a reminder
// the model just set shows at once) and after each button.

import * as api from "./api.js";
import * as view from "./view.js";

const $ = (id) => document.getElementById(id);
const open = { key: null, agent: null, asked: 0 };

function every(ms) {
  const minutes = Math.round(ms / 60000);
  if (minutes % 1440 === 0) return `every ${minutes / 1440} d`;
  if (minutes % 60 === 0) return `every ${minutes / 60} h`;
  return `every ${minutes} min`;
}

function scheduleText(schedule) {
  if (schedule.kind === "every") return every(schedule.everyMs);
  if (schedule.kind === "cron") return `cron ${schedule.expr} (${schedule.tz})`;
  return "once";
}

function whenText(job) {
  if (!job.enabled) return job.nextRun ? "paused" : "done";
  return job.nextRunLocal ? `next ${job.nextRunLocal} (${job.timezone})` : "done";
}

function button(label, cls, action) {
  const node = view.el("button", cls, label);
  node.type = "button";
  node.addEventListener("click", action);
  return node;
}

async function act(job, how) {
  const path = `/api/jobs/${encodeURIComponent(job.id)}`;
  try {
    if (how === "delete") {
      const name = job.name || job.message;
      if (!window.confirm(`Delete the job "${name}"? Its runs go with it.`)) return;
      await api.json(path, { method: "DELETE" });
    } else {
      await api.json(`${path}/${how}`, { method: "POST" });
    }
  } catch (err) {
    $("jobs-error").textContent = err.message;
    $("jobs-error").hidden = false;
    return;
  }
  await refresh(open.key, open.agent);
}

function row(job) {
  const item = view.el("li", `job${job.enabled ? "" : " paused"}`);
  item.dataset.id = job.id;
  const text = view.el("div", "job-text");
  text.append(view.el("span", "job-name", job.name || job.message),
    view.el("span", "job-when", `${scheduleText(job.schedule)} · ${whenText(job)}`));
  const tools = view.el("div", "job-actions");
  if (job.enabled) tools.append(button("Pause", "job-pause", () => act(job, "pause")));
  else if (job.nextRun) tools.append(button("Resume", "job-resume", () => act(job, "resume")));
  tools.append(button("Delete", "job-delete", () => act(job, "delete")));
  item.append(text, tools);
  return item;
}

// Show the jobs of session `key` of `agent` (hidden when it has none).
export async function refresh(key, agent) {
  Object.assign(open, { key, agent });
  const asked = ++open.asked;
  let found;
  try {
    found = await api.json(api.sessionPath(key, "jobs", agent));
  } catch (_) {
    if (asked === open.asked) $("jobs").hidden = true; // an older server: no panel
    return;
  }
  if (asked !== open.asked) return; // another session was opened meanwhile
  $("jobs-error").hidden = true;
  $("jobs-count").textContent = `(${found.jobs.length})`;
  $("jobs-list").replaceChildren(...found.jobs.map(row));
  $("jobs").hidden = found.jobs.length === 0;
}
