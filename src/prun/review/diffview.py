"""One file's diff as HTML: git's header lines (which name a rename, a mode, a binary file),
then each hunk's lines with their old and new line numbers, added and removed lines marked,
their text highlighted by Pygments with the lexer of the file's name (plain text when none
fits).
"""

from __future__ import annotations

import re
from html import escape

from ..git.changes import FileChange

DIFF_FILES = 100          # files of a packet whose diffs are read and shown (first in path order)
DIFF_LIMIT = 200_000      # bytes of one file's diff read
_NOT_SHOWN = ('<table class="diff"><tr class="meta"><td colspan="3">diff not shown: the page '
              f'shows the diffs of the first {DIFF_FILES} files of a packet</td></tr></table>')
_HUNK = re.compile(r"^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@")
MAX_LINES = 5000          # diff lines shown per file


def render_diff(f: FileChange, text: str | None) -> str:
    """The table of ``text``, the diff of ``f`` (None: not read, past the page's bound)."""
    if text is None:
        return _NOT_SHOWN
    lines = text.splitlines()
    first = next((i for i, line in enumerate(lines) if line.startswith("@@")), len(lines))
    head, body = lines[:first], lines[first:]
    cut = len(body) > MAX_LINES
    body = body[:MAX_LINES]
    meta = "".join(f'<tr class="meta"><td colspan="3">{escape(line)}</td></tr>'
                   for line in head if not line.startswith(("diff --git", "index ")))
    rows = _rows(f.path, body)
    if cut:
        rows += (f'<tr class="meta"><td colspan="3">[{len(lines) - first - MAX_LINES} more '
                 'lines not shown]</td></tr>')
    if not body and f.binary:
        rows += '<tr class="meta"><td colspan="3">binary file: contents not shown</td></tr>'
    return f'<table class="diff">{meta}{rows}</table>'


def _rows(path: str, body: list[str]) -> str:
    texts = [line[1:] if line[:1] in "+- " and not line.startswith("@@") else ""
             for line in body]
    shown = _highlight(path, texts)
    out = []
    old = new = 0
    for line, html in zip(body, shown, strict=True):
        m = _HUNK.match(line)
        if m:
            old, new = int(m.group(1)), int(m.group(2))
            out.append(f'<tr class="hunk"><td></td><td></td><td>{escape(line)}</td></tr>')
        elif line.startswith("+"):
            out.append(f'<tr class="add"><td></td><td>{new}</td><td><span class="sign">+</span>'
                       f"{html}</td></tr>")
            new += 1
        elif line.startswith("-"):
            out.append(f'<tr class="del"><td>{old}</td><td></td><td><span class="sign">-</span>'
                       f"{html}</td></tr>")
            old += 1
        elif line.startswith("\\"):
            out.append(f'<tr class="meta"><td></td><td></td><td>{escape(line)}</td></tr>')
        else:
            out.append(f'<tr class="ctx"><td>{old}</td><td>{new}</td><td><span class="sign">'
                       f"&nbsp;</span>{html}</td></tr>")
            old += 1
            new += 1
    return "".join(out)


def _highlight(path: str, texts: list[str]) -> list[str]:
    """Each line's text as highlighted HTML (one lexer over them all, so a line keeps the
    context of the lines around it)."""
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import TextLexer, get_lexer_for_filename
    from pygments.util import ClassNotFound

    try:
        lexer = get_lexer_for_filename(path, stripnl=False, ensurenl=True)
    except ClassNotFound:
        lexer = TextLexer(stripnl=False, ensurenl=True)
    try:
        html = highlight("\n".join(texts) + "\n", lexer, HtmlFormatter(nowrap=True))
    except Exception:  # a lexer that fails on a fragment: plain text then
        return [escape(t) for t in texts]
    shown = html.split("\n")[:len(texts)]
    if len(shown) != len(texts):
        return [escape(t) for t in texts]
    return shown
