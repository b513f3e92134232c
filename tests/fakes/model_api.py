"""A loopback stand-in for the Anthropic Messages API and the Gemini API, so that the real
Claude Code and Gemini CLIs can run offline in tests.

    python model_api.py LOG_FILE

Listens on 127.0.0.1 on a free port, prints ``PORT <n>`` once it listens, and appends one JSON
line per model request to LOG_FILE: ``{"api", "path", "turns", "hang", "tool_result",
"tools"}``, ``turns`` being how many messages the request carried (a resumed conversation
carries its earlier turns), ``tools`` the names of the tools the request offered the model.

Every model request gets a short streamed text answer, except:

- one whose body holds ``MOCK-HANG``: it is held open until the client goes away (a worker
  that hangs);
- one whose body holds ``MOCK-QUOTA``: HTTP 429, the API's own shape for an exhausted quota
  that does not reset soon (Anthropic: ``retry-after: 3600``; Gemini: a daily quota), which
  neither CLI retries;
- one whose prompt holds a line ``MOCK-SHELL: <command>``: the first answer is a call of the
  CLI's shell tool (Claude's ``Bash``, Gemini's ``run_shell_command``) with that command, and
  the answer to the tool's result is the text; the log line of that second request has
  ``tool_result``, the text the CLI sent back;
- likewise a line ``MOCK-TOOL: <tool name> <JSON arguments>`` calls that tool (an MCP
  server's, say).

A prompt line ``MOCK-ANSWER: <text>`` makes ``<text>`` the answer (``\\n`` a new line).
Any other path answers ``{}`` (the CLIs' start-up probes).
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import uuid

from aiohttp import web

ANSWER = "The mock model answers: all done, nothing else to report."
HANG = "MOCK-HANG"
QUOTA = "MOCK-QUOTA"
SHELL = re.compile(r"MOCK-SHELL: ([^\n\\]+)")
SCRIPTED = re.compile(r"MOCK-ANSWER: (.+)")
TOOL = re.compile(r"MOCK-TOOL: (\S+) (\{.*\})")
SHELL_TOOLS = {"anthropic": "Bash", "gemini": "run_shell_command"}


def tool_call(api: str, conversation: object, raw: str) -> tuple[str, dict] | None:
    """The tool call the conversation scripts (``MOCK-SHELL``, ``MOCK-TOOL``), once: none
    after a tool's result came back."""
    if '"tool_result"' in raw or '"functionResponse"' in raw:
        return None
    text = texts(conversation)
    if found := TOOL.search(text):
        return found.group(1), json.loads(found.group(2))
    if found := SHELL.search(text):
        return SHELL_TOOLS[api], {"command": found.group(1).strip(),
                                  "description": "run the scripted command"}
    return None


def answer(conversation: object) -> str:
    """The answer the conversation's first ``MOCK-ANSWER:`` line scripts (its literal ``\\n``
    a new line), else ``ANSWER``."""
    found = SCRIPTED.search(texts(conversation))
    return found.group(1).strip().replace("\\n", "\n") if found else ANSWER


def log(request: web.Request, api: str, turns: int, hang: bool,
        tool_result: str | None = None, tools: list[str] | None = None) -> None:
    with open(request.app["log"], "a") as f:
        f.write(json.dumps({"api": api, "path": request.path, "turns": turns, "hang": hang,
                            "tool_result": tool_result, "tools": tools or []}) + "\n")


def offered(api: str, body: dict) -> list[str]:
    """The names of the tools a request offers the model."""
    tools = [t for t in body.get("tools") or () if isinstance(t, dict)]
    if api == "anthropic":
        return [t.get("name") for t in tools]
    return [f.get("name") for t in tools for f in t.get("functionDeclarations") or ()]


def texts(value: object) -> str:
    """Every string inside ``value``, joined (a tool result's content, whatever its shape)."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return "\n".join(texts(v) for v in value.values())
    if isinstance(value, list):
        return "\n".join(texts(v) for v in value)
    return ""


def anthropic_tool_result(body: dict) -> str | None:
    last = (body.get("messages") or [{}])[-1]
    content = last.get("content")
    if last.get("role") == "user" and isinstance(content, list):
        results = [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]
        if results:
            return texts([b.get("content") for b in results])
    return None


def gemini_tool_result(body: dict) -> str | None:
    last = (body.get("contents") or [{}])[-1]
    parts = [p["functionResponse"] for p in last.get("parts", []) if "functionResponse" in p]
    return texts(parts) if parts else None


async def held_open() -> None:
    """Until the client disconnects (aiohttp cancels the handler then)."""
    while True:
        await asyncio.sleep(3600)


def sse(event: str | None, data: object) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data)}\n\n".encode()


async def receive(request: web.Request, api: str,
                  raw: str | None = None) -> tuple[str, dict]:
    """The request's text and JSON, logged; a ``MOCK-HANG`` request is held open here."""
    raw = await request.text() if raw is None else raw
    body = json.loads(raw or "{}")
    if api == "anthropic":
        turns, done = len(body.get("messages", [])), anthropic_tool_result(body)
    else:
        turns, done = len(body.get("contents", [])), gemini_tool_result(body)
    log(request, api, turns, HANG in raw, done, offered(api, body))
    if HANG in raw:
        await held_open()
    return raw, body


async def anthropic(request: web.Request) -> web.StreamResponse:
    raw, body = await receive(request, "anthropic")
    if QUOTA in raw:
        return web.json_response(
            {"type": "error", "error": {"type": "rate_limit_error", "message":
                                        "Your usage limit is reached (mock quota exhausted)."}},
            status=429, headers={"retry-after": "3600"})
    call = tool_call("anthropic", body.get("messages", []), raw)
    usage = {"input_tokens": 12, "output_tokens": 9, "cache_read_input_tokens": 0,
             "cache_creation_input_tokens": 0}
    message = {"id": f"msg_mock_{uuid.uuid4().hex[:16]}", "type": "message",
               "role": "assistant", "model": body.get("model"), "stop_sequence": None}
    if not body.get("stream"):
        return web.json_response({**message, "content": [{"type": "text",
                                                          "text": answer(body["messages"])}],
                                  "stop_reason": "end_turn", "usage": usage})
    if call:
        block = {"type": "tool_use", "id": f"toolu_mock_{uuid.uuid4().hex[:16]}",
                 "name": call[0], "input": {}}
        delta = {"type": "input_json_delta", "partial_json": json.dumps(call[1])}
        stop = "tool_use"
    else:
        block = {"type": "text", "text": ""}
        delta = {"type": "text_delta", "text": answer(body.get("messages", []))}
        stop = "end_turn"
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    for event, data in (
            ("message_start", {"type": "message_start",
                               "message": {**message, "content": [], "stop_reason": None,
                                           "usage": usage}}),
            ("content_block_start", {"type": "content_block_start", "index": 0,
                                     "content_block": block}),
            ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                     "delta": delta}),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            ("message_delta", {"type": "message_delta",
                               "delta": {"stop_reason": stop, "stop_sequence": None},
                               "usage": {"output_tokens": 9}}),
            ("message_stop", {"type": "message_stop"})):
        await resp.write(sse(event, data))
    return resp


async def gemini(request: web.Request) -> web.StreamResponse:
    raw = await request.text()
    if request.path.endswith(":countTokens"):
        return web.json_response({"totalTokens": 12})
    raw, body = await receive(request, "gemini", raw)
    if QUOTA in raw:
        return web.json_response({"error": {
            "code": 429, "status": "RESOURCE_EXHAUSTED",
            "message": "You have exhausted your daily quota on this model.",
            "details": [
                {"@type": "type.googleapis.com/google.rpc.QuotaFailure",
                 "violations": [{"quotaMetric": "generativelanguage.googleapis.com/"
                                                "generate_content_requests",
                                 "quotaId": "GenerateRequestsPerDayPerProjectPerModel"}]},
                {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "3600s"}]}},
            status=429)
    call = tool_call("gemini", body.get("contents", []), raw)
    part = ({"functionCall": {"name": call[0], "args": call[1]}} if call
            else {"text": answer(body.get("contents", []))})
    chunk = {"candidates": [{"content": {"role": "model", "parts": [part]},
                             "finishReason": "STOP", "index": 0}],
             "usageMetadata": {"promptTokenCount": 12, "candidatesTokenCount": 9,
                               "totalTokenCount": 21},
             "modelVersion": "gemini-mock"}
    if ":streamGenerateContent" not in request.path:
        return web.json_response(chunk)
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    await resp.write(sse(None, chunk))
    return resp


async def anything(request: web.Request) -> web.Response:
    return web.json_response({})


async def main(log_file: str) -> None:
    app = web.Application()
    app["log"] = log_file
    app.router.add_post("/v1/messages", anthropic)
    app.router.add_post("/v1beta/{rest:.*}", gemini)
    app.router.add_route("*", "/{rest:.*}", anything)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    print(f"PORT {runner.addresses[0][1]}", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
