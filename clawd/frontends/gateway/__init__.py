"""``clawd serve``: the HTTP gateway over the same loop, commands and events as the REPL.

``policy`` (who may call, from where: tokens, Host, Origin, failed-auth limits), ``agents``
(one runtime per served agent), ``history`` and
``workspace`` (what the native API reads), ``native`` and ``openai_compat`` (the routes),
``openai_map`` (choosing the session of an OpenAI-style request), ``page`` (the web chat's
files, from ``static/``), ``openapi`` (the description), ``app`` (the ASGI application) and
``server`` (uvicorn and signals). The turn queue the routes and the channels send to is
``frontends.hub``.
docs/gateway.md describes the API.
"""
