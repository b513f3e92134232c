"""Packet files: `prun packet new ID` writes a template that guides you through every field.

The template is a Markdown file with YAML front matter (the machine fields, each explained by a
comment) and the prompt below it. It is written to ID.md in the current folder, or to -o PATH,
and never over an existing file.

exit codes: 0 written; 2 bad id, or the file exists.
"""

from __future__ import annotations

import argparse
import sys

from .._util.fsutil import publish_new
from .._util.quoting import quote
from ..attempt.statedir import check_unit_id
from ..errors import UsageError
from ..plan import template as packet_template
from . import options


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    new = sub.add_parser("new", help="write a packet template",
                         description="Write a packet template for ID (to ID.md, or -o PATH).")
    new.add_argument("id", metavar="ID", help="the packet id (letters, digits, '.', '_', '-')")
    new.add_argument("-o", "--output", metavar="PATH", type=options.path,
                     help="where to write it (default: ./ID.md); '-' prints it")
    new.add_argument("--kind", choices=["read-only", "code"], help="preset the kind")


def template(packet_id: str, *, kind: str | None = None) -> str:
    """The packet template text for ``packet_id``."""
    check_unit_id(packet_id)
    return packet_template.text(packet_id, kind=kind)


def run(args: argparse.Namespace) -> int:
    text = template(args.id, kind=args.kind)
    if args.output == "-":
        sys.stdout.write(text)
        return 0
    path = args.output or f"{args.id}.md"
    try:
        written = publish_new(path, text)
    except FileNotFoundError:
        raise UsageError(f"cannot write {path}: its folder does not exist",
                         hint="create the folder first, or give another -o PATH")
    if not written:
        raise UsageError(f"{path} exists; not overwriting it",
                         hint="give another -o PATH, or move the old file away")

    sys.stdout.write(f"PACKET {quote(path)}\n")
    return 0
