"""Which work of an attempt runs in the event loop and which in a thread: what waits on
another process (a clone, a quota probe) in a thread; an attempt that waits on none is opened
and finished in the loop (``drive.quick_start``)."""

from __future__ import annotations

import threading

from supkit import OUTPUT, Run, unit

from prun import executors
from prun.run import drive


def _where(monkeypatch) -> dict[str, list[str]]:
    """Each packet's opening and finishing, as 'loop' or 'thread'."""
    loop_thread = threading.get_ident()   # the test drives the supervisor in this thread
    seen: dict[str, list[str]] = {}
    here = lambda: "loop" if threading.get_ident() == loop_thread else "thread"  # noqa: E731
    opening, finishing = drive.open_attempt, drive.finish

    def open_attempt(sup, u, *args):
        seen.setdefault(u.packet.id, []).append(f"open:{here()}")
        return opening(sup, u, *args)

    def finish(d, *args, **kw):
        seen.setdefault(d.p.request.unit_id, []).append(f"finish:{here()}")
        return finishing(d, *args, **kw)

    monkeypatch.setattr(drive, "open_attempt", open_attempt)
    monkeypatch.setattr(drive, "finish", finish)
    return seen


def test_a_command_unit_is_opened_and_finished_in_the_loop_a_code_unit_in_a_thread(
        repo, monkeypatch):
    run = Run.of(repo, [unit("read"), unit("code", kind="code", owns=["src/x.py"])])
    seen = _where(monkeypatch)

    async def play():
        for pid in ("read", "code"):
            (await run.keeper.worker(pid)).exit(0, output=OUTPUT)

    run.drive(play)
    assert seen["read"] == ["open:loop", "finish:loop"]
    assert seen["code"] == ["open:thread", "finish:loop"]   # the clone waits on git


def test_an_executor_with_quota_groups_is_opened_and_finished_in_a_thread(repo):
    run = Run.of(repo, [unit("a")])
    sup = run.supervisor()
    u = sup.units["a"]
    assert drive.quick_start(sup, u, executors.get("command"))
    claude = executors.get("claude")
    assert claude.metered()                       # a probe may run after a failure
    assert not drive.quick_start(sup, u, claude) and not drive.quick_finish(claude)
