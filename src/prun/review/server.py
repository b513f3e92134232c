"""The review page's server (aiohttp): one run, on 127.0.0.1 only, behind a random token.

Every request must carry the token: in the query once (``?token=``, as printed), after which
a cookie (HttpOnly, SameSite=Strict) carries it; a request with neither, or with another
Host than the server's own address, gets 403. A decision's POST carries the token in its
form too (so no other page can post one). Routes:

    GET  /            the page (packets, verdicts, results, diffs, check, cost, decisions)
    GET  /version     {"version": <the run's last event>, "live": bool}: the page reloads
                      itself when it changes
    GET  /run.json    what the page shows, as JSON
    POST /decide      token, packet, attempt, decision (accept|reject|include), note
    GET  /static/...  the style sheets and the script that follows the run

The page itself is built in a worker thread (reconciliation reads git), at most one at a time,
and kept while the run's version stays the same and nothing in it is still running.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import signal
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from importlib import resources
from typing import Any
from urllib.parse import quote

from aiohttp import web

from ..errors import UsageError
from ..ledger import Ledger
from . import model, render
from .decide import decide

COOKIE = "prun_review"
HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'self'; script-src 'self'; "
                               "img-src 'self' data:; connect-src 'self'; form-action 'self'; "
                               "frame-ancestors 'none'; base-uri 'none'",
    "X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer", "Cache-Control": "no-store",
}
STATIC = {"review.css": "text/css", "review.js": "text/javascript"}
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass
class Review:
    """One served run: where its ledger is, the token, who decides."""

    ledger_path: str
    run_id: str
    who: str | None
    token: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    hosts: frozenset[str] = frozenset()
    _cache: tuple[int, str] | None = None
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    def ledger(self) -> Ledger:
        return Ledger.open(self.ledger_path, create=False)

    def _page(self) -> tuple[int, str, bool]:
        with self.ledger() as ledger:
            built = model.build(ledger, self.run_id)
        return built.seq, render.page(built, self.token), built.live

    async def page(self) -> str:
        async with self._lock:
            seq = await asyncio.to_thread(self._version)
            if self._cache and self._cache[0] == seq:
                return self._cache[1]
            seq, html, live = await asyncio.to_thread(self._page)
            self._cache = None if live else (seq, html)
            return html

    def _version(self) -> int:
        with self.ledger() as ledger:
            return model.version(ledger, self.run_id)

    def _state(self) -> dict[str, Any]:
        with self.ledger() as ledger:
            run = ledger.run(self.run_id)
            return {"version": model.version(ledger, self.run_id),
                    "live": bool(run and run["status"] == "running")}

    def _json(self) -> dict[str, Any]:
        with self.ledger() as ledger:
            return model.build(ledger, self.run_id).as_dict()

    def _decide(self, packet: str, decision: str, note: str, attempt: str | None) -> str:
        with self.ledger() as ledger:
            return decide(ledger, self.run_id, packet, decision, note=note, who=self.who,
                          attempt_id=attempt).line()


def _allowed(review: Review, request: web.Request) -> tuple[bool, bool]:
    """(the request may be served, it brought the token in its query)."""
    if request.host not in review.hosts:
        return False, False
    if _same(request.query.get("token", ""), review.token):
        return True, True
    return _same(request.cookies.get(COOKIE, ""), review.token), False


def _same(given: str, token: str) -> bool:
    """``given`` is the token (compared in constant time; any text may be given)."""
    return bool(given) and secrets.compare_digest(given.encode(), token.encode())


def app(review: Review) -> web.Application:
    @web.middleware
    async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
        ok, fresh = _allowed(review, request)
        if not ok:
            response: web.StreamResponse = web.Response(
                status=403, text="forbidden: open the address prun review printed\n")
        else:
            response = await handler(request)
            if fresh:
                response.set_cookie(COOKIE, review.token, httponly=True, samesite="Strict",
                                    path="/")
        response.headers.update(HEADERS)
        return response

    async def index(request: web.Request) -> web.Response:
        return web.Response(text=await review.page(), content_type="text/html")

    async def version(request: web.Request) -> web.Response:
        return web.json_response(await asyncio.to_thread(review._state))

    async def run_json(request: web.Request) -> web.Response:
        return web.json_response(await asyncio.to_thread(review._json))

    async def post_decide(request: web.Request) -> web.StreamResponse:
        form = await request.post()
        if not _same(str(form.get("token", "")), review.token):
            return web.Response(status=403, text="forbidden: the form carries no valid token\n")
        packet = str(form.get("packet", ""))
        try:
            line = await asyncio.to_thread(
                review._decide, packet, str(form.get("decision", "")),
                str(form.get("note", "")), str(form.get("attempt", "")) or None)
        except UsageError as e:
            return web.Response(status=409, text=f"not recorded: {e.line()}\n")
        if request.headers.get("Accept", "").startswith("text/plain"):
            return web.Response(text=line + "\n")
        return web.Response(status=303, headers={"Location": f"/#p-{quote(packet, safe='')}"})

    async def static(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name == "code.css":
            return web.Response(text=render.css_code(), content_type="text/css")
        if name not in STATIC:
            raise web.HTTPNotFound()
        text = resources.files(__package__).joinpath("static", name).read_text()
        return web.Response(text=text, content_type=STATIC[name])

    application = web.Application(middlewares=[guard], client_max_size=64 * 1024)
    application.add_routes([web.get("/", index), web.get("/version", version),
                            web.get("/run.json", run_json), web.post("/decide", post_decide),
                            web.get("/static/{name}", static),
                            web.get("/favicon.ico", lambda _: no_icon())])
    return application


async def no_icon() -> web.Response:
    return web.Response(status=204)


def bind(port: int = 0) -> socket.socket:
    """A listening socket on 127.0.0.1 (``port`` 0: a free one)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
    except OSError as e:
        sock.close()
        raise UsageError(f"cannot listen on 127.0.0.1:{port}: {e.strerror}",
                         hint="give another --port, or none for a free one")
    sock.listen(64)
    sock.setblocking(False)
    return sock


async def serve(review: Review, *, port: int = 0, open_browser: bool = False,
                say: Callable[[str], None] = print) -> None:
    """Serve ``review`` until SIGINT or SIGTERM; ``say`` hears the REVIEW line."""
    sock = bind(port)
    bound = sock.getsockname()[1]
    review.hosts = frozenset({f"127.0.0.1:{bound}", f"localhost:{bound}"})
    runner = web.AppRunner(app(review), access_log=None, handle_signals=False,
                           shutdown_timeout=2)
    await runner.setup()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await web.SockSite(runner, sock).start()
        url = f"http://127.0.0.1:{bound}/?token={review.token}"
        say(f"REVIEW {url}")
        if open_browser:
            import webbrowser

            await asyncio.to_thread(webbrowser.open, url)
        await stop.wait()
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        await runner.cleanup()
        with contextlib.suppress(OSError):
            sock.close()
