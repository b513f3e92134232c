"""Routing: a table of cases covering every rule, the policy file, and `prun route`."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from helpers import FAKES, make_fake_cli, prun
from prun.errors import UsageError
from prun.plan.routing import Need, Policy, find_policy, load_policy, route, summary


@pytest.fixture(autouse=True)
def installed(tmp_path, monkeypatch):
    """agy, gemini and claude are installed (fakes): routing's rules here, not what is missing
    (tests/plan/test_missing_executors.py)."""
    for name in ("agy", "gemini", "claude"):
        fake = make_fake_cli(tmp_path / "bin", name, FAKES / f"fake_{name}.py")
        monkeypatch.setenv(f"PRUN_{name.upper()}_BIN", str(fake))


@dataclass(frozen=True)
class State:
    """The shape of prun.quota.GroupState, built directly by the tests."""

    group: str
    left: float | None = None
    resets_at: str | None = None
    read_at: str | None = "2026-11-30T12:00:00+00:00"
    source: str | None = "test"
    error: str | None = None

    @property
    def known(self) -> bool:
        return self.left is not None

    @property
    def empty(self) -> bool:
        return self.known and self.left <= 0


def states(**left) -> dict:
    """``states(agy_gemini=0, claude=40)`` -> readings keyed by group name."""
    out = {}
    for key, value in left.items():
        group = key.replace("_", "-")
        out[group] = State(group, value, "2026-11-30T13:00:00+00:00" if value == 0 else None)
    return out


ORD = Need("o1")
ORD2 = Need("o2")
TOOLS = Need("t1", session_tools=True)
GOOGLE = Need("g1", may_go_to=("google",))

# (case, needs, readings, policy, expected [(executor, action, words in the reason)])
CASES = [
    ("ordinary unit goes to agy while its group is healthy",
     [ORD], states(agy_gemini=0.8, claude=0.5), Policy(),
     [("agy", "assign", "larger share; agy-gemini healthy (left 80%)")]),
    ("an unread group is unknown, never empty",
     [ORD], {}, Policy(),
     [("agy", "assign", "agy-gemini not read (unknown is never empty)")]),
    ("a group known but unreadable stays unknown",
     [ORD], {"agy-gemini": State("agy-gemini", None, error="probe failed")}, Policy(),
     [("agy", "assign", "unknown")]),
    ("agy's group empty: ordinary units go to Sonnet (in-session)",
     [ORD, ORD2], states(agy_gemini=0, claude=0.5), Policy(),
     [("session", "reroute", "agy-gemini reads empty (resets 2026-11-30T13:00:00+00:00)"),
      ("session", "reroute", "goes to session instead")]),
    ("agy empty, Sonnet headless by policy",
     [ORD], states(agy_gemini=0), Policy(sonnet="claude"),
     [("claude", "reroute", "goes to claude instead")]),
    ("both pools empty: the unit waits, and the batch keeps every unit",
     [ORD, TOOLS], states(agy_gemini=0, claude=0), Policy(),
     [("agy", "wait", "and claude reads empty"), ("session", "wait", "only Sonnet has")]),
    ("session tools go to Sonnet in-session even when agy is healthy",
     [TOOLS], states(agy_gemini=0.9), Policy(),
     [("session", "assign", "needs session tools: Sonnet in-session")]),
    ("session tools never cross to agy when Claude is empty",
     [TOOLS], states(agy_gemini=0.9, claude=0), Policy(),
     [("session", "wait", "claude reads empty (resets")]),
    ("session tools with headless claude named in the packet",
     [Need("t2", session_tools=True, executor="claude")], {}, Policy(),
     [("claude", "assign", "the packet allows headless claude")]),
    ("session tools headless by policy",
     [TOOLS], {}, Policy(session_tools="claude"),
     [("claude", "assign", "headless claude, by policy")]),
    ("an executor named in the packet wins over the rule",
     [Need("n1", executor="gemini"), Need("n2", executor="claude"),
      Need("n3", executor="command")], states(agy_gemini=0.9), Policy(),
     [("gemini", "assign", "named in the packet"), ("claude", "assign", "named in the packet"),
      ("command", "assign", "named in the packet")]),
    ("a named executor whose pool is empty waits rather than moving",
     [Need("n1", executor="agy")], states(agy_gemini=0, claude=0.9), Policy(),
     [("agy", "wait", "named in the packet, but agy-gemini reads empty")]),
    ("agy's second group empty: agy still takes it, the dispatcher falls back to Gemini",
     [Need("m1", model="claude-opus-4-6-thinking")], states(agy_claude_gpt=0, agy_gemini=0.5),
     Policy(), [("agy", "assign", "runs the Gemini default instead (MODEL-FALLBACK); "
                                  "agy-gemini healthy (left 50%)")]),
    ("agy's two groups both empty: the second group's unit goes to Sonnet",
     [Need("m1", model="claude-opus-4-6-thinking")], states(agy_claude_gpt=0, agy_gemini=0),
     Policy(), [("session", "reroute", "agy-claude-gpt reads empty (resets 2026-11-30T13:00:00"
                                       "+00:00), and so does agy-gemini reads empty")]),
    ("capacity: the pool's overflow goes to the other pool",
     [Need("c1"), Need("c2"), Need("c3")], {}, Policy(capacity={"agy": 2}),
     [("agy", "assign", ""), ("agy", "assign", ""),
      ("session", "reroute", "the agy pool's batch capacity of 2 is taken")]),
    ("capacity on both pools: the rest waits, and says so",
     [Need("c1"), Need("c2"), Need("c3")], {}, Policy(capacity={"agy": 1, "sonnet": 1}),
     [("agy", "assign", ""), ("session", "reroute", "capacity of 1"),
      ("agy", "wait", "capacity of 1 is taken, and the sonnet pool's batch capacity")]),
    ("named units claim capacity before ordinary ones",
     [Need("c1"), Need("n1", executor="agy")], {}, Policy(capacity={"agy": 1}),
     [("session", "reroute", "capacity of 1"), ("agy", "assign", "named in the packet")]),
    ("policy share: half of the ordinary units go to Sonnet, interleaved",
     [Need(f"s{i}") for i in range(4)], {}, Policy(ordinary_share=0.5),
     [("agy", "assign", "agy's share (0.5) by policy"),
      ("session", "assign", "Sonnet's share (0.5) by policy"),
      ("agy", "assign", ""), ("session", "assign", "")]),
    ("policy share 0: every ordinary unit to Sonnet",
     [ORD], {}, Policy(ordinary_share=0, sonnet="claude"),
     [("claude", "assign", "Sonnet's share (1) by policy")]),
    ("Sonnet's share overflows to agy when Claude is empty",
     [ORD], states(claude=0), Policy(ordinary_share=0),
     [("agy", "reroute", "so it goes to agy instead")]),
    ("policy: Gemini CLI carries the ordinary share",
     [ORD], states(gemini=0.1), Policy(ordinary="gemini"),
     [("gemini", "assign", "gemini takes the larger share; gemini healthy")]),
    # the data boundary
    ("data for google only goes to agy, and says so",
     [GOOGLE], states(agy_gemini=0.8), Policy(),
     [("agy", "assign", "data may go to google only: ordinary unit: agy, the policy's only "
                        "executor inside it; agy-gemini healthy (left 80%)")]),
    ("data for google only waits for agy rather than going to Sonnet",
     [GOOGLE, ORD], states(agy_gemini=0, claude=0.9), Policy(),
     [("agy", "wait", "data may go to google only: ordinary unit: agy-gemini reads empty "
                      "(resets 2026-11-30T13:00:00+00:00), and its data may not go to session: "
                      "waits"),
      ("session", "reroute", "goes to session instead")]),
    ("data for google only: no overflow to Sonnet past agy's capacity",
     [Need("c1"), GOOGLE], {}, Policy(capacity={"agy": 1}),
     [("agy", "assign", "larger share"),
      ("agy", "wait", "the agy pool's batch capacity of 1 is taken, and its data may not go "
                      "to session")]),
    ("data for google only stays with agy under a Sonnet share",
     [GOOGLE], {}, Policy(ordinary_share=0),
     [("agy", "assign", "data may go to google only: ordinary unit: agy")]),
    ("data for anthropic only goes to Sonnet even while agy is healthy",
     [Need("a1", may_go_to=("anthropic",))], states(agy_gemini=0.9), Policy(),
     [("session", "assign", "data may go to anthropic only: ordinary unit: session")]),
    ("data for headless claude only: the Sonnet pool runs it there",
     [Need("h1", may_go_to=("claude",)), Need("h2", may_go_to=("claude",), session_tools=True)],
     {}, Policy(),
     [("claude", "assign", "data may go to claude only: ordinary unit: claude"),
      ("claude", "assign", "data may go to claude only: needs session tools: Sonnet headless "
                           "claude")]),
    ("a boundary both pools are inside changes nothing but the reason",
     [Need("b1", may_go_to=("google", "anthropic"))], states(agy_gemini=0), Policy(),
     [("session", "reroute", "data may go to google, anthropic only: ordinary unit: "
                             "agy-gemini reads empty")]),
    ("a named executor inside the boundary",
     [Need("n1", executor="gemini", may_go_to=("google",))], {}, Policy(),
     [("gemini", "assign", "data may go to google only: named in the packet")]),
]


@pytest.mark.parametrize("case,needs,readings,policy,expected", CASES, ids=[c[0] for c in CASES])
def test_routing_table(case, needs, readings, policy, expected):
    decisions = route(needs, readings, policy)
    assert [d.packet for d in decisions] == [n.id for n in needs]  # never shrunk, same order
    for d, (executor, action, words) in zip(decisions, expected, strict=True):
        assert (d.executor, d.action) == (executor, action), d.reason
        assert words in d.reason
        assert "\n" not in d.reason and d.reason


def test_models_come_from_packet_policy_or_executor_defaults():
    d = route([Need("a"), Need("b", model="gemini-3.1-pro"), Need("c", session_tools=True)],
              {}, Policy(models={"session": "haiku"}))
    assert [x.model for x in d] == ["gemini-3.8-flash-high", "gemini-3.1-pro", "haiku"]
    d = route([Need("a")], {}, Policy(), env={"ANTIGRAVITY_DISPATCH_MODEL": "gemini-x"})
    assert d[0].model == "gemini-x"


def test_wait_decisions_carry_the_reset_time():
    (d,) = route([TOOLS], states(claude=0))
    assert d.waits and d.resets_at == "2026-11-30T13:00:00+00:00" and d.group == "claude"


def test_lines_and_summary():
    d = route([ORD, TOOLS], states(claude=0))
    assert d[0].line() == ('ROUTE o1 executor=agy model=gemini-3.8-flash-high action=assign '
                           'reason="ordinary unit: agy takes the larger share; agy-gemini not '
                           'read (unknown is never empty)"')
    assert d[1].line().startswith("WAIT t1 executor=session model=sonnet action=wait reason=\"")
    assert summary(d) == "ROUTE-SUMMARY units=2 now=1 wait=1 agy=1"


@pytest.mark.parametrize("needs,words", [
    ([Need("x", executor="codex")], "codex is not a prun executor"),
    ([Need("x", executor="nonesuch")], "unknown executor"),
    ([Need("x"), Need("x")], "appears twice"),
    ([Need("x", session_tools=True, may_go_to=("google",))],
     "packet x needs session tools, which only Sonnet has (session reaches anthropic; claude "
     "reaches anthropic), but data may go to google only"),
    ([Need("x", may_go_to=("gemini",))],
     "packet x: data may go to gemini only, and no executor of the routing policy is inside "
     "that (agy reaches google; session reaches anthropic)"),
    ([Need("x", model="claude-sonnet-4-6", may_go_to=("google",))], "no executor of the routing"),
    ([Need("x", executor="claude", may_go_to=("agy",), source="a.md:4")],
     "a.md:4: packet x: executor claude with model sonnet reaches anthropic, outside the data "
     "boundary (may_go_to: agy)"),
])
def test_refusals(needs, words):
    with pytest.raises(UsageError) as info:
        route(needs, {})
    assert words in info.value.message and "\n" not in info.value.line()


def test_the_boundary_holds_for_the_model_a_run_launches():
    """The policy's [models] names a Gemini model, the environment a Claude one for agy: the
    data must be allowed to reach both."""
    need = Need("x", may_go_to=("google",))
    env = {"ANTIGRAVITY_DISPATCH_MODEL": "claude-sonnet-4-6"}
    with pytest.raises(UsageError, match="no executor of the routing policy"):
        route([need], {}, Policy(models={"agy": "gemini-3.1-pro"}), env)
    (d,) = route([need], {}, Policy(models={"agy": "gemini-3.1-pro"}))
    assert (d.executor, d.model) == ("agy", "gemini-3.1-pro")


# the policy file -------------------------------------------------------------------------------

def test_policy_file_is_found_at_the_repository_root(tmp_path):
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / ".prun").mkdir()
    (repo / ".prun" / "policy.toml").write_text("[routing]\nordinary_share = 0.25\n")
    (repo / "src" / "deep").mkdir(parents=True)
    assert find_policy({}, str(repo / "src" / "deep")) == str(repo / ".prun" / "policy.toml")
    assert find_policy({}, str(tmp_path)) is None
    other = tmp_path / "p.toml"
    other.write_text("")
    assert find_policy({"PRUN_POLICY": str(other)}, str(repo)) == str(other)
    with pytest.raises(UsageError, match="PRUN_POLICY names no file"):
        find_policy({"PRUN_POLICY": str(tmp_path / "missing.toml")})


def test_policy_file_search_stops_at_the_repository_root(tmp_path):
    (tmp_path / ".prun").mkdir()
    (tmp_path / ".prun" / "policy.toml").write_text("")   # above the repository: not used
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "src" / "deep").mkdir(parents=True)
    assert find_policy({}, str(repo / "src" / "deep")) is None
    (repo / "src" / ".prun").mkdir()
    (repo / "src" / ".prun" / "policy.toml").write_text("")   # the nearest one wins
    assert find_policy({}, str(repo / "src" / "deep")) == str(repo / "src" / ".prun" / "policy.toml")
    link = tmp_path / "link"
    link.symlink_to(repo)
    assert find_policy({}, str(link)) is None
    assert find_policy({}, str(link / "src")) == str(link / "src" / ".prun" / "policy.toml")


def test_policy_file_is_read_and_checked(tmp_path):
    f = tmp_path / "policy.toml"
    f.write_text('[routing]\nordinary = "gemini"\nordinary_share = 0.6\nsonnet = "claude"\n'
                 'session_tools = "session"\n[capacity]\nsonnet = 3\n[models]\nclaude = "opus"\n')
    p = load_policy(str(f))
    assert (p.ordinary, p.ordinary_share, p.sonnet, p.capacity, p.models, p.source) == (
        "gemini", 0.6, "claude", {"sonnet": 3}, {"claude": "opus"}, str(f))
    assert load_policy(None) == Policy()


@pytest.mark.parametrize("text,words", [
    ("[routing]\nordinary_share = 2\n", "ordinary_share"),
    ("[routing]\nsonnet = \"agy\"\n", "routing.sonnet"),
    ("[routing]\nsplit = 1\n", "unknown key(s) routing.split"),
    ("[pools]\n", "unknown key(s) pools"),
    ("[capacity]\nagy = -1\n", "capacity.agy"),
    ("[capacity]\ncodex = 1\n", "capacity.codex"),
    ("not toml = = =\n", "not valid TOML"),
])
def test_bad_policy_files(tmp_path, text, words):
    f = tmp_path / "policy.toml"
    f.write_text(text)
    with pytest.raises(UsageError, match=words.replace("(", r"\(").replace(")", r"\)")):
        load_policy(str(f))


# the command -----------------------------------------------------------------------------------

def packet(folder, name, front: str) -> str:
    path = folder / name
    path.write_text(f"---\n{front}\n---\nDo the work.\n")
    return str(path)


def test_route_command_on_packet_files(tmp_path):
    a = packet(tmp_path, "a.md", "id: a\nkind: code")
    b = packet(tmp_path, "b.md", "id: b\nsession_tools: true")
    c = packet(tmp_path, "c.md", "id: c\nexecutor: gemini")
    p = prun("route", a, b, c, "--no-quota", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert [line.split()[:3] for line in lines[:3]] == [
        ["ROUTE", "a", "executor=agy"], ["ROUTE", "b", "executor=session"],
        ["ROUTE", "c", "executor=gemini"]]
    assert lines[3] == "ROUTE-SUMMARY units=3 now=3 wait=0 agy=1 gemini=1 session=1"


def test_route_command_on_a_plan_with_policy_and_json(tmp_path):
    packet(tmp_path, "p1.md", "id: p1")
    packet(tmp_path, "p2.md", "id: p2")
    plan = tmp_path / "plan.yaml"
    plan.write_text("packets:\n  - \"p*.md\"\n  - {id: inline, executor: command, "
                    "command: [echo, hi], prompt: Say hi.}\n")
    policy = tmp_path / "policy.toml"
    policy.write_text("[capacity]\nagy = 1\nsonnet = 0\n")
    p = prun("route", str(plan), "--policy", str(policy), "--json", "--no-quota", cwd=tmp_path)
    assert p.returncode == 75, p.stderr  # one unit waits
    data = json.loads(p.stdout)
    assert [(u["packet"], u["executor"], u["action"]) for u in data["units"]] == [
        ("p1", "agy", "assign"), ("p2", "agy", "wait"), ("inline", "command", "assign")]
    assert data["summary"] == {"units": 3, "now": 2, "wait": 1,
                               "executors": {"agy": 1, "command": 1}}
    assert data["policy"] == str(policy)


def test_route_command_for_one_unit_by_flags(tmp_path):
    p = prun("route", "--session-tools", "--id", "mail", "--no-quota", cwd=tmp_path)
    assert p.returncode == 0
    assert p.stdout.splitlines()[0].startswith("ROUTE mail executor=session model=sonnet")
    p = prun("route", "--executor", "claude", "--model", "opus", "--no-quota", cwd=tmp_path)
    assert p.stdout.splitlines()[0].startswith("ROUTE unit executor=claude model=opus")


def test_route_command_uses_the_repository_policy(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / ".prun").mkdir()
    (tmp_path / ".prun" / "policy.toml").write_text('[routing]\nordinary_share = 0\n')
    p = prun("route", "--no-quota", cwd=tmp_path, env={"PRUN_POLICY": ""})
    assert p.returncode == 0
    assert "executor=session" in p.stdout and "Sonnet's share (1) by policy" in p.stdout


@pytest.mark.parametrize("args,words", [
    (["--executor", "codex"], "codex is not a prun executor"),
    (["missing.md"], "missing.md: no such file"),
    (["--policy", "nope.toml"], "policy file not found"),
])
def test_route_command_refusals(tmp_path, args, words):
    p = prun("route", "--no-quota", *args, cwd=tmp_path)
    assert p.returncode == 2 and p.stdout == ""
    assert words in p.stderr and len(p.stderr.strip().splitlines()) == 1


def test_flags_and_files_do_not_mix(tmp_path):
    a = packet(tmp_path, "a.md", "id: a")
    p = prun("route", a, "--session-tools", "--no-quota", cwd=tmp_path)
    assert p.returncode == 2 and "unit flags" in p.stderr


def test_route_command_keeps_a_bounded_unit_waiting_for_its_pool(tmp_path):
    import datetime
    import os

    read = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    with open(os.environ["PRUN_QUOTA_SNAPSHOT"], "w") as f:
        json.dump({"version": 1, "updated_at": read, "groups": {
            "agy-gemini": {"left": 0.0, "resets_at": None, "read_at": read, "source": "probe"}}},
            f)
    g = packet(tmp_path, "g.md", "id: g\ndata:\n  may_go_to: [google]")
    o = packet(tmp_path, "o.md", "id: o")
    p = prun("route", g, o, cwd=tmp_path)
    assert p.returncode == 75, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0].startswith('WAIT g executor=agy model=gemini-3.8-flash-high action=wait '
                               'reason="data may go to google only: ordinary unit: agy-gemini '
                               'reads empty')
    assert lines[1].startswith("ROUTE o executor=session")
    assert lines[2] == "ROUTE-SUMMARY units=2 now=1 wait=1 session=1"


def test_route_command_refuses_a_boundary_no_policy_executor_is_inside(tmp_path):
    g = packet(tmp_path, "g.md", "id: g\ndata:\n  may_go_to: [openai]")
    p = prun("route", g, "--no-quota", cwd=tmp_path)
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.startswith(f"prun: {g}:3: packet g: data may go to openai only, and no "
                               "executor of the routing policy is inside that")
    assert len(p.stderr.strip().splitlines()) == 1


def test_route_command_reads_the_quota_snapshot(tmp_path):
    """The CLI glue: pool health comes from prun.quota.group_states (the snapshot file)."""
    import datetime
    import os

    now = datetime.datetime.now(datetime.UTC)
    later = (now + datetime.timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
    read = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    snapshot = {"version": 1, "updated_at": read, "groups": {
        "agy-gemini": {"left": 0.0, "resets_at": later, "read_at": read, "source": "probe"},
        "claude": {"left": 0.4, "resets_at": None, "read_at": read, "source": "probe"}}}
    with open(os.environ["PRUN_QUOTA_SNAPSHOT"], "w") as f:
        json.dump(snapshot, f)
    p = prun("route", "--id", "u", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    first = p.stdout.splitlines()[0]
    assert first.startswith("ROUTE u executor=session model=sonnet action=reroute")
    assert "agy-gemini reads empty (resets" in first and "claude healthy (left 40%)" in first
