"""prun gather: the seed's lines and exit codes, published results at once, the stable window
for everything else, no start-up race, many files, the polling fallback."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
from pathlib import Path

import pytest
from watchkit import age, publish

from helpers import prun
from prun._util.fsutil import publish_new
from prun.attempt import result_index as published
from prun.watch.gather import LandingRule


def test_published_results_land_at_once_with_the_seed_lines(tmp_path):
    sd = tmp_path / "state-dir"
    sd.mkdir()
    a, b = tmp_path / "a.md", tmp_path / "b.md"
    publish(a, sd)
    publish(b, sd)
    # A one-hour stable window: only the published-results index can make these land.
    r = prun("gather", str(a), str(b), "--stable-window", "1h", "--timeout", "60")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["GATHER-START count=2 timeout=60s", f"DONE {a}", f"DONE {b}"]


def test_relative_paths_are_printed_absolute(tmp_path):
    (tmp_path / "r.md").write_text("# done\n")
    age(tmp_path / "r.md", 3600)
    r = prun("gather", "r.md", "--timeout", "30", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[1] == f"DONE {tmp_path / 'r.md'}"


def test_a_file_already_complete_when_gather_starts_counts(tmp_path):
    done = tmp_path / "old.md"
    done.write_text("# written by a worker an hour ago\n")
    age(done, 3600)
    r = prun("gather", str(done))  # default window (10 s) and timeout
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["GATHER-START count=1 timeout=3600s", f"DONE {done}"]


def test_a_fresh_worker_written_file_waits_for_the_stable_window(tmp_path):
    fresh = tmp_path / "fresh.md"
    fresh.write_text("# still being written, maybe\n")
    r = prun("gather", str(fresh), "--stable-window", "1h", "--timeout", "0.5")
    assert r.returncode == 2
    assert r.stdout.splitlines() == ["GATHER-START count=1 timeout=0.5s", "TIMEOUT remaining=1"]


def test_a_worker_written_file_lands_after_a_short_window(tmp_path, background):
    result = tmp_path / "w.md"
    g = background("gather", str(result), "--stable-window", "0.3", "--timeout", "60")
    assert g.readline() == "GATHER-START count=1 timeout=60s"
    result.write_text("# the worker's own result\n")
    code, lines, err = g.finish()
    assert code == 0, err
    assert lines == [f"DONE {result}"]
    assert published.lookup(str(result)) is None  # it landed by the stable-window rule


def test_timeout_names_how_many_remain(tmp_path):
    done = tmp_path / "done.md"
    publish(done, tmp_path)
    r = prun("gather", str(done), str(tmp_path / "missing.md"), str(tmp_path / "empty.md"),
             "--timeout", "0.3")
    assert r.returncode == 2
    assert r.stdout.splitlines() == ["GATHER-START count=3 timeout=0.3s", f"DONE {done}",
                                     "TIMEOUT remaining=2"]


def test_files_that_appear_while_gather_starts(tmp_path, background):
    sd = tmp_path / "sd"
    sd.mkdir()
    paths = [tmp_path / f"r{i:02d}.md" for i in range(40)]
    go = threading.Event()

    def writer():
        go.wait()
        for i, p in enumerate(paths):
            if i % 2:
                publish(p, sd)                       # published by a dispatcher
            else:
                p.write_text("# a worker's result\n")  # needs the (short) window

    t = threading.Thread(target=writer)
    t.start()
    go.set()  # writing starts before gather exists and goes on while it sets up
    g = background("gather", *map(str, paths), "--stable-window", "0.2", "--timeout", "60")
    t.join()
    code, lines, err = g.finish()
    assert code == 0, err
    assert sorted(lines[1:]) == sorted(f"DONE {p}" for p in paths)
    assert len(lines) == 41


def test_a_result_folder_created_after_gather_starts(tmp_path, background):
    result = tmp_path / "later" / "deeper" / "r.md"
    g = background("gather", str(result), "--timeout", "60")
    assert g.readline().startswith("GATHER-START")
    result.parent.mkdir(parents=True)
    publish(result, tmp_path)
    code, lines, err = g.finish()
    assert (code, lines) == (0, [f"DONE {result}"]), err


def test_two_hundred_results_at_once(tmp_path, background):
    sd = tmp_path / "sd"
    sd.mkdir()
    paths = [tmp_path / "out" / f"unit-{i:03d}.md" for i in range(200)]
    paths[0].parent.mkdir()
    g = background("gather", *map(str, paths), "--stable-window", "1h", "--timeout", "120")
    assert g.readline() == "GATHER-START count=200 timeout=120s"
    for p in paths:
        publish(p, sd)
    code, lines, err = g.finish()
    assert code == 0, err
    assert sorted(lines) == sorted(f"DONE {p}" for p in paths)


@pytest.mark.parametrize("how", ["env", "option"])
def test_polling_fallback(tmp_path, background, how):
    result = tmp_path / "polled.md"
    env = {"PRUN_WATCH_POLL_INTERVAL": "0.05"}
    args = ["gather", str(result), "--stable-window", "1h", "--timeout", "60"]
    if how == "env":
        env["PRUN_WATCH"] = "poll"
    else:
        args.append("--poll")
    g = background(*args, env=env)
    assert g.readline().startswith("GATHER-START")
    publish(result, tmp_path)
    code, lines, err = g.finish()
    assert (code, lines) == (0, [f"DONE {result}"]), err


def test_bad_watch_mode_is_refused_in_one_line(tmp_path):
    r = prun("gather", str(tmp_path / "x.md"), env={"PRUN_WATCH": "telepathy"})
    assert r.returncode == 2
    assert r.stdout == ""
    assert len(r.stderr.strip().splitlines()) == 1 and "PRUN_WATCH" in r.stderr


def test_bad_duration_is_refused(tmp_path):
    r = prun("gather", str(tmp_path / "x.md"), "--timeout", "soon")
    assert r.returncode == 2 and "--timeout" in r.stderr


def test_an_edited_published_file_is_no_longer_trusted(tmp_path):
    result = tmp_path / "r.md"
    publish(result, tmp_path)
    rule = LandingRule(3600)
    assert rule.check(str(result)).status == "published"
    with open(result, "a") as f:
        f.write("edited by someone afterwards\n")
    assert published.lookup(str(result)) is None
    assert rule.check(str(result)).status == "changed"   # written again: never trusted


def test_a_reused_result_path_is_not_trusted(tmp_path):
    """An entry from an earlier unit at the same path does not make a new file published."""
    result = tmp_path / "r.md"
    publish(result, tmp_path / "old-sd")
    os.unlink(result)
    assert publish_new(result, "# a new worker's partial result\n")
    assert published.lookup(str(result)) is None


def test_record_refuses_missing_and_empty_files(tmp_path):
    assert not published.record(str(tmp_path / "nope.md"), str(tmp_path))
    (tmp_path / "empty.md").write_text("")
    assert not published.record(str(tmp_path / "empty.md"), str(tmp_path))
    assert not os.path.exists(published.entry_path(str(tmp_path / "empty.md")))


@pytest.mark.parametrize("scenario,how", [("success", "response"),
                                          ("error_status", "fallback"),
                                          ("writes_result", "worker")])
def test_the_dispatcher_records_what_it_published(tmp_path, fake_agy, scenario, how):
    prompt = tmp_path / "prompt.md"
    prompt.write_text("do the thing\n")
    result = tmp_path / "res.md"
    r = prun("dispatch", "--prompt-file", str(prompt), "--result-file", str(result),
             "--unit-id", "pub", env={"FAKE_AGY_SCENARIO": scenario})
    state_dir = r.stdout.split(" ", 1)[1].strip()
    outcome = json.loads((Path(state_dir) / "outcome.json").read_text())
    assert outcome["published"] == how
    entry = published.lookup(str(result))
    assert entry is not None and entry["state_dir"] == state_dir
    # the entry is the unit's outcome.json, linked in: no file of its own
    assert os.path.samefile(published.entry_path(str(result)), Path(state_dir) / "outcome.json")
    g = prun("gather", str(result), "--stable-window", "1h", "--timeout", "30")
    assert g.returncode == 0 and g.stdout.splitlines()[1] == f"DONE {result}"


def test_an_outcome_on_another_file_system_gets_an_entry_file_of_its_own(tmp_path):
    other = Path("/dev/shm")
    if not other.is_dir() or os.stat(other).st_dev == os.stat(tmp_path).st_dev:
        pytest.skip("needs a second file system at /dev/shm")
    result = tmp_path / "r.md"
    result.write_text("a result long enough to count\n")
    outcome = Path(tempfile.mkdtemp(dir=other)) / "outcome.json"
    try:
        outcome.write_text(json.dumps({"result_identity": published.identity(str(result)),
                                       "state_dir": str(tmp_path)}))
        assert published.record(str(result), str(tmp_path), outcome=str(outcome))
        entry = published.entry_path(str(result))
        assert not os.path.samefile(entry, outcome) and os.stat(entry).st_nlink == 1
        assert published.lookup(str(result))["state_dir"] == str(tmp_path)
    finally:
        shutil.rmtree(outcome.parent)



def test_a_folder_is_not_a_result(tmp_path):
    r = prun("gather", str(tmp_path))
    assert r.returncode == 2 and r.stdout == "" and "folder" in r.stderr


def test_the_same_file_twice_counts_once(tmp_path):
    result = tmp_path / "r.md"
    publish(result, tmp_path)
    r = prun("gather", str(result), str(result), "--timeout", "30")
    assert r.stdout.splitlines() == ["GATHER-START count=1 timeout=30s", f"DONE {result}"]


def test_old_index_entries_are_pruned_once_a_day(tmp_path):
    old = tmp_path / "old.md"
    publish(old, tmp_path)
    entry = Path(published.entry_path(str(old)))
    marker = entry.parent / ".pruned"
    age(entry, 8 * 86400)
    age(marker, 2 * 86400)  # the last prune was two days ago
    publish(tmp_path / "new.md", tmp_path)
    assert not entry.exists()
    assert Path(published.entry_path(str(tmp_path / "new.md"))).exists()
    publish(tmp_path / "old2.md", tmp_path)
    entry2 = Path(published.entry_path(str(tmp_path / "old2.md")))
    age(entry2, 8 * 86400)
    publish(tmp_path / "newer.md", tmp_path)
    assert entry2.exists()  # pruned at most once a day
