"""Who may reach the review page, and how a request proves it (no web library here).

The server holds one secret: the token of the address it printed (``/?token=<secret>``). Each
page it serves carries a page token of its own, ``<nonce>.<HMAC-SHA256(secret, nonce)>``, in
its decision forms and in ``<meta name="prun-token">``, which the page's script sends back in
the ``X-Prun-Token`` header. Nothing is kept in the browser: no cookie, since a browser sends
a cookie for 127.0.0.1 to every port of 127.0.0.1, so the page of any local process would be
handed it.

Every request, whatever it asks for:

    Host            exactly 127.0.0.1:<port> (a name rebound to 127.0.0.1 is refused)
    Origin          when sent, http://127.0.0.1:<port>; a POST must send it (browsers do)
    Sec-Fetch-Site  when sent, same-origin, or none (an address typed or opened from a
                    terminal) for a GET; a POST must come from the page: same-origin

and then:

    GET  /, /version, /run.json    the secret in the query, or a page token in X-Prun-Token
    GET  /?launch=<token>          once: the browser ``--open`` started, sent on to the page
    POST /decide                   a page token, in the form's ``token`` or in X-Prun-Token
    GET  /static/..., /favicon.ico nothing more: the same bytes for every run, no data

A page on another port cannot read a page (the browser's same-origin rule), so it never holds
a page token; its requests carry its own Origin and ``Sec-Fetch-Site: same-site``; and a
header it would add to show a token makes the browser ask first (a preflight, refused here).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from base64 import urlsafe_b64encode
from collections.abc import Mapping
from dataclasses import dataclass, field

HEADER = "X-Prun-Token"
TOKEN_MAX = 200          # characters of any token looked at; a longer one is no token
READS = frozenset({"none", "same-origin"})


def _mac(secret: str, nonce: str) -> str:
    digest = hmac.new(secret.encode(), nonce.encode(), hashlib.sha256).digest()
    return urlsafe_b64encode(digest).rstrip(b"=").decode()


def _same(given: str, expected: str) -> bool:
    """``given`` is ``expected``, compared in constant time (any text may be given)."""
    return 0 < len(given) <= TOKEN_MAX and secrets.compare_digest(given.encode(),
                                                                  expected.encode())


@dataclass
class Guard:
    """The secret of one served run, and the address it is served at."""

    secret: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    address: str = ""        # 127.0.0.1:<port>, once bound
    launch: str | None = None   # the one-time token of the address --open hands a browser

    def new_launch(self) -> str:
        """A token for ``/?launch=``, good once: the browser ``--open`` starts is given it on
        its command line, which other local users can read, so never the secret."""
        self.launch = secrets.token_urlsafe(32)
        return self.launch

    def take_launch(self, given: str) -> bool:
        """``given`` is the launch token, which is then spent."""
        if self.launch is None or not _same(given, self.launch):
            return False
        self.launch = None
        return True

    @property
    def origin(self) -> str:
        return f"http://{self.address}"

    def page_token(self) -> str:
        """A fresh token for one page."""
        nonce = secrets.token_urlsafe(16)
        return f"{nonce}.{_mac(self.secret, nonce)}"

    def is_page_token(self, given: str) -> bool:
        nonce, dot, mac = given.partition(".")
        return bool(dot and nonce) and len(given) <= TOKEN_MAX and \
            _same(mac, _mac(self.secret, nonce))

    def is_secret(self, given: str) -> bool:
        return _same(given, self.secret)

    def refusal(self, method: str, host: str | None, headers: Mapping[str, str]) -> str | None:
        """Why a request from outside the page is refused (None: it may go on to its token)."""
        if not self.address or host != self.address:
            return "another Host than the address prun review printed"
        origin = headers.get("Origin")
        site = headers.get("Sec-Fetch-Site")
        if method not in ("GET", "HEAD"):
            if origin is None:
                return "a change that names no Origin"
            if site is not None and site != "same-origin":
                return f"a change from a {site} page"
        elif site is not None and site not in READS:
            return f"a request from a {site} page"
        if origin is not None and origin != self.origin:
            return "a request from another origin"
        return None

    def may_read(self, query_token: str, header_token: str) -> bool:
        """A GET of data: the secret in the query, or a page token in the header."""
        return self.is_secret(query_token) or self.is_page_token(header_token)

    def may_change(self, form_token: str, header_token: str) -> bool:
        """A POST: a page token, in the form or in the header."""
        return self.is_page_token(form_token) or self.is_page_token(header_token)
