"""The executor registry: built-ins declared as entry points, cheap lookups, refusals, and the
queries routing and quota read (roles, pools, quota groups) answered by the executors' flags."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from importlib.metadata import distribution
from pathlib import Path

import pytest

from prun import executors
from prun.errors import UsageError
from prun.executors.base import ORDINARY, SONNET
from prun.plan import routing

PYPROJECT = Path(__file__).parents[2] / "pyproject.toml"


def test_builtin_is_what_pyproject_declares():
    declared = tomllib.loads(PYPROJECT.read_text())["project"]["entry-points"][executors.GROUP]
    assert list(declared.items()) == list(executors.BUILTIN.items())


def test_the_installed_metadata_registers_the_builtins():
    eps = {ep.name: ep.value for ep in distribution("prun-agents").entry_points
           if ep.group == executors.GROUP}
    assert eps == executors.BUILTIN, "stale metadata: run pip install -e . again"


def test_names_get_and_all():
    assert executors.names() == ["agy", "claude", "command", "gemini", "session"]
    assert [ex.name for ex in executors.all()] == list(executors.BUILTIN)
    assert executors.get("agy").name == "agy" and executors.known("session")
    assert type(executors.get("claude")) is type(executors.get("claude"))  # loaded once
    assert not executors.known("codex") and not executors.known("nonesuch")


def test_codex_and_unknown_names_are_refused():
    with pytest.raises(UsageError) as e:
        executors.get("codex")
    assert e.value.line() == ("codex is not a prun executor: its quota is reserved for the /vet "
                              "reviewer role (route the unit to agy, claude, gemini, session or "
                              "command)")
    with pytest.raises(UsageError) as e:
        executors.get("nonesuch")
    assert e.value.message == "unknown executor 'nonesuch'"
    assert e.value.hint == "choose one of agy, claude, command, gemini, session"


def test_a_builtin_lookup_imports_its_own_module_and_no_metadata():
    code = ("import sys; from prun import executors; executors.get('command'); "
            "print(sorted(m for m in sys.modules if m.startswith('prun.executors.') "
            "or m == 'importlib.metadata'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ("['prun.executors.base', 'prun.executors.command', "
                                  "'prun.executors.settings']")


def test_routing_and_quota_read_the_flags():
    assert routing.members(ORDINARY) == ("agy", "gemini")
    assert routing.members(SONNET) == ("session", "claude")   # the in-session one first
    assert routing.pools() == ("agy", "gemini", "sonnet")
    assert executors.quota_groups() == ("claude", "agy-gemini", "agy-claude-gpt", "gemini")
    assert [n for n in executors.names() if routing.takes_session_tools(executors.get(n))] == \
        ["claude", "session"]
    assert [n for n in executors.names() if executors.get(n).takes_command] == ["command"]
    agy = executors.get("agy")
    assert agy.quota_groups() == ("agy-gemini", "agy-claude-gpt")
    assert dict(agy.model_fallback) == {"agy-claude-gpt": "agy-gemini"}
    assert executors.get("command").gate(None, {}) is None   # no gate by default


def test_the_schemas_take_any_name_and_describe_the_builtins():
    import json
    from importlib.resources import files

    for name, places in (("packet", 1), ("plan", 2)):   # plan: its packets and its defaults
        text = files("prun.plan").joinpath(f"schemas/{name}.schema.json").read_text()
        specs = list(_executor_specs(json.loads(text)))
        assert len(specs) == places
        for spec in specs:
            assert set(spec) == {"type", "pattern", "description"} and spec["type"] == "string"
            described = spec["description"].split("(")[2].split(")")[0].split(", ")
            assert sorted(described) == sorted(executors.BUILTIN)


def _executor_specs(node):
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "executor" and isinstance(value, dict):
                yield value
            else:
                yield from _executor_specs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _executor_specs(value)
