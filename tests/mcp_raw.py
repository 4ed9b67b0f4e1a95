"""An MCP server written by hand (JSON-RPC over stdio, no SDK), for the listings and results
an SDK server would not send: ``python tests/mcp_raw.py SERVER.json``.

The file holds a JSON object: ``tools`` (the ``tools/list`` entries, sent as they are: the same
name twice, a schema without ``"type"``, a description of any length), ``results`` (by tool
name, the ``tools/call`` result sent as it is; absent: a text echoing the arguments),
``junk`` (lines printed on stdout before the first answer), ``instructions``, ``env`` (a tool
``env`` answers with these variables of the server's environment), ``startDelay``
(seconds before reading anything) and ``startLog`` (a file that gets a line at each start).
"""

from __future__ import annotations

import json
import os
import sys
import time


def answer(spec: dict, request: dict) -> dict | None:
    method, params = request.get("method"), request.get("params") or {}
    if "id" not in request:
        return None
    if method == "initialize":
        result = {"protocolVersion": params.get("protocolVersion", "2025-06-18"),
                  "capabilities": {"tools": {}},
                  "serverInfo": {"name": "raw", "version": "1"}}
        if spec.get("instructions"):
            result["instructions"] = spec["instructions"]
    elif method == "tools/list":
        result = {"tools": spec.get("tools", [])}
    elif method == "tools/call":
        name = params.get("name")
        if name == "env":
            text = json.dumps({k: os.environ.get(k) for k in spec.get("env", [])})
            result = {"content": [{"type": "text", "text": text}]}
        else:
            result = spec.get("results", {}).get(name) or {"content": [{
                "type": "text", "text": f"{name} {json.dumps(params.get('arguments'))}"}]}
    elif method == "ping":
        result = {}
    else:
        return {"jsonrpc": "2.0", "id": request["id"],
                "error": {"code": -32601, "message": f"no method {method}"}}
    return {"jsonrpc": "2.0", "id": request["id"], "result": result}


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as handle:
        spec = json.load(handle)
    if spec.get("startLog"):
        with open(spec["startLog"], "a", encoding="utf-8") as log:
            log.write(f"started {os.getpid()}\n")
    time.sleep(spec.get("startDelay", 0))
    for line in spec.get("junk", []):
        print(line, flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        reply = answer(spec, json.loads(line))
        if reply is not None:
            print(json.dumps(reply), flush=True)


if __name__ == "__main__":
    main()
