"""A session unit through the launch seam (``SessionLauncher``), in process: its start hands
it off and launches nothing; its handle (``HandedOff``) is followed by the receipt the real
``prun receipt`` attaches, then by its result landing."""

from __future__ import annotations

import shlex

from helpers import prun
from prun.attempt.dispatch import Dispatch, Request, SessionLauncher, admit, begin, prepare
from prun.attempt.dispatch import launch as start


def test_a_session_unit_is_started_through_its_launcher_and_followed_through_its_handle(
        tmp_path):
    prompt = tmp_path / "prompt.md"
    prompt.write_text("Say hello.\n")
    result = tmp_path / "result.md"
    req = Request("session", str(prompt), str(result), "s1",
                  state_root=str(tmp_path / "state"))
    d = Dispatch(prepare(req), SessionLauncher())
    begin(d)
    admit(d)
    assert start(d), d.launch_error
    handed = d.handed
    assert handed is not None and d.worker is None and d.receipt is None
    sd = d.state.path
    assert handed.outcome.kind == "handed-off" and handed.outcome.state_dir == sd
    assert shlex.split(handed.line("RECEIPT-CMD") or "") == [
        "prun", "receipt", sd, "--attempt-id", "<AGENT-ID>"]
    assert d.state.read("handoff.md").startswith("Say hello.")
    assert handed.receipt() is None and not handed.landed()
    attached = prun("receipt", sd, "--attempt-id", "agent-1")
    assert attached.returncode == 0, attached.stderr
    assert handed.receipt() == "agent-1" and not handed.landed()
    result.write_text("")
    assert not handed.landed()       # an empty file is not a result yet
    result.write_text("hello\n")
    assert handed.landed()
