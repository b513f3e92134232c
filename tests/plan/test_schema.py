"""The published JSON Schemas: valid, shipped, in step with each other and with the loader."""

from __future__ import annotations

import dataclasses
import json
from importlib.resources import files

import pytest
import yaml
from jsonschema import Draft202012Validator

from prun.plan import Packet


def shipped(name: str) -> dict:
    return json.loads(files("prun.plan").joinpath(f"schemas/{name}.schema.json").read_text())


@pytest.mark.parametrize("name", ["packet", "plan"])
def test_schema_files_are_valid_json_schemas(name):
    Draft202012Validator.check_schema(shipped(name))


def test_plan_schema_embeds_the_packet_fields():
    packet, plan = shipped("packet"), shipped("plan")
    assert plan["$defs"]["packet"]["properties"] == packet["properties"]
    defaults = plan["properties"]["defaults"]["properties"]
    assert set(defaults) < set(packet["properties"])


def test_every_packet_field_reaches_the_dataclass():
    fields = {f.name for f in dataclasses.fields(Packet)}
    renamed = {"timeout": "timeout_s", "accept_timeout": "accept_timeout_s", "prompt_file": "prompt"}
    for name in shipped("packet")["properties"]:
        assert renamed.get(name, name) in fields, name


def test_issue_field_names_are_in_the_schemas():
    packet = set(shipped("packet")["properties"])
    assert {"id", "kind", "executor", "command", "model", "mode", "owns", "shared", "state",
            "after", "base", "timeout", "data", "requires", "session_tools",
            "subdispatch"} <= packet
    plan = set(shipped("plan")["properties"])
    assert {"packets", "deadline", "cancel_owner", "check", "parallel", "on_event"} <= plan
    data = set(shipped("packet")["properties"]["data"]["properties"])
    assert data == {"reachable", "may_go_to", "prohibited", "retention"}


GOOD_PLAN = """
    deadline: 90m
    parallel: 4
    packets:
      - packets/*.md
      - {id: a, kind: code, owns: [src/**], prompt: do it, timeout: 600}
"""


def test_a_plain_validator_accepts_a_good_plan_and_rejects_a_bad_one():
    """Editors and CI tools use the schema file alone, without prun."""
    v = Draft202012Validator(shipped("plan"))
    good = yaml.safe_load(GOOD_PLAN)
    assert list(v.iter_errors(good)) == []
    for bad in ({"packets": [{"id": "a"}]},                               # no prompt
                {"packets": [{"id": "a", "prompt": "x", "kind": "rw"}]},  # bad kind
                {"packets": ["x.md"], "paralel": 2},                      # unknown key
                {"packets": [{"id": "a", "prompt": "x", "owns": ["!src"]}]}):
        assert list(v.iter_errors(bad)), bad


# The compiled check (fastjsonschema) passes valid documents; jsonschema explains the rest.
# It must never pass a document jsonschema refuses.

BAD_PACKET_VALUES = {
    "id": ["", "a..b", "-x", 7, None], "kind": ["write", 1], "executor": [7, "", "a b", "/bin/x"],
    "command": [[], "", 3, [1]], "model": [5], "mode": ["yolo"], "owns": ["src/**", [""], [1]],
    "shared": [{"a": 1}, []], "state": [["port"], "db:x"], "after": ["a", [1]],
    "base": [1], "timeout": ["soon", -1, True], "data": [{"reachable": 1}, {"x": []}],
    "requires": ["Summary", [1]], "session_tools": ["yes"], "subdispatch": [1],
    "unknown_field": ["x"],
}


def _mutations():
    good = {"id": "a", "kind": "code", "owns": ["src/**"], "prompt": "do it"}
    for field, values in BAD_PACKET_VALUES.items():
        for value in values:
            yield field, value, {**good, field: value}


@pytest.mark.parametrize("field,value,packet", list(_mutations()))
def test_the_compiled_check_refuses_what_jsonschema_refuses(field, value, packet):
    from prun.plan.validation import _compiled

    plan = {"packets": [packet]}
    assert list(Draft202012Validator(shipped("plan")).iter_errors(plan))
    assert not _compiled("plan")(plan)
    packet_doc = {k: v for k, v in packet.items() if k != "prompt"}
    assert list(Draft202012Validator(shipped("packet")).iter_errors(packet_doc))
    assert not _compiled("packet")(packet_doc)


def test_the_compiled_check_passes_good_documents():
    from prun.plan.validation import _compiled

    assert _compiled("plan")(yaml.safe_load(GOOD_PLAN))


def test_the_compiled_check_is_made_once_per_process_and_kept_in_no_file(tmp_path, monkeypatch):
    import prun.plan.validation as validation

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    validation._compiled.cache_clear()
    try:
        check = validation._compiled("packet")
        assert check({"id": "a"})
        assert not check({"id": "a", "kind": "nope"})
        assert validation._compiled("packet") is check
        assert not any(tmp_path.iterdir())
    finally:
        validation._compiled.cache_clear()
