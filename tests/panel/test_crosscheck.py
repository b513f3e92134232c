"""The cross-check's grouping and verdicts, and how an answer is read out of a result: pure
functions over plain data (the runs themselves are in test_panel.py)."""

from __future__ import annotations

from prun.panel import contract
from prun.panel.crosscheck import Voice, canonical, cross_check, fields

SCHEMA = {
    "type": "object",
    "properties": {
        "verdict": {"enum": ["yes", "no"]},
        "name": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
        "steps": {"type": "array", "items": {"type": "string"}},
        "score": {"type": "number"},
        "risk": {"type": "object", "properties": {"level": {"type": "string"},
                                                  "why": {"type": "string",
                                                          "x-compare": False}}},
        "notes": {"type": "string", "x-compare": False},
        "extra": {"type": "string"},
    },
}


def _by_name(voices):
    return {f.name: f for f in cross_check(SCHEMA, voices, ["claude", "gemini", "agy"])}


def test_fields_follow_nested_properties_and_skip_what_is_not_compared():
    assert [".".join(p) for p, _ in fields(SCHEMA)] == [
        "verdict", "name", "tags", "steps", "score", "risk.level", "extra"]
    assert [p for p, _ in fields({"type": "array"})] == [()]   # the whole answer: "$"


def test_values_are_normalised_before_they_are_compared():
    assert canonical("  Yes ") == canonical("yes")
    assert canonical(2.0) == canonical(2) and canonical(True) != canonical(1)
    tags = SCHEMA["properties"]["tags"]
    assert canonical(["b", "A"], tags) == canonical(["a", "b"], tags)        # a set
    steps = SCHEMA["properties"]["steps"]
    assert canonical(["b", "a"], steps) != canonical(["a", "b"], steps)      # a list
    assert canonical({"b": 1, "a": "X"}) == canonical({"a": "x", "b": 1.0})


def test_verdicts_agree_disagree_split_and_missing():
    a = {"verdict": "yes", "name": "Alpha", "tags": ["x", "y"], "steps": ["1", "2"],
         "score": 1, "risk": {"level": "low", "why": "one"}}
    voices = [
        Voice("panel-claude-1", "claude", a, True),
        Voice("panel-claude-2", "claude", {**a, "name": "alpha ", "score": 2}, True),
        Voice("panel-gemini-1", "gemini", {**a, "tags": ["y", "x"], "steps": ["2", "1"],
                                           "risk": {"level": "high", "why": "two"}}, True),
        Voice("panel-agy-1", "agy", None, False),   # invalid: not compared
    ]
    checks = _by_name(voices)
    verdict = checks["verdict"]
    assert verdict.verdict == "agree" and verdict.answers == {"claude": 2, "gemini": 1, "agy": 0}
    assert verdict.line() == 'FIELD verdict agree value="yes" claude=2/2 gemini=1/1'
    assert checks["name"].verdict == "agree" and checks["tags"].verdict == "agree"
    assert checks["steps"].line() == 'FIELD steps disagree claude=["1","2"]x2 gemini=["2","1"]x1'
    assert checks["score"].split == ["claude"]
    assert checks["score"].line() == 'FIELD score split-within split=claude claude=1x1,2x1 gemini=1x1'
    level = checks["risk.level"]
    assert level.verdict == "disagree"
    assert [(g.value, g.panelists) for g in level.groups] == [
        ("low", ["panel-claude-1", "panel-claude-2"]), ("high", ["panel-gemini-1"])]
    assert checks["extra"].verdict == "missing" and checks["extra"].line() == "FIELD extra missing"


def test_a_field_some_valid_answers_lack_is_not_agreed():
    voices = [Voice("panel-claude-1", "claude", {"verdict": "yes", "name": "two words"}, True),
              Voice("panel-gemini-1", "gemini", {"verdict": "yes"}, True)]
    name = _by_name(voices)["name"]
    assert name.verdict == "disagree"
    assert name.line() == 'FIELD name disagree claude="two\\u0020words"x1 gemini=(absent)x1'
    assert name.to_json()["groups"][1] == {"value": None, "absent": True,
                                           "panelists": ["panel-gemini-1"],
                                           "families": {"gemini": 1}}


def test_the_answer_is_the_last_json_block_else_the_whole_result():
    text = ("Draft:\n```json\n{\"a\": 1}\n```\nFinal:\n````json\n{\"a\": 2}\n````\n"
            "```python\nprint(1)\n```\n")
    assert contract.extract(text) == (True, {"a": 2}, "")
    assert contract.extract('  {"a": 3}\n') == (True, {"a": 3}, "")
    found, _, why = contract.extract("```json\n{\"a\": \n```")
    assert not found and why.startswith("the last ```json block is not valid JSON")
    assert contract.extract("no answer")[0] is False
    judged = contract.judge("```json\n{\"verdict\": \"maybe\"}\n```", SCHEMA)
    assert judged.found and not judged.valid
    assert judged.errors == ["$.verdict: 'maybe' is not one of ['yes', 'no']"]
    assert not contract.judge("", SCHEMA).found


def test_the_follow_up_names_the_errors_and_asks_for_json_only():
    text = contract.fix_prompt([f"$.e{i}: wrong" for i in range(12)])
    assert "- $.e0: wrong" in text and "- $.e9: wrong" in text and "$.e10" not in text
    assert "... and 2 more" in text and "corrected answer only" in text
