"""A fake Gemini CLI (``gemini -p``) for tests: the real 0.61 stream-json, scripted by env.

FAKE_GEMINI_SCENARIO  success (default), tool_use, error_status, quota, daily_quota,
                      no_result, hang, nonzero_exit, shell
FAKE_GEMINI_SHELL     the shell scenario's command (its run_shell_command tool)
FAKE_GEMINI_RUN       a JSON list of shell commands the worker runs before it answers
                      (success scenario): each a run_shell_command tool_use and its
                      tool_result, as Gemini CLI prints them, run in the working folder
FAKE_GEMINI_RESPONSE  the answer text (streamed as several delta messages)
FAKE_GEMINI_ANSWERS   a JSON file {packet id: [answer of call 1, of call 2, ...]}: the
                      unit's n-th call answers its n-th text (a follow-up is call 2)
FAKE_GEMINI_HOME      where sessions are kept, per working folder (its whole path), so
                      --resume works from that folder only
FAKE_GEMINI_LOG       append one JSON line per call: argv, cwd, stdin closed, env keys
FAKE_GEMINI_PIDFILE   the hang scenario writes the pid of the process doing the work
FAKE_GEMINI_STATS     the result event's ``stats`` (JSON); default: totals and one model's

Checks as in the real CLI: no trust signal -> exit 55; unknown --resume id or another folder ->
exit 42. Unless GEMINI_CLI_NO_RELAUNCH=true the process relaunches itself as a child in the
same process group and waits for it, ignoring SIGTERM (SIGTERM to the parent alone stops
nothing). SIGTERM to the working process exits 0 with no result event.
"""

import json
import os
import signal
import subprocess
import sys
import time
import uuid

argv = sys.argv[1:]
scenario = os.environ.get("FAKE_GEMINI_SCENARIO", "success")
answer = os.environ.get("FAKE_GEMINI_RESPONSE", "Hello from the fake Gemini. The answer is 42.")
home = os.environ.get("FAKE_GEMINI_HOME") or os.path.join(os.getcwd(), ".fake-gemini")


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


child = os.environ.get("FAKE_GEMINI_CHILD") == "1"
log = os.environ.get("FAKE_GEMINI_LOG")
if log and not child:
    with open(log, "a") as f:
        f.write(json.dumps({"argv": argv, "cwd": os.getcwd(), "stdin_closed": stdin_closed(),
                            "env": {k: v for k, v in os.environ.items()
                                    if k.startswith(("PRUN_", "FAKE_", "GEMINI_"))}}) + "\n")

trusted = os.environ.get("GEMINI_CLI_TRUST_WORKSPACE") == "true" or "--skip-trust" in argv
if not trusted:
    sys.stderr.write("Gemini CLI is not running in a trusted directory. To proceed, either use "
                     "--skip-trust, set the GEMINI_CLI_TRUST_WORKSPACE=true environment "
                     "variable, or trust this directory.\n")
    sys.exit(55)

if os.environ.get("GEMINI_CLI_NO_RELAUNCH") != "true" and not child:
    # the real CLI relaunches a child node process in the same process group and waits for it
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    p = subprocess.Popen([sys.executable, *sys.orig_argv[1:]],
                         env={**os.environ, "FAKE_GEMINI_CHILD": "1"})
    sys.exit(p.wait() if p.wait() >= 0 else 0)

# sessions are kept per working folder, by its whole path (the real CLI's projects.json)
folder = os.path.join(home, os.getcwd().strip("/").replace("/", "-").replace("_", "-"))
resume = opt("--resume")
history = []
if resume:
    path = os.path.join(folder, f"{resume}.jsonl")
    if not os.path.isdir(folder):
        sys.stderr.write("Error resuming session: No previous sessions found for this project.\n")
        sys.exit(42)
    if not os.path.exists(path):
        sys.stderr.write(f'Error resuming session: Invalid session identifier "{resume}".\n')
        sys.exit(42)
    with open(path) as f:
        history = [json.loads(line) for line in f if line.strip()]
    session = resume
else:
    session = str(uuid.uuid4())
prompt = argv[argv.index("-p") + 1]
model = opt("-m") or opt("--model") or "auto"
yolo = "--yolo" in argv or opt("--approval-mode") == "yolo"
ts = "2026-11-30T13:06:13.673Z"

emit({"type": "init", "timestamp": ts, "session_id": session, "model": model})
emit({"type": "message", "timestamp": ts, "role": "user", "content": prompt})


def deltas(text):
    for i in range(0, len(text), 15):
        emit({"type": "message", "timestamp": ts, "role": "assistant",
              "content": text[i:i + 15], "delta": True})


def result(status, error=None):
    body = {"type": "result", "timestamp": ts, "status": status}
    if error:
        body["error"] = {"type": "unknown", "message": error}
    counts = {"total_tokens": 10587, "input_tokens": 10547, "output_tokens": 40, "cached": 0,
              "input": 10547}
    body["stats"] = json.loads(os.environ["FAKE_GEMINI_STATS"]) if os.environ.get(
        "FAKE_GEMINI_STATS") else {**counts, "duration_ms": 184, "tool_calls": 0,
                                   "models": {model: dict(counts)}}
    emit(body)


def save(text):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, f"{session}.jsonl"), "a") as f:
        f.write(json.dumps({"prompt": prompt, "answer": text}) + "\n")


answer = scripted("FAKE_GEMINI_ANSWERS", answer)
if history:
    answer = f"Resumed {session} with {len(history)} earlier turn(s). {answer}"

def run_commands():
    """FAKE_GEMINI_RUN's commands through sh, each a run_shell_command tool_use and its
    tool_result (with --yolo; without it the tool is not registered, as in the real CLI)."""
    for n, command in enumerate(json.loads(os.environ.get("FAKE_GEMINI_RUN") or "[]")):
        tid = f"run_shell_command__run_shell_command_{int(time.time() * 1000)}_{n}"
        emit({"type": "tool_use", "timestamp": ts, "tool_name": "run_shell_command",
              "tool_id": tid, "parameters": {"command": command, "description": "a check"}})
        if not yolo:
            msg = 'Tool "run_shell_command" not found. Did you mean one of: "read_file"?'
            emit({"type": "tool_result", "timestamp": ts, "tool_id": tid, "status": "error",
                  "output": msg, "error": {"type": "tool_not_registered", "message": msg}})
            continue
        ran = subprocess.run(["sh", "-c", command], capture_output=True, text=True)
        emit({"type": "tool_result", "timestamp": ts, "tool_id": tid,
              "status": "success" if ran.returncode == 0 else "error",
              "output": ran.stdout + ran.stderr})


if scenario == "success":
    run_commands()
    deltas(answer)
    save(answer)
    result("success")
elif scenario == "tool_use":
    tid = f"write_file__write_file_{int(time.time() * 1000)}_0"
    emit({"type": "tool_use", "timestamp": ts, "tool_name": "write_file", "tool_id": tid,
          "parameters": {"file_path": "hello.txt", "content": "hi\n"}})
    if yolo:
        with open("hello.txt", "w") as f:
            f.write("hi\n")
        emit({"type": "tool_result", "timestamp": ts, "tool_id": tid, "status": "success"})
    else:
        msg = 'Tool "write_file" not found. Did you mean one of: "read_file", "grep_search"?'
        emit({"type": "tool_result", "timestamp": ts, "tool_id": tid, "status": "error",
              "output": msg, "error": {"type": "tool_not_registered", "message": msg}})
    deltas(answer)
    save(answer)
    result("success")
elif scenario == "error_status":
    sys.stderr.write("Attempt 1 failed with status 500. Retrying with backoff...\n")
    result("error", '[API Error: {"error":{"code":500,"message":"An internal error has '
                    'occurred.","status":"INTERNAL"}}]')
    sys.exit(244)
elif scenario == "quota":
    sys.stderr.write("Attempt 1 failed: You exceeded your current quota. Retrying after 7000ms..."
                     "\nRetryableQuotaError retryDelayMs: 7000\n")
    result("error", "[API Error: You exceeded your current quota, please check your plan and "
                    "billing details. * Quota exceeded for metric: generate_content_free_tier_"
                    "requests, limit: 10 Please retry in 7s.\nSuggested retry after 7s.]\n"
                    "Please wait and try again later.")
    sys.exit(173)
elif scenario == "daily_quota":
    sys.stderr.write("TerminalQuotaError: daily quota\n")
    result("error", "[API Error: You have exhausted your daily quota on this model.]\n"
                    "Please wait and try again later.")
    sys.exit(173)
elif scenario == "no_result":
    deltas("I was about to answer")
elif scenario == "nonzero_exit":
    sys.stderr.write("gemini: unexpected failure\n")
    sys.exit(3)
elif scenario == "hang":
    pidfile = os.environ.get("FAKE_GEMINI_PIDFILE")
    if pidfile:
        with open(pidfile, "w") as f:
            f.write(str(os.getpid()))
    signal.signal(signal.SIGTERM, lambda *a: os._exit(0))
    while True:
        time.sleep(3600)
elif scenario == "shell":  # run_shell_command with --yolo: FAKE_GEMINI_SHELL through sh
    tid = f"run_shell_command__run_shell_command_{int(time.time() * 1000)}_0"
    command = os.environ["FAKE_GEMINI_SHELL"]
    emit({"type": "tool_use", "timestamp": ts, "tool_name": "run_shell_command",
          "tool_id": tid, "parameters": {"command": command}})
    ran = subprocess.run(["sh", "-c", command], capture_output=True, text=True)
    emit({"type": "tool_result", "timestamp": ts, "tool_id": tid,
          "status": "success" if ran.returncode == 0 else "error",
          "output": ran.stdout + ran.stderr})
    deltas(f"{answer} The command exited {ran.returncode}: {ran.stderr.strip()}")
    result("success")
else:
    sys.exit(f"fake gemini: unknown scenario {scenario}")
