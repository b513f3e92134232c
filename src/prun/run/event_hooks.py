"""The plan's ``on_event`` hook: a shell command run on each actionable event, so a person
can be notified. It can never harm the run: it runs in its own process group with a bounded
time (``PRUN_HOOK_TIMEOUT``, default 30 s; its group is ended past it), at most four at once,
its output goes to ``<run dir>/hooks.log``, and its failures are only logged there.

Environment given to the command: ``PRUN_EVENT`` (the kind), ``PRUN_RUN_ID``,
``PRUN_PACKET_ID``, ``PRUN_ATTEMPT_ID``, ``PRUN_EVENT_CAUSE``, ``PRUN_EVENT_JSON`` (the whole
event) and, for a finished unit, ``PRUN_RESULT_FILE``.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time

from .._util.process import Worker, spawn
from ..settings import load
from .events import Event

MAX_CONCURRENT = 4


class EventHooks:
    """The hooks of one run, used as ``async with EventHooks(...) as hooks``: each hook runs
    as a task of the hooks' own task group, and leaving the block waits for those still
    running, at most ``PRUN_HOOK_TIMEOUT`` and a second; any left then are ended."""

    def __init__(self, command: str | None, log_path: str, env: dict[str, str]):
        self.command = command
        self.log_path = log_path
        self.env = env

        self.timeout = load(env).hook_timeout_s
        self._sem = asyncio.Semaphore(MAX_CONCURRENT)
        self._group: asyncio.TaskGroup | None = None

    async def __aenter__(self) -> EventHooks:
        group = asyncio.TaskGroup()
        await group.__aenter__()
        self._group = group
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        """Wait (bounded) for the hooks still running; the block's own error goes on."""
        group, self._group = self._group, None  # no hook starts from here on
        if group is None:
            return
        try:
            async with asyncio.timeout(self.timeout + 1):
                await group.__aexit__(None, None, None)
        except TimeoutError:  # the group ended the hooks still running
            self._log(f"hooks still running {self.timeout + 1:g} s after the run were ended")

    def fire(self, event: Event) -> None:
        """Run the hook for ``event`` if it is actionable (while the hooks are open)."""
        if not self.command or not event.actionable or self._group is None:
            return
        self._group.create_task(self._run(self.command, event), name=f"hook {event.kind}")

    async def _run(self, command: str, event: Event) -> None:
        async with self._sem:
            try:
                await self._run_one(command, event)
            except Exception as e:  # a hook never harms the run
                self._log(f"hook for {event.kind} could not run: {e}")

    async def _run_one(self, command: str, event: Event) -> None:
        env = dict(self.env)
        env.update({"PRUN_EVENT": event.kind, "PRUN_RUN_ID": event.run_id,
                    "PRUN_PACKET_ID": event.packet_id or "",
                    "PRUN_ATTEMPT_ID": event.attempt_id or "",
                    "PRUN_EVENT_CAUSE": event.cause or "",
                    "PRUN_EVENT_JSON": json.dumps(event.to_json(), default=str)})
        if event.data.get("result_file"):
            env["PRUN_RESULT_FILE"] = str(event.data["result_file"])
        hook = spawn(["/bin/sh", "-c", command], cwd=os.getcwd(), env=env,
                     stdout_path=self.log_path, stderr_path=self.log_path)
        try:
            async with asyncio.timeout(self.timeout):
                await hook.await_exit()
        except TimeoutError:
            await _kill(hook)
            self._log(f"hook for {event.kind} ended after {self.timeout:g} s")
            return
        except asyncio.CancelledError:  # the run is over and its hooks' time with it
            await _kill(hook)            # gone before the hooks' scope ends (SIGKILL: soon)
            raise
        code = hook.reap()
        if code != 0:
            self._log(f"hook for {event.kind} exited with code {code}")

    def _log(self, line: str) -> None:
        try:
            with open(self.log_path, "a", encoding="utf-8") as f:
                f.write(f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} {line}\n")
        except OSError:
            pass


async def _kill(hook: Worker) -> None:
    """End the hook's whole process group and reap it."""
    hook.signal(signal.SIGKILL)
    await hook.await_exit()
    hook.reap()
