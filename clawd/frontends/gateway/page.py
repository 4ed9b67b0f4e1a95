"""The web chat's files: ``/`` (the page) and ``/ui/{name}`` (its CSS and JavaScript), read
from the package's ``static`` folder and served without a token (``policy.needs_no_token``: they
hold no secret; the page asks for the token and sends it as a bearer header).

Every answer carries a Content-Security-Policy that lets the page load and call only its
own origin (no inline script, no other host, no framing), and ``Referrer-Policy:
no-referrer``; only the files in the folder are served, by name, never a path.
"""

from __future__ import annotations

from importlib import resources

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from clawd.frontends.gateway.workspace import NotFound

MEDIA = {".html": "text/html; charset=utf-8", ".css": "text/css; charset=utf-8",
         ".js": "text/javascript; charset=utf-8", ".svg": "image/svg+xml"}
HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; "
                               "img-src 'self' data:; connect-src 'self'; base-uri 'none'; "
                               "form-action 'none'; frame-ancestors 'none'",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-cache",
}


def _read(name: str) -> tuple[bytes, str]:
    suffix = name[name.rfind("."):] if "." in name else ""
    if "/" in name or "\\" in name or name.startswith(".") or suffix not in MEDIA:
        raise NotFound(f"no file {name!r} in the web chat")
    found = resources.files("clawd.frontends.gateway").joinpath("static", name)
    if not found.is_file():
        raise NotFound(f"no file {name!r} in the web chat")
    return found.read_bytes(), MEDIA[suffix]


def _answer(name: str) -> Response:
    body, media = _read(name)  # NotFound: the app's handler answers 404
    return Response(body, 200, HEADERS, media_type=media)


async def index(request: Request) -> Response:
    return _answer("index.html")


async def asset(request: Request) -> Response:
    return _answer(request.path_params["name"])


ROUTES = [Route("/", index), Route("/ui/{name}", asset)]
