"""A fake Claude Code CLI (``claude -p``) for tests: the real 2.1.x stream-json, scripted by env.

FAKE_CLAUDE_SCENARIO  success (default), tool_use, permission_denied, bash, error_status,
                      rate_limit, quota, nonzero_exit, no_result, hang, timeout_api, writes_result,
                      corrupt_line (a line that is not a JSON object among good ones)
FAKE_CLAUDE_RESPONSE  the final answer text
FAKE_CLAUDE_ANSWERS   a JSON file {packet id: [answer of call 1, of call 2, ...]}: the
                      unit's n-th call answers its n-th text (a follow-up is call 2)
FAKE_CLAUDE_ERROR     the server's message in a 429 (quota / rate_limit scenarios)
FAKE_CLAUDE_BASH      the Bash command of the ``bash`` scenario (run through the --settings
                      PreToolUse hooks, as Claude Code does)
FAKE_CLAUDE_RUN       a JSON list of shell commands the worker runs before it answers
                      (success scenario): each a Bash tool_use and its tool_result, as
                      Claude Code prints them, run in the working folder through the hooks
FAKE_CLAUDE_HOME      where sessions are kept (``<id>.jsonl``), so --resume works across runs
FAKE_CLAUDE_LOG       append one JSON line per call: argv, cwd, stdin closed, env keys
FAKE_CLAUDE_USAGE     the result event's ``usage`` (JSON); default: a 12,200-token prompt
FAKE_CLAUDE_COST      its ``total_cost_usd`` (default 0.02452; ``omit`` leaves the key out)
FAKE_CLAUDE_IF        JSON {text: {VAR: value}}: a prompt containing text runs with those
                      FAKE_CLAUDE_* variables instead (units of one run behaving apart)

Start-up refusals are not scenarios but checks, as in the real CLI: stream-json without
--verbose, and bypass permissions as root without IS_SANDBOX=1, print to stderr and exit 1.
SIGTERM while hanging exits 143 with nothing more on stdout.
"""

import json
import os
import signal
import subprocess
import sys
import time
import uuid

argv = sys.argv[1:]
for text, override in json.loads(os.environ.get("FAKE_CLAUDE_IF") or "{}").items():
    if "-p" in argv and text in argv[argv.index("-p") + 1]:
        os.environ.update(override)
scenario = os.environ.get("FAKE_CLAUDE_SCENARIO", "success")
answer = os.environ.get("FAKE_CLAUDE_RESPONSE", "Hello from the fake Claude. The answer is 42.")
home = os.environ.get("FAKE_CLAUDE_HOME") or os.path.join(os.getcwd(), ".fake-claude")


def scripted(var, default):
    """The answer the file at ``var`` scripts for this unit (PRUN_PACKET_ID): its n-th call
    gets the n-th answer of the unit's list (the last one from then on), else ``default``."""
    path = os.environ.get(var)
    unit = os.environ.get("PRUN_PACKET_ID", "")
    if not path:
        return default
    with open(path) as f:
        answers = json.load(f).get(unit)
    if not answers:
        return default
    counter = f"{path}.{unit}.calls"
    n = int(open(counter).read()) if os.path.exists(counter) else 0
    with open(counter, "w") as f:
        f.write(str(n + 1))
    return answers[min(n, len(answers) - 1)]


def opt(name):
    return argv[argv.index(name) + 1] if name in argv else None


def emit(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def stdin_closed():
    try:
        return os.read(0, 1) == b""
    except OSError:
        return True


log = os.environ.get("FAKE_CLAUDE_LOG")
if log:
    with open(log, "a") as f:
        f.write(json.dumps({"argv": argv, "cwd": os.getcwd(), "stdin_closed": stdin_closed(),
                            "env": {k: v for k, v in os.environ.items()
                                    if k.startswith(("PRUN_", "FAKE_", "IS_SANDBOX"))}}) + "\n")

if "-p" not in argv and "--print" not in argv:
    sys.exit("fake claude: only -p is faked")
if opt("--output-format") == "stream-json" and "--verbose" not in argv:
    sys.stderr.write("Error: When using --print, --output-format=stream-json requires --verbose\n")
    sys.exit(1)
mode = opt("--permission-mode") or "default"
bypass = mode == "bypassPermissions" or "--dangerously-skip-permissions" in argv
if bypass and os.geteuid() == 0 and os.environ.get("IS_SANDBOX") != "1":
    sys.stderr.write("--dangerously-skip-permissions cannot be used with root/sudo privileges "
                     "for security reasons\n")
    sys.exit(1)

model = {"sonnet": "claude-sonnet-5-5", "opus": "claude-opus-5"}.get(opt("--model") or "sonnet",
                                                                       opt("--model"))
resume = opt("--resume")
history = []
if resume:
    path = os.path.join(home, f"{resume}.jsonl")
    if not os.path.exists(path):
        msg = f"No conversation found with session ID: {resume}"
        emit({"type": "result", "subtype": "error_during_execution", "duration_ms": 0,
              "duration_api_ms": 0, "is_error": True, "num_turns": 0, "stop_reason": None,
              "session_id": "00000000-0000-0000-0000-000000000000", "total_cost_usd": 0,
              "usage": {}, "modelUsage": {}, "permission_denials": [], "uuid": str(uuid.uuid4()),
              "errors": [msg], "result_index": 0})
        sys.stderr.write(msg + "\n")
        sys.exit(1)
    with open(path) as f:
        history = [json.loads(line) for line in f if line.strip()]
    session = resume
else:
    session = str(uuid.uuid4())
add_dirs = []
for i, a in enumerate(argv):
    if a == "--add-dir":
        add_dirs += [d for d in argv[i + 1:] if not d.startswith("-")][:1]


def save(prompt, text):
    os.makedirs(home, exist_ok=True)
    with open(os.path.join(home, f"{session}.jsonl"), "a") as f:
        f.write(json.dumps({"prompt": prompt, "answer": text}) + "\n")


common = {"session_id": session}
emit({"type": "system", "subtype": "init", "cwd": os.getcwd(), **common,
      "tools": ["Task", "Bash", "Read", "Write"], "mcp_servers": [], "model": model,
      "permissionMode": mode, "apiKeySource": "ANTHROPIC_API_KEY",
      "claude_code_version": "2.1.332", "uuid": str(uuid.uuid4()),
      "original_cwd": os.getcwd(), "additional_directories": add_dirs})


def msg_id():
    return "msg_fake_" + uuid.uuid4().hex[:20]


def assistant(mid, block, **extra):
    emit({"type": "assistant", "message": {"id": mid, "type": "message", "role": "assistant",
                                           "model": model, "content": [block],
                                           "stop_reason": None, "stop_sequence": None,
                                           "usage": {"input_tokens": 10, "output_tokens": 5}},
          "parent_tool_use_id": None, **common, "uuid": str(uuid.uuid4()),
          "timestamp": "2026-11-30T13:06:08.983Z", "request_id": "req_fake", **extra})


def tool_result(tool_id, content, is_error=None, meta=None, use_result=None):
    block = {"tool_use_id": tool_id, "type": "tool_result", "content": content}
    if is_error is not None:
        block["is_error"] = is_error
    extra = {"tool_use_result": use_result} if use_result is not None else {}
    emit({"type": "user", "message": {"role": "user", "content": [block]},
          "parent_tool_use_id": None, **common, "uuid": str(uuid.uuid4()),
          "timestamp": "2026-11-30T13:06:09.100Z", **extra,
          "tool_result_meta": [meta or {"id": tool_id}]})


USAGE = {"input_tokens": 12200, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
         "output_tokens": 12, "server_tool_use": {"web_search_requests": 0,
                                                  "web_fetch_requests": 0},
         "service_tier": "standard", "cache_creation": {"ephemeral_1h_input_tokens": 0,
                                                        "ephemeral_5m_input_tokens": 0}}


def result(text, *, is_error=False, api_status=None, api_type=None, denials=(), turns=1,
           terminal="completed"):
    usage = json.loads(os.environ["FAKE_CLAUDE_USAGE"]) if os.environ.get(
        "FAKE_CLAUDE_USAGE") else USAGE
    cost = os.environ.get("FAKE_CLAUDE_COST", "0.02452")
    body = {"duration_api_ms": 426, "stop_reason": "end_turn", **common}
    if cost != "omit":
        body["total_cost_usd"] = float(cost)
    body.update({"usage": usage, "modelUsage": {},
            "permission_denials": list(denials), "terminal_reason": terminal,
            "is_error": is_error, "num_turns": turns, "subtype": "success",
            "api_error_status": api_status})
    if api_type:
        body["api_error_type"] = api_type
    body.update({"result": text, "type": "result", "duration_ms": 1021,
                 "uuid": str(uuid.uuid4())})
    emit(body)


def api_error(status, kind, api_type, text):
    emit({"type": "assistant", "message": {
        "diagnostics": None, "id": str(uuid.uuid4()), "container": None, "model": "<synthetic>",
        "role": "assistant", "stop_details": None, "stop_reason": "stop_sequence",
        "stop_sequence": "", "type": "message", "usage": {},
        "content": [{"type": "text", "text": text}], "context_management": None},
        "parent_tool_use_id": None, **common, "uuid": str(uuid.uuid4()), "timestamp": "…",
        "error": kind, "request_id": "req_fake", "is_api_error_message": True,
        "api_error_status": status, "api_error_type": api_type})
    result(text, is_error=True, api_status=status, api_type=api_type, terminal="api_error")
    sys.exit(1)


def run_hooks(tool_name, tool_input):
    """Run the PreToolUse command hooks from --settings as Claude Code does; the deny reason."""
    raw = opt("--settings")
    if not raw:
        return None
    if not raw.lstrip().startswith("{"):
        with open(raw) as f:
            raw = f.read()
    settings = json.loads(raw)
    for entry in settings.get("hooks", {}).get("PreToolUse", []):
        if entry.get("matcher") not in (None, "", "*", tool_name):
            continue
        for hook in entry.get("hooks", []):
            event = {"session_id": session, "transcript_path": "", "cwd": os.getcwd(),
                     "hook_event_name": "PreToolUse", "tool_name": tool_name,
                     "tool_input": tool_input}
            p = subprocess.run(hook["command"], shell=True, input=json.dumps(event),
                               capture_output=True, text=True, timeout=hook.get("timeout", 60))
            if p.returncode == 2:
                return p.stderr.strip()
            if p.stdout.strip():
                out = json.loads(p.stdout).get("hookSpecificOutput", {})
                if out.get("permissionDecision") == "deny":
                    return out.get("permissionDecisionReason", "denied by hook")
    return None


def run_commands():
    """FAKE_CLAUDE_RUN's commands, each a Bash tool_use (its own assistant message) and the
    tool_result of running it through the PreToolUse hooks and sh."""
    for n, command in enumerate(json.loads(os.environ.get("FAKE_CLAUDE_RUN") or "[]")):
        tid = f"toolu_fake_run_{n}"
        tool_input = {"command": command, "description": "run a check"}
        assistant(msg_id(), {"type": "tool_use", "id": tid, "name": "Bash", "input": tool_input})
        denied = run_hooks("Bash", tool_input)
        if denied:
            tool_result(tid, denied, is_error=True)
            continue
        p = subprocess.run(command, shell=True, capture_output=True, text=True)
        tool_result(tid, (p.stdout + p.stderr).strip(), is_error=p.returncode != 0,
                    use_result={"stdout": p.stdout, "stderr": p.stderr, "interrupted": False,
                                "isImage": False, "noOutputExpected": False})


prompt = argv[argv.index("-p") + 1]
answer = scripted("FAKE_CLAUDE_ANSWERS", answer)
if history:
    answer = f"Resumed {session} with {len(history)} earlier turn(s). {answer}"

if scenario == "success":
    run_commands()
    mid = msg_id()
    assistant(mid, {"type": "text", "text": answer})
    save(prompt, answer)
    result(answer)
elif scenario == "corrupt_line":
    mid = msg_id()
    sys.stdout.write('{"type": "assistant", "message": {"id": "cut\n')   # cut mid-object
    sys.stdout.write("[1, 2]\n")                                          # JSON, not an object
    sys.stdout.flush()
    assistant(mid, {"type": "text", "text": answer})
    save(prompt, answer)
    result(answer)
elif scenario == "writes_result":
    with open(os.environ["PRUN_RESULT_FILE"], "w") as f:
        f.write("# Result written by the worker\n\nAll sections present.\n")
    result("Done: the result file is written.")
elif scenario == "tool_use":
    # text block and tool_use block: two events, one message id, one turn
    mid = msg_id()
    assistant(mid, {"type": "text", "text": "I will write the file."})
    assistant(mid, {"type": "tool_use", "id": "toolu_fake_1", "name": "Write",
                    "input": {"file_path": "hello.txt", "content": "hi\n"}})
    if bypass or mode == "acceptEdits":
        with open("hello.txt", "w") as f:
            f.write("hi\n")
        tool_result("toolu_fake_1", "File created successfully at: hello.txt")
        assistant(msg_id(), {"type": "text", "text": answer})
        save(prompt, answer)
        result(answer, turns=2)
    else:
        scenario = "permission_denied"
if scenario == "permission_denied":
    where = "plan mode" if mode == "plan" else "default mode"
    mid = msg_id()
    assistant(mid, {"type": "tool_use", "id": "toolu_fake_2", "name": "Write",
                    "input": {"file_path": "hello.txt", "content": "hi\n"}})
    text = (f"Cannot write to hello.txt while in {where}."
            if mode == "plan" else "Claude requested permissions to write to hello.txt, "
            "but you haven't granted it yet.")
    emit({"type": "system", "subtype": "permission_denied", "tool_name": "Write",
          "tool_use_id": "toolu_fake_2", "message": text, "uuid": str(uuid.uuid4()), **common})
    tool_result("toolu_fake_2", text, is_error=True,
                meta={"id": "toolu_fake_2", "permission_decision": {"decision": "reject"}})
    final = "Done: I wrote hello.txt."  # the model may still claim success
    assistant(msg_id(), {"type": "text", "text": final})
    result(final, turns=2, denials=[{"tool_name": "Write", "tool_use_id": "toolu_fake_2",
                                     "tool_input": {"file_path": "hello.txt"}}])
elif scenario == "bash":
    command = os.environ.get("FAKE_CLAUDE_BASH", "echo hi")
    mid = msg_id()
    assistant(mid, {"type": "tool_use", "id": "toolu_fake_3", "name": "Bash",
                    "input": {"command": command, "description": "run it"}})
    denied = run_hooks("Bash", {"command": command, "description": "run it"})
    if denied:
        tool_result("toolu_fake_3", denied, is_error=True)
        final = "The guard refused that command; the change is left uncommitted for review."
    else:
        p = subprocess.run(command, shell=True, capture_output=True, text=True)
        tool_result("toolu_fake_3", p.stdout.strip(), is_error=p.returncode != 0)
        final = f"Ran the command. {answer}"
    assistant(msg_id(), {"type": "text", "text": final})
    result(final, turns=2)
elif scenario == "error_status":
    for attempt in (1, 2):
        emit({"type": "system", "subtype": "api_retry", "attempt": attempt, "max_retries": 2,
              "retry_delay_ms": 5, "error_status": 500, "error": "server_error", **common,
              "uuid": str(uuid.uuid4())})
    api_error(500, "server_error", "api_error",
              "API Error: 500 Internal server error. This is a server-side issue, usually "
              "temporary — try again in a moment.")
elif scenario == "rate_limit":
    for attempt in (1, 2):
        emit({"type": "system", "subtype": "api_retry", "attempt": attempt, "max_retries": 2,
              "retry_delay_ms": 5, "error_status": 429, "error": "rate_limit", **common,
              "uuid": str(uuid.uuid4())})
    api_error(429, "rate_limit", "rate_limit_error", "API Error: Request rejected (429) · " +
              os.environ.get("FAKE_CLAUDE_ERROR", "This request would exceed the rate limit for "
                             "your organization of 50 input tokens per minute."))
elif scenario == "quota":
    api_error(429, "rate_limit", "rate_limit_error", "API Error: Request rejected (429) · " +
              os.environ.get("FAKE_CLAUDE_ERROR", "Your credit balance is too low / usage "
                             "limit reached."))
elif scenario == "timeout_api":
    emit({"type": "system", "subtype": "api_retry", "attempt": 1, "max_retries": 1,
          "retry_delay_ms": 5, "error_status": None, "error": "unknown", **common,
          "uuid": str(uuid.uuid4())})
    result("Request timed out. If the API is slow to answer, set API_TIMEOUT_MS above 10000.",
           is_error=True, terminal="api_error")
    sys.exit(1)
elif scenario == "nonzero_exit":
    sys.stderr.write("claude: something broke before the first request\n")
    sys.exit(1)
elif scenario == "no_result":
    assistant(msg_id(), {"type": "text", "text": "I was about to answer"})
elif scenario == "hang":
    signal.signal(signal.SIGTERM, lambda *a: os._exit(143))
    while True:
        time.sleep(3600)
elif scenario not in ("success", "writes_result", "tool_use", "corrupt_line"):
    sys.exit(f"fake claude: unknown scenario {scenario}")
