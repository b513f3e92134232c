"""The review page's server (aiohttp): one run, on 127.0.0.1 only, behind a random token.

Who may reach it, and how a request proves it, is ``guard``'s: the printed address carries the
server's secret (``?token=``); each page it serves carries a page token of its own, in its
decision forms and for its script's requests (header ``X-Prun-Token``); nothing is kept in the
browser (no cookie). Every request's ``Host``, ``Origin`` and ``Sec-Fetch-Site`` are checked
against the server's own address; anything refused gets 403. Routes:

    GET  /            the page (packets, verdicts, results, diffs, check, cost, decisions)
    GET  /version     {"version": <the run's last event>, "live": bool}: the page reloads
                      itself when it changes
    GET  /run.json    what the page shows, as JSON
    POST /decide      token (the page's), packet, attempt, decision (accept|reject|include),
                      note
    GET  /static/...  the style sheets and the script that follows the run

The page itself is built in a worker thread (reconciliation reads git), at most one at a time,
and kept while the run's version stays the same and nothing in it is still running; its page
token is written into each copy served.
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
from .guard import HEADER, Guard

# Referrer-Policy same-origin: no other origin is ever told the page's address (it holds the
# secret), and the browser names the page's own Origin on its form posts (under no-referrer,
# Chromium sends "Origin: null", which the guard refuses)
HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'self'; script-src 'self'; "
                               "img-src 'self' data:; connect-src 'self'; form-action 'self'; "
                               "frame-ancestors 'none'; base-uri 'none'",
    "X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin", "Cache-Control": "no-store",
    "Cross-Origin-Resource-Policy": "same-origin", "Cross-Origin-Opener-Policy": "same-origin",
}
STATIC = {"review.css": "text/css", "review.js": "text/javascript"}
PUBLIC = ("/static/", "/favicon.ico")       # no data: the guard's checks, no token
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass
class Review:
    """One served run: where its ledger is, who decides, and its guard (the secret)."""

    ledger_path: str
    run_id: str
    who: str | None
    guard: Guard = field(default_factory=Guard)
    # what the cached page holds where each copy served gets its own page token
    _slot: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    _cache: tuple[int, str] | None = None
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    @property
    def token(self) -> str:
        """The secret of the printed address."""
        return self.guard.secret

    def ledger(self) -> Ledger:
        return Ledger.open(self.ledger_path, create=False)

    def _page(self) -> tuple[int, str, bool]:
        with self.ledger() as ledger:
            built = model.build(ledger, self.run_id)
        return built.seq, render.page(built, self._slot), built.live

    async def page(self) -> str:
        """The page, with a page token of its own."""
        return (await self._cached()).replace(self._slot, self.guard.page_token())

    async def _cached(self) -> str:
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


def _headed(response: web.StreamResponse) -> web.StreamResponse:
    response.headers.update(HEADERS)
    return response


def _forbidden(why: str) -> web.Response:
    return web.Response(status=403, text=f"forbidden: {why} (open the address prun review "
                        "printed, and decide on that page)\n")


async def _refusal(review: Review, request: web.Request) -> str | None:
    """Why ``request`` is refused (None: it may be served); see ``guard``."""
    guard = review.guard
    why = guard.refusal(request.method, request.host, request.headers)
    if why is not None:
        return why
    header = request.headers.get(HEADER, "")
    if request.method == "POST":
        form = await request.post()
        return None if guard.may_change(str(form.get("token", "")), header) else \
            "no token of a page this server served"
    if request.path == "/" and "launch" in request.query:   # spent here; index sends it on
        return None if guard.take_launch(request.query["launch"]) else \
            "a launch address already used, or not this server's"
    if request.path.startswith(PUBLIC) or guard.may_read(request.query.get("token", ""),
                                                         header):
        return None
    return "no token"


def app(review: Review) -> web.Application:
    @web.middleware
    async def guarded(request: web.Request, handler: Handler) -> web.StreamResponse:
        why = await _refusal(review, request)
        return _headed(_forbidden(why) if why is not None else await handler(request))

    async def index(request: web.Request) -> web.Response:
        if "launch" in request.query:     # the browser --open started: on to the page
            return web.Response(status=303, headers={"Location": f"/?token={review.token}"})
        return web.Response(text=await review.page(), content_type="text/html")

    async def version(request: web.Request) -> web.Response:
        return web.json_response(await asyncio.to_thread(review._state))

    async def run_json(request: web.Request) -> web.Response:
        return web.json_response(await asyncio.to_thread(review._json))

    async def post_decide(request: web.Request) -> web.StreamResponse:
        form = await request.post()
        packet = str(form.get("packet", ""))
        try:
            line = await asyncio.to_thread(
                review._decide, packet, str(form.get("decision", "")),
                str(form.get("note", "")), str(form.get("attempt", "")) or None)
        except UsageError as e:
            return web.Response(status=409, text=f"not recorded: {e.line()}\n")
        if request.headers.get("Accept", "").startswith("text/plain"):
            return web.Response(text=line + "\n")
        return web.Response(status=303, headers={
            "Location": f"/?token={review.token}#p-{quote(packet, safe='')}"})

    async def static(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name == "code.css":
            return web.Response(text=render.css_code(), content_type="text/css")
        if name not in STATIC:
            raise web.HTTPNotFound()
        text = resources.files(__package__).joinpath("static", name).read_text()
        return web.Response(text=text, content_type=STATIC[name])

    application = web.Application(middlewares=[guarded], client_max_size=64 * 1024)
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
    review.guard.address = f"127.0.0.1:{bound}"
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
        if open_browser:  # a one-time address: a command line is no place for the secret
            import webbrowser

            await asyncio.to_thread(webbrowser.open,
                                    f"http://{review.guard.address}/?launch="
                                    f"{review.guard.new_launch()}")
        await stop.wait()
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        await runner.cleanup()
        with contextlib.suppress(OSError):
            sock.close()
