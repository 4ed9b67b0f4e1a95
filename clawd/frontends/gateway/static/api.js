// api.js: the web chat's side of the gateway's native API (docs/gateway.md).
//
// The token: pasted once into the sign-in form and kept in sessionStorage (this tab, until
// it closes) or, when asked, localStorage (this browser); or given once as a `#token=...`
// fragment, which is never sent to the server and is taken out of the address at once
// (history.replaceState), so it stays in no history entry after the first load. It is sent
// only as an `Authorization: Bearer` header, never in a URL.
// `call` fetches with it and turns an error answer into an ApiError; `events` reads a
// turn's server-sent events from a fetch body (EventSource can neither POST nor send a
// header).

const TOKEN = "clawd.token";

export function token() {
  return sessionStorage.getItem(TOKEN) || localStorage.getItem(TOKEN) || "";
}

export function setToken(value, remember) {
  forget();
  (remember ? localStorage : sessionStorage).setItem(TOKEN, value.trim());
}

export function forget() {
  sessionStorage.removeItem(TOKEN);
  localStorage.removeItem(TOKEN);
}

// A `#token=...` fragment: kept for this tab and removed from the address and its history
// entry. Whether one was there.
export function tokenFromFragment() {
  const found = location.hash.match(/^#(?:.*&)?token=([^&]+)/);
  if (!found) return false;
  history.replaceState(null, "", location.pathname + location.search);
  setToken(decodeURIComponent(found[1]), false);
  return true;
}

export class ApiError extends Error {
  constructor(status, message, retryAfter) {
    super(message);
    this.status = status;
    this.retryAfter = retryAfter;
  }
}

async function errorOf(response) {
  let message = `${response.status} ${response.statusText}`;
  try {
    const body = await response.json();
    if (body && body.error && body.error.message) message = body.error.message;
  } catch (_) {
    // not JSON: the status line says enough
  }
  return new ApiError(response.status, message, response.headers.get("Retry-After"));
}

export async function call(path, options = {}) {
  const headers = { Authorization: `Bearer ${token()}`, ...(options.headers || {}) };
  if (options.body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, { ...options, headers, cache: "no-store",
    credentials: "omit", referrerPolicy: "no-referrer" });
  if (!response.ok) throw await errorOf(response);
  return response;
}

export async function json(path, options) {
  return (await call(path, options)).json();
}

// Each server-sent event of `response` as {id, data}: its number and its JSON.
export async function* events(response) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    buffer += decoder.decode(value || new Uint8Array(), { stream: !done });
    buffer = buffer.replace(/\r\n?/g, "\n");
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let id = null;
      const data = [];
      for (const line of block.split("\n")) {
        if (line.startsWith("id:")) id = parseInt(line.slice(3).trim(), 10);
        else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
      }
      if (data.length) yield { id, data: JSON.parse(data.join("\n")) };
    }
    if (done) return;
  }
}

// A random key for a send (Idempotency-Key): a retried send never runs twice.
// crypto.getRandomValues works on plain http too, where randomUUID does not.
export function newKey() {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

export function sessionPath(key, what, agent) {
  return `/api/sessions/${encodeURIComponent(key)}/${what}` +
    (agent ? `?agent=${encodeURIComponent(agent)}` : "");
}
