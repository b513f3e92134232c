"""An executor from outside prun: the registry test's proof that adding one is one module.

tests/executors/test_outside_executor.py installs it as this module and a ``*.dist-info``
folder on ``PYTHONPATH`` whose ``entry_points.txt`` declares it in the ``prun.executors`` group;
nothing in prun names it. Its CLI is ``echo-agent`` (tests/fakes/fake_echo.py, found at
``$PRUN_ECHO_BIN``), the prompt on stdin, a JSON-lines stream on stdout:

    {"kind": "hello", "session": id}   {"kind": "say", "text": ...}
    {"kind": "end", "ok": bool, "answer": ..., "error": ...}

Its flags: it may carry the ordinary share (``split_role``), it draws on quota group
``echo-pool`` and its pool is its own name; its data stays local.
"""

from __future__ import annotations

from prun.executors.base import ORDINARY, Executor, StreamReader


class EchoReader(StreamReader):
    def event(self, obj: dict) -> None:
        r = self.result
        kind = obj.get("kind")
        if kind == "hello":
            r.session_id = obj.get("session")
        elif kind == "say":
            r.add_text(str(obj.get("text", "")))
        elif kind == "end":
            r.final_seen = True
            r.status = "SUCCESS" if obj.get("ok") else "ERROR"
            r.response = obj.get("answer")
            r.error = obj.get("error")


class Echo(Executor):
    name = "echo"
    program = "echo-agent"
    bin_env = "PRUN_ECHO_BIN"
    read_only_mode = True
    split_role = ORDINARY

    def quota_group(self, model):
        return "echo-pool"

    def recipients(self, model):
        return ("echo", "local")

    def build(self, unit, env):
        from prun.executors.records import Launch

        mode = "read" if unit.mode == "plan" else "write"
        return Launch(argv=[self.binary(env), "--mode", mode], env=dict(env),
                      stdin_path=unit.prompt_file)

    def reader(self):
        return EchoReader()
