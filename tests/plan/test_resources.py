"""A packet's ``resources`` (memory, pids, cpus), the plan's ``resources`` its default, and
``parallel: auto``: loaded, checked at their line, frozen and read back."""

from __future__ import annotations

import pytest

from prun.errors import UsageError
from prun.plan import load_plan
from prun.plan.model import Resources
from prun.run.freeze import packet_from_spec, packet_spec

PLAN = """\
parallel: auto
resources: {memory: 1G, pids: 64}
packets:
  - {id: a, executor: command, command: "true", prompt: a}
  - id: b
    executor: command
    command: "true"
    prompt: b
    resources: {memory: 512M, cpus: 1.5}
"""


def test_a_packets_own_resources_win_over_the_plans_key_by_key(tmp_path):
    (tmp_path / "plan.yaml").write_text(PLAN)
    plan = load_plan(tmp_path / "plan.yaml")
    assert plan.parallel == "auto"
    a, b = plan.packets
    assert a.resources == Resources(memory=1 << 30, pids=64)
    assert b.resources == Resources(memory=512 << 20, pids=64, cpus=1.5)
    assert packet_from_spec(packet_spec(b)).resources == b.resources
    assert not Resources()


@pytest.mark.parametrize(("field", "said"), [("{memory: lots}", "resources.memory"),
                                             ("{pids: 0}", "pids"),
                                             ("{cpus: 0}", "cpus"),
                                             ("{disk: 1G}", "disk")])
def test_bad_resources_are_refused_at_their_line(tmp_path, field, said):
    (tmp_path / "plan.yaml").write_text(
        f"packets:\n  - id: a\n    executor: command\n    command: 'true'\n    prompt: a\n"
        f"    resources: {field}\n")
    with pytest.raises(UsageError, match=said) as e:
        load_plan(tmp_path / "plan.yaml")
    assert "plan.yaml:" in e.value.line()
