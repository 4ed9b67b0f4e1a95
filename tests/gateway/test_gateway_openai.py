"""The OpenAI-compatible endpoint, called by the official ``openai`` client over a real
uvicorn on 127.0.0.1 (an ephemeral port): models, completions streamed and not, which
session a request lands in, replayed history, bookkeeping requests kept out, errors; and a
client that disconnects mid-stream does not stop the turn."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import openai
import pytest

from clawd.config import Config
from clawd.frontends.gateway.openai_map import client_id
from clawd.frontends.gateway.server import server
from clawd.providers.scripted import ScriptedProvider

from conftest import make_runtime
from gateway_client import AUTH, TOKEN, served_app

# a real server on a thread; each test as one process on files, and as two workers on one
# PostgreSQL database taking the requests in turn
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("one_or_two_workers")]

TITLE_PROMPT = ("### Task:\nGenerate a concise, 3-5 word title with an emoji summarizing the "
                "chat history.\n### Output:\nJSON format: { \"title\": \"your concise title "
                "here\" }\n### Chat History:\n<chat_history>\nUSER: what is 2+2?\n"
                "ASSISTANT: 4\n</chat_history>")


@contextmanager
def served(tmp_path, provider, *, enabled: bool = True) -> Iterator[tuple[str, object]]:
    config = Config.model_validate({"gateway": {
        "idleSessionSeconds": 0, "shutdownGraceSeconds": 0,
        "http": {"endpoints": {"chatCompletions": {"enabled": enabled}}}}})
    runtime = make_runtime(tmp_path, provider)
    running = server(served_app(config, [runtime], TOKEN), "127.0.0.1", 0)
    thread = threading.Thread(target=running.run, daemon=True)
    thread.start()
    assert running.ready.wait(10)
    try:
        yield f"http://127.0.0.1:{running.port}", runtime
    finally:
        running.should_exit = True
        thread.join(10)


def client(url: str, token: str = TOKEN) -> openai.OpenAI:
    return openai.OpenAI(base_url=url + "/v1", api_key=token, max_retries=0, timeout=10)


def history(url: str, key: str) -> list[str]:
    found = httpx.get(f"{url}/api/sessions/{key}/history", headers=AUTH).json()
    return [item["text"] for item in found["items"]]


def test_models_and_a_completion_through_the_openai_client(tmp_path):
    provider = ScriptedProvider(["Four.", "Five."], chunk_size=2)
    with served(tmp_path, provider) as (url, _):
        ai = client(url)
        assert [m.id for m in ai.models.list().data] == ["clawd:main"]
        first = ai.chat.completions.create(
            model="clawd:main", user="alice",
            messages=[{"role": "system", "content": "be brief"},
                      {"role": "user", "content": "2+2?"}])
        assert first.choices[0].message.content == "Four."
        assert first.usage.total_tokens > 0
        # the client sends the whole conversation again: only the new message is added
        stream = ai.chat.completions.create(
            model="clawd:main", user="alice", stream=True,
            messages=[{"role": "system", "content": "be brief"},
                      {"role": "user", "content": "2+2?"},
                      {"role": "assistant", "content": "Four."},
                      {"role": "user", "content": [{"type": "text", "text": "2+3?"}]}])
        pieces = [c.choices[0].delta.content for c in stream if c.choices
                  and c.choices[0].delta.content]
        assert "".join(pieces) == "Five." and len(pieces) > 1
        assert history(url, "openai:user:" + client_id("alice")) == ["2+2?", "Four.", "2+3?",
                                                                     "Five."]
    sent = provider.requests[-1].messages
    assert [m.text for m in sent if m.role == "user"][-2:] == ["2+2?", "2+3?"]
    assert not any("be brief" in part for part in provider.requests[-1].system)


def test_the_session_comes_from_the_header_then_the_chat_id_then_user(tmp_path):
    provider = ScriptedProvider(default="ok")
    with served(tmp_path, provider) as (url, _):
        ai = client(url)

        def ask(text: str, **kw) -> str:
            raw = ai.chat.completions.with_raw_response.create(
                model="clawd", messages=[{"role": "user", "content": text}], **kw)
            return raw.headers["X-Clawd-Session-Key"]

        assert ask("a", user="bob", extra_headers={"X-Clawd-Session-Key": "work",
                                                   "X-OpenWebUI-Chat-Id": "c1"}) == \
            "agent:main:work"
        assert ask("b", user="bob", extra_headers={"X-OpenWebUI-Chat-Id": "C1/x"}) == \
            "agent:main:openai:chat:" + client_id("C1/x")
        assert client_id("C1/x").startswith("c1-x-")
        assert ask("c", user="bob") == "agent:main:openai:user:" + client_id("bob")
        one, two = ask("d"), ask("e")
        assert one != two and one.startswith("agent:main:openai:")
        assert history(url, "work") == ["a", "ok"]


def test_title_and_tag_requests_stay_out_of_the_session(tmp_path):
    provider = ScriptedProvider(["4", '{"title": "Simple sums"}', '{"tags": ["math"]}'])
    with served(tmp_path, provider) as (url, _):
        ai = client(url)
        chat = {"X-OpenWebUI-Chat-Id": "chat-7"}
        ai.chat.completions.create(model="clawd:main", extra_headers=chat,
                                   messages=[{"role": "user", "content": "what is 2+2?"}])
        title = ai.chat.completions.create(model="clawd:main", extra_headers=chat,
                                           messages=[{"role": "user", "content": TITLE_PROMPT}])
        assert title.choices[0].message.content == '{"title": "Simple sums"}'
        tags = ai.chat.completions.create(
            model="clawd:main", extra_headers=chat, stream=True,
            messages=[{"role": "user", "content": TITLE_PROMPT.replace(
                "Generate a concise, 3-5 word title", "Generate 1-3 broad tags")}])
        assert "".join(c.choices[0].delta.content or "" for c in tags if c.choices) == \
            '{"tags": ["math"]}'
        assert history(url, "openai:chat:" + client_id("chat-7")) == ["what is 2+2?", "4"]
    aside = provider.requests[1]
    assert aside.tools == [] and aside.messages[0].text == TITLE_PROMPT


def test_errors_have_openai_s_shapes(tmp_path):
    with served(tmp_path, ScriptedProvider()) as (url, _):
        with pytest.raises(openai.AuthenticationError):
            client(url, "wrong-token-0123456789").models.list()
        ai = client(url)
        with pytest.raises(openai.NotFoundError, match="unknown agent"):
            ai.chat.completions.create(model="clawd:nobody",
                                       messages=[{"role": "user", "content": "x"}])
        with pytest.raises(openai.BadRequestError, match="last message must be the user"):
            ai.chat.completions.create(model="clawd:main",
                                       messages=[{"role": "assistant", "content": "x"}])
        failed = ai.chat.completions.with_raw_response  # the model fails: a 502
        with pytest.raises(openai.InternalServerError, match="no reply queued"):
            failed.create(model="clawd:main", messages=[{"role": "user", "content": "x"}])
    with served(tmp_path / "off", ScriptedProvider(), enabled=False) as (url, _), \
            pytest.raises(openai.NotFoundError):
        client(url).models.list()


class Slow:
    """A model that streams its reply a few words at a time, slowly."""

    name, model = "slow", "slow"
    words = ["the ", "whole ", "reply, ", "word ", "by ", "word"]

    def stream(self, request):
        from clawd.core.messages import Message, ModelResponse, TextDelta, Usage

        for word in self.words:
            time.sleep(0.1)
            yield TextDelta(word)
        yield ModelResponse(Message.assistant("".join(self.words), usage=Usage(100, 6),
                                              stop_reason="stop"))


def test_a_client_that_disconnects_does_not_stop_the_turn(tmp_path):
    from clawd.loop.runtime import fixed_models

    with served(tmp_path, ScriptedProvider()) as (url, runtime):
        runtime.models = fixed_models(Slow(), 200_000)
        with httpx.stream("POST", f"{url}/api/sessions/main/messages", json={"text": "go"},
                          headers=AUTH, timeout=10) as response:
            turn = response.headers["X-Clawd-Turn-Id"]
            for line in response.iter_lines():
                if line.startswith("data: ") and json.loads(line[6:])["type"] == "delta":
                    break  # gone after the first words
        for _ in range(100):
            now = history(url, "main")
            if now[-1:] == ["the whole reply, word by word"]:
                break
            assert now == ["go"]  # the turn goes on, its reply not in yet
            time.sleep(0.05)
        assert history(url, "main") == ["go", "the whole reply, word by word"]
        again = httpx.get(f"{url}/api/turns/{turn}/events", headers={**AUTH,
                                                                     "Last-Event-ID": "0"})
        kinds = [json.loads(line[6:])["type"] for line in again.text.splitlines()
                 if line.startswith("data: ")]
        assert kinds == ["reply", "done"]


def test_an_anonymous_request_leaves_no_session_behind(tmp_path, one_or_two_workers):
    """No session key, chat id or user: nobody can come back to the session, so it is set
    aside when its turn ends (its transcript kept in deleted/), not listed forever."""
    from gateway_client import gateway

    raw = {"http": {"endpoints": {"chatCompletions": {"enabled": True}}}}
    runtime = make_runtime(tmp_path, ScriptedProvider(default="hello"))
    with gateway(tmp_path, None, raw=raw, runtimes=[runtime]) as http:
        for text in ("hi", "hi again"):
            answer = http.post("/v1/chat/completions", headers=AUTH, json={
                "model": "clawd", "messages": [{"role": "user", "content": text}]})
            assert answer.status_code == 200 and answer.headers["X-Clawd-Session-From"] == "new"
            assert answer.json()["choices"][0]["message"]["content"] == "hello"
        named = http.post("/v1/chat/completions", headers=AUTH, json={
            "model": "clawd", "user": "bob", "messages": [{"role": "user", "content": "hi"}]})
        assert named.status_code == 200
        listed = http.get("/api/sessions", headers=AUTH).json()["sessions"]
        assert [s["key"] for s in listed] == ["agent:main:openai:user:" + client_id("bob")]
    if one_or_two_workers == "one":
        kept = [path.read_text() for path in
                (tmp_path / "state" / "agents" / "main" / "sessions" / "deleted").iterdir()]
    else:  # rows marked deleted
        storage = runtime.storage
        kept = [storage.transcript(i).raw_text() for i in storage._ids(deleted=True)]
    assert len(kept) == 2
    assert all('"hi' in text for text in kept)
