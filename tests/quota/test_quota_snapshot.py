"""The snapshot file: bad files never crash, groups not reported are unknown, writes are whole."""

from __future__ import annotations

import json
import threading

import pytest
from quota_helpers import entry, iso

from prun import executors, quota
from prun.quota.snapshot import GroupState, load, update

BAD_FILES = {
    "truncated": '{"version": 1, "groups": {"agy-gemini": {"left": 0.0, "rese',
    "empty": "",
    "whitespace": "  \n",
    "not-an-object": "[1, 2, 3]",
    "groups-a-list": '{"version": 1, "groups": []}',
    "future-version": '{"version": 99, "groups": {}}',
    "binary": "\udcff\x00garbage",
}


@pytest.mark.parametrize("name", sorted(BAD_FILES))
def test_unreadable_files_never_crash(q, name):
    if name == "binary":
        q.snapshot.write_bytes(b"\xff\xfe\x00garbage")
    else:
        q.write_raw(BAD_FILES[name])
    snap = load(str(q.snapshot))
    assert snap.problem
    states = quota.group_states(known=executors.quota_groups())
    assert set(executors.quota_groups()) <= set(states)
    for s in states.values():
        assert not s.known and not s.empty
        assert "unreadable" in s.error


BAD_ENTRIES = {
    "string-for-number": {"left": "0.5"},
    "bool-for-number": {"left": False},
    "negative": {"left": -0.1},
    "over-one": {"left": 1.5},
    "read-at-in-the-future": {"read_at": iso(86400 * 365)},
    "reset-not-a-time": {"resets_at": "tomorrow"},
    "reset-a-number": {"resets_at": 1700000000},
    "source-a-list": {"source": ["probe"]},
    "estimated-a-string": {"reset_estimated": "yes"},
}


@pytest.mark.parametrize("name", sorted(BAD_ENTRIES))
def test_mistyped_entry_makes_only_that_group_unknown(q, name):
    bad = entry(0.0)
    bad.update(BAD_ENTRIES[name])
    q.write_snapshot({"agy-gemini": bad, "claude": entry(0.0)})
    states = quota.group_states(known=executors.quota_groups())
    assert not states["agy-gemini"].known and not states["agy-gemini"].empty
    assert states["agy-gemini"].error.startswith("bad snapshot entry")
    assert states["claude"].empty  # the good entry still counts


def test_entry_not_an_object(q):
    q.write_snapshot({"agy-gemini": "empty"})
    assert not quota.group_states(known=executors.quota_groups())["agy-gemini"].known


def test_group_not_reported_is_unknown_never_empty(q):
    q.write_snapshot({"claude": entry(0.3)})
    states = quota.group_states(known=executors.quota_groups())
    assert states["claude"].known and not states["claude"].empty
    for g in ("agy-gemini", "agy-claude-gpt", "gemini"):
        assert not states[g].known and not states[g].empty and states[g].error is None


def test_missing_snapshot_is_unknown_without_error(q):
    states = quota.group_states(known=executors.quota_groups())
    assert all(not s.known and s.error is None for s in states.values())


def test_empty_means_nothing_left_and_reset_not_yet_past():
    assert GroupState("g", 0.0, iso(60), iso()).empty
    assert GroupState("g", 0.0, None, iso()).empty
    assert not GroupState("g", 0.0, iso(-60), iso()).empty  # the reset has passed
    assert not GroupState("g", 0.01, iso(60), iso()).empty
    assert not GroupState("g", None, iso(60), iso()).empty
    assert GroupState("g", 0.5).known and not GroupState("g").known


def test_extra_groups_in_snapshot_are_listed(q):
    q.write_snapshot({"team-pool": entry(0.9)})
    assert quota.group_states(known=executors.quota_groups())["team-pool"].left == 0.9


def test_record_hit_writes_empty_with_reset(q):
    quota.record_hit("agy-claude-gpt", "2030-01-01T00:00:00+00:00",
                              "Individual quota reached. Resets in 34m.", env=None)
    data = q.read_snapshot()
    g = data["groups"]["agy-claude-gpt"]
    assert g["left"] == 0.0 and g["source"] == "hit"
    assert g["resets_at"] == "2030-01-01T00:00:00Z"
    assert "reset_estimated" not in g
    assert quota.group_states(known=executors.quota_groups())["agy-claude-gpt"].empty


def test_record_hit_without_reset_time_is_estimated(q):
    q.set("hit_reset", "10m")
    quota.record_hit("claude", None, "usage limit reached", env=None)
    s = quota.group_states(known=executors.quota_groups())["claude"]
    assert s.empty and s.reset_estimated
    assert s.resets_at[:16] in (iso(600)[:16], iso(599)[:16])


def test_record_hit_keeps_other_groups_and_repairs_bad_file(q):
    q.write_snapshot({"claude": entry(0.4), "agy-gemini": {"left": "x"}})
    quota.record_hit("gemini", None, "daily quota", env=None)
    groups = q.read_snapshot()["groups"]
    assert groups["claude"]["left"] == 0.4
    assert groups["gemini"]["left"] == 0.0
    assert "agy-gemini" not in groups  # the unreadable entry was dropped, not kept as garbage


def test_record_hit_over_truncated_file(q):
    q.write_raw('{"groups": {')
    quota.record_hit("agy-gemini", None, "quota", env=None)
    assert q.read_snapshot()["groups"]["agy-gemini"]["left"] == 0.0


def test_record_hit_never_raises(q, capsys):
    q.snapshot.mkdir()  # the snapshot path is a directory: the write must fail
    quota.record_hit("agy-gemini", None, "quota", env=None)
    err = capsys.readouterr().err
    assert err.startswith("prun: warning: could not record") and err.count("\n") == 1


def test_concurrent_updates_lose_nothing(q):
    groups = [f"pool-{i}" for i in range(16)]

    def one(g):
        update(str(q.snapshot), lambda d: d.__setitem__(g, GroupState(g, 0.5, None, iso())))

    threads = [threading.Thread(target=one, args=(g,)) for g in groups]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert set(q.read_snapshot()["groups"]) == set(groups)


def test_written_snapshot_matches_schema(q):
    quota.record_hit("agy-gemini", None, "quota", env=None)
    data = json.loads(q.snapshot.read_text())
    assert data["version"] == 1 and data["updated_at"].endswith("Z")
    assert set(data["groups"]["agy-gemini"]) >= {"left", "resets_at", "read_at", "source",
                                                 "error"}
