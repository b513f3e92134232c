"""The machine-wide port registry, driven by real processes on one real registry file."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading

import pytest

from prun import settings
from prun._util.process import create_time
from prun.errors import UsageError
from prun.ports import reserve as ports
from prun.ports.ranges import PortsThere, RunRanges

# A process that holds ports, as a supervisor or dispatcher would: it reserves and releases
# what its stdin asks for and answers each line with one line of JSON.
HOLDER = r"""
import json, os, sys
from prun import settings
from prun.ports import reserve as ports
from prun.ports.ranges import PortsThere

kept = {}
print("ready", flush=True)
for line in sys.stdin:
    cmd, attempt, *state = line.split()
    run = attempt.split(".")[0]
    holder = ports.Holder.of_process(attempt, run_id=run, packet_id="p-" + attempt)
    if cmd == "reserve":
        try:
            r = ports.reserve(holder, ports.port_request(state))
            out = {"ports": list(r.ports), "env": r.env()}
        except ports.PortBusy as e:
            out = {"busy": e.port, "attempt": e.attempt_id}
    elif cmd == "release":
        out = {"released": len(ports.release(attempt))}
    elif cmd == "there":          # as a cluster's worker process, for a unit it runs
        there = PortsThere(ports.port_request(state), run, "p-" + attempt)
        kept[attempt] = (there, there.take(attempt, os.environ))
        out = {"env": kept[attempt][1].env()}
    elif cmd == "back":
        there, held = kept.pop(attempt)
        there.give_back(held, os.environ)
        out = {"back": attempt}
    elif cmd == "churn":          # reserve and release until killed
        request = ports.port_request(state)
        ports.reserve(holder, request)
        ports.release(attempt)
        print(json.dumps({"churning": True}), flush=True)
        while True:
            ports.reserve(holder, request)
            ports.release(attempt)
    print(json.dumps(out), flush=True)
"""


class HolderProcess:
    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", HOLDER], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout.readline() == "ready\n"

    def send(self, line: str) -> None:
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def answer(self) -> dict:
        return json.loads(self.proc.stdout.readline())

    def ask(self, line: str) -> dict:
        self.send(line)
        return self.answer()

    def kill(self) -> None:
        """kill -9, then reap it: its pid is gone."""
        self.proc.kill()
        self.proc.wait()

    def close(self) -> None:
        """Ends without releasing anything."""
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


@pytest.fixture
def holders():
    made: list[HolderProcess] = []

    def make() -> HolderProcess:
        made.append(HolderProcess())
        return made[-1]

    yield make
    for h in made:
        if h.proc.poll() is None:
            h.kill()


def me(attempt: str) -> ports.Holder:
    return ports.Holder.of_process(attempt, run_id=attempt.split(".")[0], packet_id="p")


def attempts(entries: list[ports.Entry]) -> set[str]:
    return {e.holder.attempt_id for e in entries}


def listening_port(low: int = 45000) -> socket.socket:
    """A plain listening socket on 127.0.0.1, on the first port from ``low`` that is free."""
    for port in range(low, low + 2000):
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            s.close()
            continue
        s.listen()
        return s
    raise AssertionError("no free port to listen on")


# Requests -----------------------------------------------------------------------------------

def test_state_entries_become_a_typed_request():
    r = ports.port_request(["port:8000", "ports:8100-8110", "db:orders", "port:web",
                            "port:db-main", "fixture:users"], {"PRUN_PORT_COUNT": "4"})
    assert r.fixed == (ports.PortRange(8000), ports.PortRange(8100, 11))
    assert r.names == ("web", "db-main")
    assert r.count == 4
    assert ports.env_name("db-main") == "PRUN_PORT_DB_MAIN"
    assert ports.port_request(["db:orders"], {}) == ports.PortRequest()


@pytest.mark.parametrize("entry", ["port:", "port", "port:0", "port:70000", "port:9000-8000",
                                   "port:8000-70000", "port:my api", "port:9x", "port:-web",
                                   "port:_web", "port:web.1"])
def test_a_malformed_port_entry_is_refused_naming_it(entry):
    with pytest.raises(UsageError) as e:
        ports.port_request(["db:orders", entry], {}, where="plan.yaml:7")
    assert e.value.exit_code == 2
    assert e.value.message.startswith(f"plan.yaml:7: state entry {entry!r} ")
    assert e.value.hint


@pytest.mark.parametrize(("state", "variable"), [(["port:my-db", "port:MY_DB"], "PRUN_PORT_MY_DB"),
                                                 (["port:base"], "PRUN_PORT_BASE"),
                                                 (["port:Count"], "PRUN_PORT_COUNT"),
                                                 (["port:start"], "PRUN_PORT_START")])
def test_a_name_whose_variable_is_taken_is_refused(state, variable):
    with pytest.raises(UsageError) as e:
        ports.port_request(state, {})
    assert variable in e.value.message


@pytest.mark.parametrize("env", [{"PRUN_PORT_COUNT": "zero"}, {"PRUN_PORT_COUNT": "0"},
                                 {"PRUN_PORT_START": "80"}, {"PRUN_PORT_START": "65536"},
                                 {"PRUN_PORT_START": "65530", "PRUN_PORT_COUNT": "10"}])
def test_bad_port_settings_are_usage_errors(env):
    with pytest.raises(UsageError):
        ports.port_request([], env)
    with pytest.raises(UsageError):
        ports.reserve(me("r.a"), ports.PortRequest(), env)
    assert ports.held() == []


# Reserving ----------------------------------------------------------------------------------

def test_eight_processes_at_once_never_share_a_port(holders):
    procs = [holders() for _ in range(8)]          # each has imported prun and waits
    registry = ports.registry_path()
    done = threading.Event()
    parsed, torn = [], []

    def read_without_the_lock() -> None:          # what a reader of the file sees meanwhile
        while True:
            last = done.is_set()
            try:
                with open(registry, encoding="utf-8") as f:
                    text = f.read()
                json.loads(text)
                parsed.append(text)
            except FileNotFoundError:
                pass
            except ValueError:
                torn.append(text)
            if last:
                return

    reader = threading.Thread(target=read_without_the_lock)
    reader.start()
    for i, p in enumerate(procs):
        p.send("\n".join(f"reserve r{i}.{j} port:web port:db-main" for j in range(5)))
    answers = [p.answer() for p in procs for _ in range(5)]
    done.set()
    reader.join()

    taken: list[int] = []
    for a in answers:
        env = a["env"]
        base, count = int(env["PRUN_PORT_BASE"]), int(env["PRUN_PORT_COUNT"])
        own = set(range(base, base + count))
        named = {int(env["PRUN_PORT_WEB"]), int(env["PRUN_PORT_DB_MAIN"])}
        assert count == 10 and len(named) == 2 and not own & named
        assert sorted(own | named) == a["ports"]
        taken += a["ports"]
    assert len(taken) == len(set(taken)) == 8 * 5 * 12
    assert torn == [] and parsed
    live = ports.held()
    assert len(live) == 8 * 5 * 3 and sorted(p for e in live for p in e.ports.ports) == \
        sorted(taken)

    for p in procs:
        p.close()                                  # gone without releasing: crash repair
    assert ports.held() == []


def test_a_reservation_exports_its_range_and_named_ports():
    r = ports.reserve(me("r.a"), ports.port_request(["port:web", "port:7000-7001"]))
    env = r.env()
    assert set(env) == {"PRUN_PORT_BASE", "PRUN_PORT_COUNT", "PRUN_PORT_WEB"}
    assert env["PRUN_PORT_BASE"] == str(r.range.base) and env["PRUN_PORT_COUNT"] == "10"
    assert r.named == {"web": int(env["PRUN_PORT_WEB"])}
    assert r.fixed == (ports.PortRange(7000, 2),)
    assert r.ports == tuple(sorted({*r.range.ports, r.named["web"], 7000, 7001}))
    assert r.range.base >= settings.PORT_START_DEFAULT
    assert {(e.kind, e.name) for e in ports.held()} == {("range", None), ("name", "web"),
                                                        ("fixed", None)}


def test_a_fixed_port_held_elsewhere_is_busy_and_nothing_is_taken(holders):
    other = holders()
    assert "ports" in other.ask("reserve r1.a port:8000 port:8100-8105")
    request = ports.port_request(["port:9000", "port:8103", "port:web"])
    with pytest.raises(ports.PortBusy) as busy:
        ports.reserve(me("r2.b"), request)
    e = busy.value
    assert (e.port, e.wanted) == (8103, (8103, 1))
    assert (e.attempt_id, e.run_id, e.packet_id) == ("r1.a", "r1", "p-r1.a")
    assert {x.holder.pid for x in ports.held()} == {other.proc.pid}
    assert attempts(ports.held()) == {"r1.a"}      # all or nothing: 9000 and web not taken

    assert other.ask("release r1.a") == {"released": 3}
    r = ports.reserve(me("r2.b"), request)
    assert r.fixed == (ports.PortRange(9000), ports.PortRange(8103))
    assert {9000, 8103} <= set(r.ports)


def test_a_fixed_port_of_a_killed_holder_is_free_again(holders):
    other = holders()
    assert "ports" in other.ask("reserve r1.a port:8000")
    request = ports.port_request(["port:8000"])
    with pytest.raises(ports.PortBusy):
        ports.reserve(me("r2.b"), request)
    other.kill()
    assert 8000 in ports.reserve(me("r2.b"), request).ports
    assert attempts(ports.held()) == {"r2.b"}


def test_a_pid_with_another_start_time_holds_nothing():
    reused = ports.Holder("r1.a", "r1", "p", os.getpid(), create_time(os.getpid()) - 1000.0)
    ports.reserve(reused, ports.port_request(["port:8000"]))
    assert ports.held() == []
    assert 8000 in ports.reserve(me("r2.b"), ports.port_request(["port:8000"])).ports


def test_a_port_a_plain_socket_listens_on_is_never_assigned(monkeypatch):
    with listening_port() as s:
        port = s.getsockname()[1]
        monkeypatch.setenv("PRUN_PORT_START", str(port))
        r = ports.reserve(me("r.a"), ports.port_request(["port:web", "port:api"]))
        assert port not in r.ports and min(r.ports) > port
        assert ports.in_use(port)


def test_assigned_ports_skip_every_port_the_registry_holds(holders, monkeypatch):
    start = 47000
    monkeypatch.setenv("PRUN_PORT_START", str(start))  # the holder process reads it too
    other = holders()
    theirs = set(other.ask(f"reserve r1.a port:{start} port:{start + 12} port:web")["ports"])
    assert {start, start + 12} <= theirs
    mine = ports.reserve(me("r2.b"), ports.port_request(["port:web", "port:api"]))
    assert not theirs & set(mine.ports)


def test_no_room_left_is_ports_exhausted_and_takes_nothing():
    ports.reserve(me("r1.a"), ports.port_request(["port:65520-65535"]))
    env = {**os.environ, "PRUN_PORT_START": "65515", "PRUN_PORT_COUNT": "5"}
    with pytest.raises(ports.PortsExhausted) as e:
        ports.reserve(me("r2.b"), ports.port_request(["port:web"], env), env)
    assert (e.value.count, e.value.start) == (1, 65515)   # its range fit, its named port did not
    assert isinstance(e.value, ports.PortsUnavailable)
    assert attempts(ports.held()) == {"r1.a"}


def test_reserving_again_for_one_attempt_replaces_what_it_held():
    ports.reserve(me("r.a"), ports.port_request(["port:8000", "port:web"]))
    again = ports.reserve(me("r.a"), ports.port_request(["port:8001"]))
    live = ports.held()
    assert sorted(p for e in live for p in e.ports.ports) == list(again.ports)
    assert 8000 not in again.ports and 8001 in again.ports


# A run's block of own ranges -------------------------------------------------------------

def run_ranges(block: int = 3, size: int = 4) -> RunRanges:
    pid = os.getpid()
    return RunRanges("r9", pid, create_time(pid), size, block=block)


def test_a_run_leases_its_units_ranges_once_and_hands_them_out_in_memory(monkeypatch):
    monkeypatch.setenv("PRUN_PORT_START", "46000")
    ranges = run_ranges()
    first = [ranges.take() for _ in range(3)]
    held = ports.held()
    assert attempts(held) == {"r9/ranges"} and [e.ports for e in held] == first  # one lease
    for r in first:
        ranges.give_back(r)
    again = [ranges.take() for _ in range(3)]
    assert again == first and ports.held() == held      # given back, reused, no new lease
    assert ranges.take() not in first                   # a fourth at once: another block
    assert len(ports.held()) == 6
    ranges.close()
    assert ports.held() == []


def test_a_run_range_with_a_port_in_use_waits_its_turn(monkeypatch):
    with listening_port(46500) as s:
        port = s.getsockname()[1]
        monkeypatch.setenv("PRUN_PORT_START", str(port + 1))
        ranges = run_ranges(block=2, size=2)
        a, b = ranges.take(), ranges.take()
        ranges.give_back(a)
        ranges.give_back(b)
    # a socket now listens in the first range: it is passed over until it is free again
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", a.base))
        busy.listen()
        assert ranges.take() == b
        ranges.give_back(b)
        assert ranges.take() == b
    assert ranges.take() == a
    ranges.close()


def test_worker_processes_of_one_machine_take_a_runs_ranges_each_in_its_own_block(holders,
                                                                                  monkeypatch):
    monkeypatch.setenv("PRUN_PORT_START", "47000")
    other = holders()                     # another worker process of this machine
    theirs = int(other.ask("there r7.a1")["env"]["PRUN_PORT_BASE"])
    there = PortsThere(ports.port_request([]), "r7", "p")
    env = dict(os.environ)
    a, b = there.take("r7.b1", env), there.take("r7.b2", env)
    mine = f"r7/ranges/{os.getpid()}"
    held = ports.held()
    assert attempts(held) == {mine, f"r7/ranges/{other.proc.pid}"}  # one block each
    assert len({a.range, b.range}) == 2 and theirs not in (a.range.base, b.range.base)
    assert len([e for e in held if e.holder.attempt_id == mine]) == 4   # leased once, 4 ranges
    there.give_back(a, env)
    assert attempts(ports.held()) == attempts(held)     # b is still out: the block stays
    there.give_back(b, env)
    # every range of this process's block is back: given back to the registry; the other
    # process's block is its own, and stays
    assert attempts(ports.held()) == {f"r7/ranges/{other.proc.pid}"}
    other.ask("back r7.a1")
    assert ports.held() == []


# Releasing ----------------------------------------------------------------------------------

def test_release_frees_exactly_one_attempts_entries(holders):
    other = holders()
    theirs = other.ask("reserve r1.x port:api")["ports"]
    a1 = ports.reserve(me("r2.a1"), ports.port_request(["port:web", "port:7000"]))
    a2 = ports.reserve(me("r2.a2"), ports.port_request(["port:web"]))
    gone = ports.release("r2.a1")
    assert attempts(gone) == {"r2.a1"} and len(gone) == 3
    assert sorted(p for e in gone for p in e.ports.ports) == list(a1.ports)
    live = ports.held()
    assert attempts(live) == {"r1.x", "r2.a2"}
    assert sorted(p for e in live for p in e.ports.ports) == sorted([*theirs, *a2.ports])
    assert ports.release("r2.a1") == []


# The file -----------------------------------------------------------------------------------

def test_a_writer_killed_at_any_point_leaves_a_readable_registry(holders, capsys):
    keeper = holders()
    assert "ports" in keeper.ask("reserve r1.keep port:web")
    churner = holders()
    assert churner.ask("churn r2.c port:db port:8000") == {"churning": True}
    churner.kill()                                 # mid-write, mid-lock or between the two
    assert attempts(ports.held()) == {"r1.keep"}
    assert capsys.readouterr().err == ""
    with open(ports.registry_path(), encoding="utf-8") as f:
        assert len(json.load(f)["entries"]) == 2


@pytest.mark.parametrize("data", [
    b'{"format": 1, "entries": [{"base": 20000, "cou',       # cut off by a writer in place
    b"", b"not json", b"[]", b"\xff\xfe\x00garbage", b'{"format": 99, "entries": []}',
    b'{"format": 1, "entries": [{"base": "20000", "count": 10}]}',
    b'{"format": 1, "entries": {"base": 20000}}'])
def test_a_corrupt_registry_is_set_aside_with_one_warning_and_rebuilt(data, capsys):
    path = ports.registry_path()
    os.makedirs(os.path.dirname(path))
    with open(path, "wb") as f:
        f.write(data)
    r = ports.reserve(me("r.a"), ports.port_request(["port:web"]))
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("prun: warning: the port registry ")
    aside = [n for n in os.listdir(os.path.dirname(path)) if n.startswith("ports.json.corrupt-")]
    assert len(aside) == 1
    with open(os.path.join(os.path.dirname(path), aside[0]), "rb") as f:
        assert f.read() == data
    assert sorted(p for e in ports.held() for p in e.ports.ports) == list(r.ports)
    assert capsys.readouterr().err == ""           # rebuilt: no second warning
