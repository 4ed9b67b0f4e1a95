"""The web chat on a hostile web, in a real browser: the token is pasted (or given once as a
fragment) and never travels in a URL; a page from another origin cannot make the gateway
do anything; what the model writes is never markup."""

from __future__ import annotations

import pytest

from fakeserver import FakeServer, Response
from webchat import TOKEN, idle, send, shot, watch

pytestmark = pytest.mark.slow  # a browser and a server process


def _requests(page) -> list:
    seen: list = []
    page.on("request", lambda request: seen.append(request))
    return seen


def test_sign_in_keeps_the_token_out_of_urls(web, web_served):
    context = web.context()
    page = context.new_page()
    watch(page, web.errors)
    seen = _requests(page)
    page.goto(f"{web_served.url}/")
    page.wait_for_selector("#signin:not([hidden])")
    assert TOKEN not in page.content()
    shot(page, "desktop-sign-in")
    page.fill("#token", "not-the-token-0123456789")
    page.click("#signin-form button[type=submit]")
    page.wait_for_selector("#signin-error:not([hidden])")
    assert "refused" in page.text_content("#signin-error")
    page.fill("#token", TOKEN)
    page.click("#signin-form button[type=submit]")
    page.wait_for_selector("#app:not([hidden])")
    idle(page)
    # kept for this tab only (the box was not ticked), and a reload keeps it
    assert page.evaluate("sessionStorage.getItem('clawd.token')") == TOKEN
    assert page.evaluate("localStorage.getItem('clawd.token')") is None
    page.reload()
    page.wait_for_selector("#app:not([hidden])")
    # a new tab of the same browser asks again; signing out forgets it
    other = context.new_page()
    other.goto(f"{web_served.url}/")
    other.wait_for_selector("#signin:not([hidden])")
    page.click("#signout")
    page.wait_for_selector("#signin:not([hidden])")
    assert page.evaluate("sessionStorage.getItem('clawd.token')") is None
    _no_token_in_urls(seen)
    api = [r for r in seen if "/api/" in r.url]
    assert api and all(r.all_headers().get("authorization") in (
        f"Bearer {TOKEN}", "Bearer not-the-token-0123456789") for r in api)


def test_a_token_fragment_is_read_once_and_taken_out_of_the_address(web, web_served):
    page = web.context().new_page()
    watch(page, web.errors)
    seen = _requests(page)
    page.goto(f"{web_served.url}/#token={TOKEN}")
    page.wait_for_selector("#app:not([hidden])")
    idle(page)
    assert TOKEN not in page.url and "#" not in page.url
    assert TOKEN not in page.evaluate("document.referrer + location.href")
    # the entry was replaced, not added to: no step of the tab's history holds the token
    assert page.evaluate("history.length") == 2  # the new tab's blank page, then the chat
    page.go_back()
    assert page.url == "about:blank"
    page.go_forward()
    assert page.url == f"{web_served.url}/"
    page.wait_for_selector("#app:not([hidden])")
    idle(page)
    send(page, "hello")
    idle(page)
    page.reload()
    page.wait_for_selector("#app:not([hidden])")
    assert TOKEN not in page.url
    _no_token_in_urls(seen)


def _no_token_in_urls(requests) -> None:
    assert requests
    for request in requests:
        assert TOKEN not in request.url, request.url
        assert TOKEN not in (request.headers.get("referer") or "")


HOSTILE = """<!doctype html><meta charset="utf-8"><title>a page elsewhere</title>
<form id="form" method="post" enctype="text/plain" target="sink"
      action="{gateway}/api/sessions/hostile/messages">
  <input name='{{"text": "from a form", "x": "' value='"}}'></form>
<iframe name="sink"></iframe>
<script>
window.results = {{}};
const url = "{gateway}/api/sessions/hostile/messages";
const body = JSON.stringify({{text: "from another origin"}});
async function attempt(name, run) {{
  try {{ const r = await run(); results[name] = "answered " + r.status + " " + r.type; }}
  catch (e) {{ results[name] = "failed: " + e.name; }}
}}
(async () => {{
  // with the token, as JSON: the browser asks first (a preflight) and is not allowed
  await attempt("cors", () => fetch(url, {{method: "POST", body, headers: {{
    "Authorization": "Bearer {token}", "Content-Type": "application/json"}}}}));
  // a "simple" request needs no preflight: it reaches the gateway, which refuses its Origin
  await attempt("simple", () => fetch(url, {{method: "POST", body, mode: "no-cors",
    headers: {{"Content-Type": "text/plain"}}}}));
  await attempt("read", () => fetch("{gateway}/api/sessions", {{headers: {{
    "Authorization": "Bearer {token}"}}}}));
  document.getElementById("form").submit();
  results.done = true;
}})();
</script>"""


def test_a_page_from_another_origin_cannot_post_to_the_gateway(web, web_served, stand_in):
    with FakeServer() as elsewhere:  # another port of 127.0.0.1: another origin
        html = HOSTILE.format(gateway=web_served.url, token=TOKEN).encode()
        elsewhere.default("GET", "/", lambda request: Response(
            200, html, {"content-type": "text/html; charset=utf-8"}))
        page = web.context().new_page()
        statuses: dict[str, list[int]] = {}
        page.on("response", lambda r: statuses.setdefault(r.request.method, []).append(
            r.status) if r.url.startswith(web_served.url) else None)
        page.goto(f"{elsewhere.url}/")
        page.wait_for_function("() => window.results && window.results.done")
        page.wait_for_timeout(500)  # the form's post
        results = page.evaluate("window.results")
    assert results["cors"] == "failed: TypeError"
    assert results["read"] == "failed: TypeError"  # no CORS: the answer is not the page's
    assert results["simple"] == "answered 0 opaque"
    # the requests that reached the gateway were refused there (403: a foreign Origin)
    assert statuses.get("POST") and set(statuses["POST"]) == {403}, statuses
    assert stand_in.seen == []
    history = web_served.api("GET", "/api/sessions/hostile/history").json()
    assert history["items"] == [] and history["sessionId"] is None


MARKS = [
    "<script>window.pwned = 1</script>",
    "<img src=x onerror=\"window.pwned = 2\">",
    "[click](javascript:window.pwned=3)",
    "[x](https://example.com\" onmouseover=\"window.pwned=4)",
    "**<b onclick=\"window.pwned=5\">bold</b>**",
    "`<svg onload=window.pwned=6>`",
    "```html\n</code></pre><img src=x onerror=window.pwned=7>\n```",
    "| <i>a</i> | b |\n|---|---|\n| <iframe src=javascript:1> | c |",
    "> <a href=\"javascript:window.pwned=8\">quote</a>",
    "- <details open ontoggle=window.pwned=9>",
    "https://example.com/?q=<script>",
    "\u0000 0 \u0000 [a](data:text/html,<script>window.pwned=10</script>)",
]
ALLOWED = {"P", "BR", "H1", "H2", "H3", "H4", "H5", "H6", "UL", "OL", "LI", "PRE", "CODE",
           "STRONG", "EM", "DEL", "A", "BLOCKQUOTE", "HR", "DIV", "TABLE", "THEAD", "TBODY",
           "TR", "TH", "TD", "SPAN"}  # SPAN: a highlighted token of a code block


def test_the_markdown_renderer_makes_no_markup_of_the_models_text(web):
    page = web.page()
    found = page.evaluate("""async (marks) => {
        const { render } = await import("/ui/markdown.js");
        const out = [];
        for (const mark of marks) {
            const box = document.createElement("div");
            box.innerHTML = render(mark);
            document.body.append(box);
            for (const node of box.querySelectorAll("*")) {
                const attrs = [...node.attributes].map(a => [a.name, a.value]);
                out.push({tag: node.tagName, attrs, mark});
            }
            box.querySelectorAll("a").forEach(a => a.dispatchEvent(new MouseEvent("mouseover")));
        }
        await new Promise(r => setTimeout(r, 100));
        return {out, pwned: window.pwned === undefined ? null : window.pwned};
    }""", MARKS)
    assert found["pwned"] is None
    for node in found["out"]:
        assert node["tag"] in ALLOWED, node
        for name, value in node["attrs"]:
            assert name in ("href", "target", "rel", "class", "start"), node
            if name == "href":
                assert value.startswith(("https://", "http://", "mailto:")), node
                assert '"' not in value and " " not in value, node
            if node["tag"] == "A":
                assert dict(node["attrs"])["rel"] == "noopener noreferrer"
            if node["tag"] == "SPAN":
                assert value in ("tok-com", "tok-str", "tok-num", "tok-kw"), node
