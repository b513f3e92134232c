"""What a caller asks of the dispatcher, and its validation.

A ``Request`` is what was asked (the ``prun dispatch`` command line, or a packet in a run);
``prepare`` checks all of it, the environment's settings included, and returns a ``Prepared``
request, or raises ``UsageError`` (exit 2) having made nothing: no state dir, no file. Plain
classes: they are built before the dispatcher's first line (``STATE-DIR``), where importing
``dataclasses`` would cost more than everything else done by then.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from ..errors import UsageError
from ..executors.base import MODES
from . import statedir

TYPE_CHECKING = False  # typing costs milliseconds on the dispatcher's fast path
if TYPE_CHECKING:
    from typing import Any

    from ..executors.base import Executor
    from ..executors.settings import Settings
    from ..settings import Settings as PrunSettings
    from .overlay import Overlay

# A prompt travels in argv for agy, claude and gemini; Linux caps one argument at 128 KiB.
MAX_ARGV_PROMPT_BYTES = 120_000


class Request:
    """What the caller asked for (the dispatch command line, or a packet in a run).

    Plain classes here and below: they are built before the STATE-DIR line, where importing
    ``dataclasses`` would cost more than everything else the dispatcher does by then.
    """

    def __init__(self, executor: str, prompt_file: str, result_file: str, unit_id: str, *,
                 mode: str | None = None, add_dirs: Sequence[str] = (),
                 continue_from: str | None = None, command: str | Sequence[str] | None = None,
                 model: str | None = None, effort: str | None = None,
                 timeout_s: float | None = None, workspace: str | None = None,
                 state_root: str | None = None, env: Mapping[str, str] | None = None,
                 attempt_id: str | None = None, extra_env: Mapping[str, str] | None = None,
                 route_reason: str | None = None, briefed: bool = False,
                 sandbox: object = None, read_only: Sequence[str] = (),
                 writable: Sequence[str] = (), outbox: bool = False,
                 config: PrunSettings | None = None, git_wrapper: str | None = None,
                 prompt: str | None = None, hidden: Sequence[str] = (),
                 subdispatch: bool = False, workspace_at: str | None = None,
                 overlays: Sequence[Overlay] = ()):
        self.executor = executor
        self.prompt_file = prompt_file
        self.prompt = prompt                # the prompt file's text, when the caller wrote it
        self.result_file = result_file
        self.unit_id = unit_id
        self.mode = mode
        self.add_dirs = tuple(add_dirs)
        self.continue_from = continue_from
        self.command = command
        self.model = model
        self.effort = effort
        self.timeout_s = timeout_s
        self.workspace = workspace          # a caller-supplied workspace (else $PRUN_SCRATCH_CWD)
        self.workspace_at = workspace_at    # the sandbox also shows it here, and starts there
        self.overlays = tuple(overlays)     # its workspace's, its template's, in its sandbox
        self.state_root = state_root
        self.env = env
        self.attempt_id = attempt_id
        self.route_reason = route_reason    # why the router chose this executor (unit.json)
        self.extra_env = dict(extra_env or {})
        self.briefed = briefed              # the prompt is a run's brief: it has its contract
        self.sandbox = sandbox              # auto | on | off (None: $PRUN_SANDBOX, else auto)
        self.read_only = tuple(read_only)   # more paths the sandbox mounts read-only
        self.writable = tuple(writable)     # ... and writable
        self.hidden = tuple(hidden)         # ... and hides (an empty folder, unless bound back)
        self.subdispatch = subdispatch      # the unit may start other agents (packet allots it)
        self.outbox = outbox                # the worker writes its result in its state dir
        self.config = config                # prun's settings (None: read from env)
        self.git_wrapper = git_wrapper      # the folder of the git wrapper (None: made here)


class Prepared:
    """A validated request: every check passed, nothing created yet."""

    def __init__(self, request: Request, executor: Executor, settings: Settings, prompt: str,
                 result_file: str, mode: str, workspace: str | None, add_dirs: tuple[str, ...],
                 resume_id: str | None, command: tuple[str, ...], env: dict[str, str], *,
                 sandbox: str, config: PrunSettings, home: str | None = None):
        self.request = request
        self.executor = executor
        self.settings = settings
        self.prompt = prompt
        self.result_file = result_file
        self.mode = mode
        self.workspace = workspace          # None: the dispatcher makes a scratch dir
        self.add_dirs = add_dirs
        self.resume_id = resume_id
        self.command = command
        self.env = env
        self.sandbox = sandbox              # the setting, resolved: auto | on | off
        self.config = config                # prun's settings for this attempt
        self.home = home                    # a follow-up: the home of the attempt it continues


def prepare(req: Request, *, reopen: bool = False) -> Prepared:
    """Validate a request without creating anything. Raises UsageError (exit 2).

    ``reopen``: the attempt was launched earlier (resume), so its result path may exist."""
    from .. import executors
    from .subdispatch import refusal

    env = dict(os.environ if req.env is None else req.env)
    if (refused := refusal(env)) is not None:   # inside a unit that may not start agents
        raise refused
    executor = executors.get(req.executor)
    statedir.check_unit_id(req.unit_id)
    prompt = (_read_prompt(req.prompt_file) if req.prompt is None
              else _checked_prompt(req.prompt, len(req.prompt.encode()), req.prompt_file))
    result_file = (os.path.abspath(req.result_file) if reopen
                   else _fresh_result_path(req.result_file))
    add_dirs = tuple(_existing_dir(d, "--add-dir") for d in req.add_dirs)
    from ..settings import load

    cfg = req.config or load(env)
    resume_id, earlier = _resumed(req.continue_from, executor)
    workspace = req.workspace or cfg.scratch_cwd
    if workspace:
        workspace = _existing_dir(workspace, "PRUN_SCRATCH_CWD")
    elif earlier.get("workspace") and os.path.isdir(earlier["workspace"]):
        workspace = earlier["workspace"]  # a follow-up runs where its conversation ran
    mode = req.mode
    if mode is not None and mode not in MODES:
        raise UsageError(f"bad --mode {mode!r}", hint="use --mode accept-edits or --mode plan")
    if mode is None and earlier.get("mode") in MODES and workspace == earlier.get("workspace"):
        mode = earlier["mode"]            # ... and as it ran there
    if mode is None:
        if workspace or add_dirs:
            what = "PRUN_SCRATCH_CWD" if workspace else "--add-dir"
            raise UsageError(
                f"{what} supplies a workspace the dispatcher did not create, so --mode is required",
                hint="add --mode accept-edits (write-capable) or --mode plan (read-only)")
        mode = "accept-edits"
    if mode == "plan" and not executor.read_only_mode and executor.launches_process:
        raise UsageError(f"the {executor.name} executor has no read-only mode",
                         hint="use --mode accept-edits in a scratch dir or clone")
    command: tuple[str, ...] = ()
    if executor.takes_command:
        from ..executors.command import parse_command

        command = parse_command(req.command)
    elif req.command:
        raise UsageError(f"--command is not for the {executor.name} executor",
                         hint="pass --command with --executor command")
    settings = executor.settings(env, model=req.model, effort=req.effort, timeout_s=req.timeout_s)
    executor.preflight(mode, settings, env)
    if executor.prompt_in_argv and len(prompt.encode()) > MAX_ARGV_PROMPT_BYTES:
        raise UsageError(f"prompt is {len(prompt.encode())} bytes; {executor.name} takes it as "
                         f"one argument "
                         f"(at most {MAX_ARGV_PROMPT_BYTES})",
                         hint="paste what defines the task and point at files for the rest")
    home = earlier.get("home") if isinstance(earlier.get("home"), str) else None
    return Prepared(req, executor, settings, prompt, result_file, mode, workspace, add_dirs,
                    resume_id, command, env,
                    sandbox=_sandbox_setting(req, cfg.sandbox, executor), config=cfg,
                    home=home if home and os.path.isabs(home) else None)


def _sandbox_setting(req: Request, default: str, executor: Executor) -> str:
    """The sandbox setting (the request's, else ``$PRUN_SANDBOX``, else auto); ``on`` where no
    sandbox can be made is refused here, before anything exists."""
    from ..settings import parse_sandbox
    from .sandbox import unavailable

    setting = parse_sandbox(req.sandbox) if req.sandbox is not None else default
    if setting == "on" and executor.launches_process and (why := unavailable()) is not None:
        raise UsageError(f"sandbox: on, but no sandbox can be made here: {why}",
                         hint="install bubblewrap (Debian: bubblewrap), or use sandbox: auto")
    return setting


MAX_PROMPT_BYTES = 8 * 1024 * 1024   # a prompt is pasted text, not data (docs/dispatch.md)


def _read_prompt(path: str) -> str:
    """The prompt file's text: a regular file of at most ``MAX_PROMPT_BYTES`` (a FIFO or a
    device is refused before it is read, so it can neither block nor fill memory)."""
    from .._util.regular import read_regular

    if not path:
        raise UsageError("no prompt file given", hint="pass --prompt-file <path>")
    data = read_regular(path, MAX_PROMPT_BYTES, "prompt file")
    return _checked_prompt(data.decode("utf-8", "replace"), len(data), path)


def _check_size(size: int, path: str) -> None:
    if size > MAX_PROMPT_BYTES:
        raise UsageError(f"prompt file is {size} bytes, more than the "
                         f"{MAX_PROMPT_BYTES} a prompt may be: {path}",
                         hint="point at large inputs from the prompt instead of pasting them")


def _checked_prompt(text: str, size: int, path: str) -> str:
    """``text`` (``size`` bytes, from ``path``) unless it is too big or empty."""
    _check_size(size, path)
    if not text.strip():
        raise UsageError(f"prompt file is empty: {path}", hint="write the unit's prompt there")
    return text


def _fresh_result_path(path: str) -> str:
    if not path or not path.strip():
        raise UsageError("no result file given", hint="pass --result-file <fresh path>")
    path = os.path.abspath(os.path.expanduser(path))
    if os.path.lexists(path):
        raise UsageError(f"result file already exists: {path}",
                         hint="use a fresh result path per unit per run (delete a stale one first)")
    parent = os.path.dirname(path)
    if not os.path.isdir(parent):
        raise UsageError(f"result file's folder does not exist: {parent}",
                         hint="create the folder first")
    if not os.access(parent, os.W_OK):
        raise UsageError(f"result file's folder cannot be written: {parent}",
                         hint="choose a result path in a folder you can write")
    return path


def _existing_dir(path: str, what: str) -> str:
    if not path or not str(path).strip():
        raise UsageError(f"empty {what} path", hint=f"give {what} an existing directory")
    full = os.path.abspath(os.path.expanduser(str(path)))
    if not os.path.isdir(full):
        raise UsageError(f"{what} is not an existing directory: {path}",
                         hint="create it first, or point it at a clone or read-only snapshot")
    return os.path.realpath(full)


def _resumed(continue_from: str | None, executor: Executor) -> tuple[str | None, dict[str, Any]]:
    """The conversation id a follow-up resumes and what its earlier attempt's dispatcher
    recorded of it beside its state dir (``identity.facts``: its working folder and mode:
    Gemini resumes a session only from the folder it ran in, and any conversation's file
    paths point there; never its ``unit.json``, which that unit could rewrite), and its
    private home, where its CLI kept the conversation; (None, {}) for a fresh unit."""
    if continue_from is None:
        return None, {}
    if not continue_from.strip():
        raise UsageError("empty --continue-from", hint="pass the STATE-DIR of the earlier unit")
    if not executor.can_resume:
        raise UsageError(f"the {executor.name} executor cannot resume a conversation",
                         hint="start a fresh unit with the earlier result in its prompt")
    sd = statedir.open_existing(continue_from)
    conv = sd.read(statedir.CONVERSATION_ID)
    if not conv:
        raise UsageError(f"no conversation id in {sd.file(statedir.CONVERSATION_ID)}",
                         hint="the earlier unit never reported one; start a fresh unit instead")
    from .identity import facts

    earlier: dict[str, Any] = dict(facts(sd))
    earlier["home"] = sd.file(statedir.HOME)   # where its home is (carried over at launch)
    return conv, earlier
