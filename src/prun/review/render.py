"""The review page as HTML: the run's summary, a table of every packet, the combined check,
then each packet in full (reasons, decision and its form, result, required sections, change).

Everything a worker wrote is escaped: its result is Markdown rendered by markdown-it-py with
raw HTML turned off (it shows as text), and the page's policy allows no inline script. The
page reads with JavaScript off; its forms post without it too.
"""

from __future__ import annotations

from html import escape
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from .diffview import render_diff
from .model import Decision, PacketPage, RunPage

if TYPE_CHECKING:
    from ..executors.records import Usage

VERDICT_CLASS = {"ACCEPTED": "accepted", "REJECTED": "rejected", "REVIEW": "review",
                 "NOT-CHOSEN": "not-chosen"}
REFRESH_S = 5             # the reload of a live run's page with JavaScript off


def page(run: RunPage, token: str) -> str:
    """The page; ``token`` is the page's own (its forms post it, its script sends it)."""
    refresh = (f'<noscript><meta http-equiv="refresh" content="{REFRESH_S}"></noscript>'
               if run.live else "")
    counts = " ".join(f'<span class="badge {VERDICT_CLASS[w]}">{w} {n}</span>'
                      for w, n in run.counts().items())
    live = ('<p class="live">the run is still going: this page follows it</p>'
            if run.live else "")
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="prun-token" content="{escape(token)}">
<title>prun review {escape(run.id)}</title>
<link rel="stylesheet" href="/static/review.css"><link rel="stylesheet" href="/static/code.css">
{refresh}<script src="/static/review.js" defer></script>
</head><body data-version="{run.seq}" data-live="{int(run.live)}">
<header><h1>prun review <code>{escape(run.id)}</code></h1>
<p>status <b>{escape(run.status)}</b> · base <code>{escape((run.base or "none")[:12])}</code>
· {counts} · cost {_cost(run.cost)}</p>{live}</header>
<main>
{_table(run)}
{_candidates(run, token)}
{_check(run)}
{"".join(_packet(p, run.id, token) for p in run.packets)}
</main></body></html>
"""


def _table(run: RunPage) -> str:
    rows = []
    for p in run.packets:
        d = p.decision
        decided = (f'<span class="decision {d.decision}">{escape(d.decision)}</span> '
                   f"by {escape(d.who)}" if d else "—")
        reasons = "<br>".join(escape(r) for r in p.reasons) or "—"
        rows.append(
            f'<tr id="row-{_id(p.id)}" data-packet="{escape(p.id)}" data-verdict="{p.verdict}">'
            f'<td><a href="#p-{_frag(p.id)}">{escape(p.id)}</a></td><td>{escape(p.kind)}</td>'
            f"<td>{escape(p.executor or '—')}</td><td>{escape(p.model or '—')}</td>"
            f'<td class="status">{escape(p.status)}</td>'
            f'<td><span class="badge {VERDICT_CLASS[p.verdict]}">{p.verdict}</span></td>'
            f'<td class="reasons">{reasons}</td><td>{_cost(p.cost)}</td>'
            f'<td class="decided">{decided}</td></tr>')
    return ('<table class="packets" id="packets"><thead><tr><th>packet</th><th>kind</th>'
            "<th>executor</th><th>model</th><th>status</th><th>verdict</th><th>reasons</th>"
            "<th>cost</th><th>decision</th></tr></thead><tbody>" + "".join(rows)
            + "</tbody></table>")


def _candidates(run: RunPage, token: str) -> str:
    """Each packet with candidates: its candidates side by side (a column each), the one
    chosen and why, why each other was not, and a button to pick another (an accept decision
    on its attempt, which prun integrate then applies instead)."""
    groups: dict[str, list[PacketPage]] = {}
    for p in run.packets:
        if p.candidate is not None:
            groups.setdefault(p.candidate.packet, []).append(p)
    return "".join(_group(packet, sorted(pages, key=lambda p: p.candidate.number if p.candidate
                                         else 0), run.id, token)
                   for packet, pages in groups.items())


def _group(packet: str, pages: list[PacketPage], run_id: str, token: str) -> str:
    def row(name: str, cells: list[str]) -> str:
        return f"<tr><th>{name}</th>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>"

    def lines(p: PacketPage) -> str:
        return str(sum((f.added or 0) + (f.deleted or 0) for f in p.files))

    def chosen(p: PacketPage) -> str:
        c = p.candidate
        if c is None or c.lost is not None:
            return f"not chosen: <code>{escape(c.lost or '' if c else '')}</code>"
        return f"<b>chosen</b>: {escape(c.why or '')}"

    def pick(p: PacketPage) -> str:
        if p.candidate is not None and p.candidate.lost is None:
            return "—"
        return f"""<form method="post" action="/decide" class="pick">
<input type="hidden" name="token" value="{escape(token)}">
<input type="hidden" name="run" value="{escape(run_id)}">
<input type="hidden" name="packet" value="{escape(p.id)}">
<input type="hidden" name="attempt" value="{escape(p.attempt_id or '')}">
<input type="hidden" name="note" value="picked on the review page">
<button type="submit" name="decision" value="accept">Pick this one</button></form>"""

    head = "".join(f'<th><a href="#p-{_frag(p.id)}">candidate '
                   f"{p.candidate.number if p.candidate else '?'}</a></th>" for p in pages)
    body = "".join([
        row("unit", [f"<code>{escape(p.id)}</code>" for p in pages]),
        row("executor", [escape(p.executor or "—") for p in pages]),
        row("verdict", [f'<span class="badge {VERDICT_CLASS[p.verdict]}">{p.verdict}</span>'
                        for p in pages]),
        row("acceptance check", [_accept(p) for p in pages]),
        row("files", [str(len(p.files)) for p in pages]),
        row("lines changed", [lines(p) for p in pages]),
        row("reasons", ["<br>".join(escape(r) for r in p.reasons) or "—" for p in pages]),
        row("", [chosen(p) for p in pages]),
        row("", [pick(p) for p in pages])])
    return (f'<section class="candidates" id="c-{_id(packet)}"><h2>Candidates of '
            f"{escape(packet)}</h2><table><thead><tr><th></th>{head}</tr></thead>"
            f"<tbody>{body}</tbody></table></section>")


def _check(run: RunPage) -> str:
    c = run.check
    if not c.command:
        return '<section id="check"><h2>Combined check</h2><p>the plan has none</p></section>'
    state = ("not run yet (<code>prun integrate</code> runs it)" if c.ok is None
             else "<b>passed</b>" if c.ok else "<b>failed</b>")
    log = (f"<details open><summary>log <code>{escape(c.log_path or '')}</code></summary>"
           f"<pre class=\"log\">{escape(c.log)}</pre></details>" if c.log is not None else "")
    return (f'<section id="check"><h2>Combined check</h2><p><code>{escape(c.command)}</code>: '
            f"{state}</p>{log}</section>")


def _packet(p: PacketPage, run_id: str, token: str) -> str:
    facts = [("executor", p.executor or "—"), ("model", p.model or "—"),
             ("status", p.status), ("attempt", f"{p.attempt_id or 'none'} (of {p.attempts})"),
             ("result", p.result_path or "—")]
    dl = "".join(f"<dt>{k}</dt><dd>{escape(v)}</dd>" for k, v in facts)
    dl += f'<dt>cost</dt><dd class="cost">{_cost(p.cost, full=True)}</dd>'
    dl += f"<dt>acceptance check</dt><dd>{_accept(p)}</dd>"
    reasons = ("<ul class=\"reasons\">" + "".join(f"<li><code>{escape(r)}</code></li>"
                                                   for r in p.reasons) + "</ul>"
               if p.reasons else "<p>no reasons: nothing found against it</p>")
    return f"""<section class="packet" id="p-{_id(p.id)}" data-verdict="{p.verdict}">
<h2>{escape(p.id)} <span class="badge {VERDICT_CLASS[p.verdict]}">{p.verdict}</span></h2>
<dl>{dl}</dl>
<h3>Reasons</h3>{reasons}
{_decisions(p, run_id, token)}
{_sections(p)}
<details open class="result"><summary>Result</summary>{_result(p)}</details>
{_change(p)}
</section>"""


def _accept(p: PacketPage) -> str:
    """The packet's acceptance check: its status, exit code, time and log, its output's tail."""
    c = p.accept
    if c is None:
        return "none"
    took = f", {c.seconds:.1f}s" if c.seconds is not None else ""
    code = f", exit {c.exit_code}" if c.exit_code is not None else ""
    log = f", log <code>{escape(c.log)}</code>" if c.log else ""
    tail = (f'<details><summary>output (tail)</summary><pre class="log">{escape(c.tail)}</pre>'
            "</details>" if c.tail else "")
    return f'<span class="accept-{escape(c.status)}">{escape(c.status)}</span>{code}{took}{log}{tail}'


def _decisions(p: PacketPage, run_id: str, token: str) -> str:
    history = "".join(_decision(d) for d in reversed(p.decisions))
    history = f'<ul class="history">{history}</ul>' if history else "<p>no decision yet</p>"
    attempt = escape(p.attempt_id or "")
    return f"""<h3>Decision</h3>{history}
<form method="post" action="/decide" class="decide">
<input type="hidden" name="token" value="{escape(token)}">
<input type="hidden" name="run" value="{escape(run_id)}">
<input type="hidden" name="packet" value="{escape(p.id)}">
<input type="hidden" name="attempt" value="{attempt}">
<label>note <input type="text" name="note" size="60" maxlength="4000"
 aria-label="note on {escape(p.id)}"></label>
<button type="submit" name="decision" value="accept">Accept</button>
<button type="submit" name="decision" value="reject">Reject</button>
<button type="submit" name="decision" value="include">Include</button>
</form>"""


def _decision(d: Decision) -> str:
    stale = "" if d.current else ' <i>(on an earlier attempt: no longer counts)</i>'
    note = f": {escape(d.note)}" if d.note else ""
    return (f'<li class="{"" if d.current else "stale"}"><span class="decision {d.decision}">'
            f"{escape(d.decision)}</span> by {escape(d.who)} at {escape(d.at)}{note}{stale}</li>")


def _sections(p: PacketPage) -> str:
    if not p.sections:
        return ""
    items = "".join(f'<li class="{s.state}">{escape(s.name)}: {s.state}</li>' for s in p.sections)
    return f'<h3>Required sections</h3><ul class="sections">{items}</ul>'


def _result(p: PacketPage) -> str:
    if p.result is None:
        return "<p>no result</p>"
    return f'<div class="markdown">{markdown(p.result)}</div>'


def _change(p: PacketPage) -> str:
    if p.kind != "code":
        return ""
    if not p.files:
        return "<h3>Change</h3><p>no change</p>"
    parts = []
    for f in p.files:
        size = "binary" if f.binary else f"+{f.added or 0} −{f.deleted or 0}"
        frm = f" from <code>{escape(f.old_path)}</code>" if f.old_path else ""
        parts.append(f'<details open class="file"><summary>{escape(f.status)} '
                     f"<code>{escape(f.path)}</code>{frm} ({size})</summary>"
                     f"{render_diff(f, p.diffs.get(f.path))}</details>")
    count = f"{len(p.files)} file{'s' if len(p.files) > 1 else ''}"
    return f"<h3>Change ({count})</h3>" + "".join(parts)


def markdown(text: str) -> str:
    """``text`` as HTML: CommonMark with tables, raw HTML shown as text, code highlighted."""
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": False, "highlight": _code})
    md.enable(["table", "strikethrough"])
    return str(md.render(text))


def _code(code: str, lang: str, attrs: str) -> str:
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import get_lexer_by_name
    from pygments.util import ClassNotFound

    try:
        lexer = get_lexer_by_name(lang) if lang else None
    except ClassNotFound:
        lexer = None
    if lexer is None:
        return ""  # markdown-it escapes it as it is
    return str(highlight(code, lexer, HtmlFormatter(nowrap=True)))  # markdown-it wraps it


def _cost(c: Usage, *, full: bool = False) -> str:
    def n(v: int | None) -> str:
        return "—" if v is None else f"{v:,}"

    usd = "—" if c.cost_usd is None else f"${c.cost_usd:.4f}"
    if not full:
        return usd if c.cost_usd is not None or not c.reported else f"{n(c.tokens_in)} in"
    return (f"{usd} · tokens in {n(c.tokens_in)}, out {n(c.tokens_out)}, "
            f"cached {n(c.tokens_cached)}")


def _id(packet_id: str) -> str:
    return escape(packet_id)


def _frag(packet_id: str) -> str:
    return quote(packet_id, safe="")


def css_code() -> str:
    """Pygments' style for highlighted code and diff lines."""
    from pygments.formatters import HtmlFormatter

    fmt: Any = HtmlFormatter(style="default")  # get_style_defs is untyped in the stubs
    return str(fmt.get_style_defs([".markdown pre", ".diff td"]))
