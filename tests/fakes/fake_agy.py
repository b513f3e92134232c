"""A fake Antigravity CLI for tests: speaks agy's stream-json, scripted by environment.

FAKE_AGY_SCENARIO   success (default), error_status, quota, nonzero_exit, no_result, hang,
                    writes_result, writes_result_then_error, huge, slow, non_utf8, ignore_term,
                    grandchild, blank_status, short_response, garbage, shell
FAKE_AGY_SHELL      the shell scenario's command (run through sh, like agy's run_command)
FAKE_AGY_RESPONSE   the final response text
FAKE_AGY_ANSWERS    a JSON file {packet id: [answer of call 1, of call 2, ...]}: the
                    unit's n-th call answers its n-th text (a follow-up is call 2)
FAKE_AGY_ERROR      the error text of an ERROR result
FAKE_AGY_LOG        append one JSON line per call: argv, cwd, whether stdin was closed, env keys
FAKE_AGY_PIDFILE    where the grandchild scenario writes the grandchild's pid
FAKE_AGY_USAGE      the result's ``usage`` (JSON); default: input, output and cached tokens
"""

import json
import os
import signal
import subprocess
import sys
import time

scenario = os.environ.get("FAKE_AGY_SCENARIO", "success")
response = os.environ.get("FAKE_AGY_RESPONSE", "The unit is done: everything checked out fine.")
error = os.environ.get("FAKE_AGY_ERROR", "backend exploded")
argv = sys.argv[1:]
if argv == ["--version"]:   # as `prun doctor` asks it
    print("agy 0.0.0-fake")
    sys.exit(0)


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


log = os.environ.get("FAKE_AGY_LOG")
if log:
    with open(log, "a") as f:
        f.write(json.dumps({"argv": argv, "cwd": os.getcwd(), "stdin_closed": stdin_closed(),
                            "env": {k: v for k, v in os.environ.items()
                                    if k.startswith(("PRUN_", "FAKE_", "ANTIGRAVITY_"))}}) + "\n")

response = scripted("FAKE_AGY_ANSWERS", response)
conv = opt("--conversation") or f"conv-{os.getpid()}"
emit({"event": "init", "conversation_id": conv, "model": opt("--model")})


def step(text):
    emit({"event": "step_update", "step_update": {"step_type": "agent_response",
                                                  "text_delta": text}})


usage = json.loads(os.environ["FAKE_AGY_USAGE"]) if os.environ.get("FAKE_AGY_USAGE") else {
    "input_tokens": 2310, "output_tokens": 7, "cached_tokens": 0}


def result(status, resp, err=None):
    emit({"event": "result", "result": {"conversation_id": conv, "status": status,
                                        "response": resp, "error": err, "num_turns": 1,
                                        "duration_seconds": 0.1, "usage": usage}})


def hang():
    while True:
        time.sleep(3600)


if scenario == "success":
    emit({"event": "step_update", "step_update": {"step_type": "tool", "tool_name": "read_file"}})
    step(response)
    result("SUCCESS", response)
elif scenario == "error_status":
    step("I will start by reading the files.")
    result("ERROR", "I will start by reading the files.", error)
elif scenario == "quota":
    step("Let me look at the repository first.")
    result("ERROR", "Let me look at the repository first.",
           "Individual quota reached for this model. Resets in 34m.")
elif scenario == "nonzero_exit":
    step("partial")
    sys.stderr.write("agy: fatal: something broke\n")
    sys.exit(3)
elif scenario == "no_result":
    step("I was about to answer")
elif scenario == "hang":
    step("thinking...")
    hang()
elif scenario == "writes_result":
    with open(os.environ["PRUN_RESULT_FILE"], "w") as f:
        f.write("# Result written by the worker\n\nAll sections present.\n")
    result("SUCCESS", "Done.")
elif scenario == "writes_result_then_error":
    with open(os.environ["PRUN_RESULT_FILE"], "w") as f:
        f.write("# Result written by the worker before the backend stopped\n")
    step("Wrote the result; continuing")
    result("ERROR", "Wrote the result; continuing", error)
elif scenario == "huge":
    chunk = "x" * 1000
    for _ in range(5000):  # about 5 MB of deltas
        step(chunk)
    result("SUCCESS", response)
elif scenario == "slow":
    for i in range(5):
        step(f"part {i} ")
        time.sleep(0.05)
    result("SUCCESS", response)
elif scenario == "non_utf8":
    sys.stdout.buffer.write(b'{"event":"step_update","step_update":{"step_type":"agent_response",'
                            b'"text_delta":"caf\xe9 \xff"}}\n\xfe\xfe not json\n')
    sys.stdout.flush()
    result("SUCCESS", response + " caf\u00e9")
elif scenario == "ignore_term":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    step("you cannot stop me")
    hang()
elif scenario == "grandchild":
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
    with open(os.environ["FAKE_AGY_PIDFILE"], "w") as f:
        f.write(str(child.pid))
    step("spawned a helper")
    hang()
elif scenario == "blank_status":
    step(response)
    result("", response)
elif scenario == "short_response":
    result("SUCCESS", "ok")
elif scenario == "garbage":
    print("this is not json at all")
    sys.exit(0)
elif scenario == "shell":  # its run_command tool: FAKE_AGY_SHELL through sh, as agy runs it
    emit({"event": "step_update", "step_update": {"step_type": "tool",
                                                  "tool_name": "run_command"}})
    ran = subprocess.run(["sh", "-c", os.environ["FAKE_AGY_SHELL"]], capture_output=True,
                         text=True)
    step(f"exit {ran.returncode}: {ran.stdout}{ran.stderr}")
    result("SUCCESS", f"{response} The command exited {ran.returncode}: {ran.stderr.strip()}")
else:
    sys.exit(f"fake agy: unknown scenario {scenario}")
