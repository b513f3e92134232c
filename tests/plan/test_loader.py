"""Loading packet files and plans: front matter, globs, inline packets, defaults, errors."""

from __future__ import annotations

import pytest

from prun.errors import UsageError
from prun.plan import DataBoundary, load_packet, load_plan


def refused(fn, *args) -> UsageError:
    with pytest.raises(UsageError) as info:
        fn(*args)
    return info.value


def test_packet_file_front_matter_and_body(write):
    path = write("a.md", """
        ---
        id: fix-parser
        kind: code
        executor: agy
        model: gemini-3.8-flash-high
        owns: [src/parser/**, tests/parser/**]
        shared: {pyproject.toml: fix-parser}
        state: [port:8080, db:orders]
        timeout: 45m
        data:
          reachable: [repository]
          may_go_to: agy
          prohibited: [credentials]
          retention: deleted after integration
        requires: [Summary, Verification]
        ---
        Fix the parser.

        Second paragraph.
        """)
    p = load_packet(path)
    assert p.id == "fix-parser"
    assert p.kind == "code" and p.writes_code
    assert p.executor == "agy" and p.model == "gemini-3.8-flash-high"
    assert p.owns == ("src/parser/**", "tests/parser/**")
    assert p.shared == {"pyproject.toml": "fix-parser"}
    assert p.state == ("port:8080", "db:orders")
    assert p.timeout_s == 2700
    assert p.data == DataBoundary(reachable=("repository",), may_go_to=("agy",),
                                  prohibited=("credentials",),
                                  retention="deleted after integration")
    assert p.data.retention_rule.rule == "note"     # outside the grammar: a note for people
    assert p.requires == ("Summary", "Verification")
    assert p.prompt == "Fix the parser.\n\nSecond paragraph.\n"
    assert p.source == str(path) and p.line == 2
    assert p.where("owns") == f"{path}:6"


def test_packet_defaults_follow_kind(write):
    ro = load_packet(write("r.md", "---\nid: r\n---\nlook\n"))
    assert (ro.kind, ro.executor, ro.mode, ro.effective_mode) == (
        "read-only", "auto", None, "accept-edits")
    assert not ro.subdispatch and not ro.session_tools and ro.timeout_s is None
    cmd = load_packet(write("c.md", "---\nid: c\ncommand: [echo, hi]\n---\nx\n"))
    assert cmd.executor == "command" and cmd.command == ("echo", "hi")
    plan_mode = load_packet(write("p.md", "---\nid: p\nmode: plan\n---\nx\n"))
    assert plan_mode.effective_mode == "plan"


def test_timeout_in_seconds(write):
    assert load_packet(write("t.md", "---\nid: t\ntimeout: 90\n---\nx\n")).timeout_s == 90
    assert load_packet(write("u.md", "---\nid: u\ntimeout: 1h30m\n---\nx\n")).timeout_s == 5400


def test_plan_with_globs_paths_and_inline_packets(write, tmp_path):
    write("packets/b.md", "---\nid: b\n---\nprompt b\n")
    write("packets/a.md", "---\nid: a\nkind: code\nowns: [src/a/**]\n---\nprompt a\n")
    write("more/c.md", "---\nid: c\n---\nprompt c\n")
    write("prompts/d.txt", "prompt d from a file\n")
    plan_path = write("plan.yaml", """
        name: demo
        deadline: 2h
        cancel_owner: alice
        parallel: 8
        check: [pytest, -q]
        on_event: notify-send prun
        setup: pip install -e .
        base: main
        packets:
          - packets/*.md
          - more/c.md
          - id: d
            after: [a]
            prompt_file: prompts/d.txt
          - id: e
            prompt: |
              inline prompt
        """)
    plan = load_plan(plan_path)
    assert plan.ids == ("a", "b", "c", "d", "e")
    assert plan.name == "demo" and plan.deadline == "2h" and plan.cancel_owner == "alice"
    assert plan.parallel == 8 and plan.check == "pytest -q"
    assert plan.on_event == "notify-send prun" and plan.setup == "pip install -e ."
    assert plan.path == str(plan_path.resolve()) and plan.root == tmp_path
    assert plan.packet("d").prompt == "prompt d from a file\n"
    assert plan.packet("d").after == ("a",)
    assert plan.packet("e").prompt == "inline prompt\n"
    assert plan.base_of(plan.packet("a")) == "main"
    assert plan.packet("a").source.endswith("packets/a.md")


def test_plan_defaults_apply_unless_a_packet_sets_the_field(write):
    write("p/x.md", "---\nid: x\n---\nx\n")
    plan = load_plan(write("plan.yaml", """
        defaults: {executor: claude, timeout: 10m, requires: [Summary]}
        packets:
          - p/x.md
          - {id: y, executor: agy, prompt: y}
        """))
    assert plan.packet("x").executor == "claude" and plan.packet("x").timeout_s == 600
    assert plan.packet("y").executor == "agy" and plan.packet("y").requires == ("Summary",)


def test_followup_auto_from_the_defaults_and_followup_max_at_least_one(write):
    plan = load_plan(write("plan.yaml", """
        defaults: {followup: auto}
        packets:
          - {id: x, prompt: x, followup_max: 3}
          - {id: y, prompt: y, followup: "off"}
        """))
    assert plan.packet("x").auto_followup and plan.packet("x").followup_max == 3
    assert not plan.packet("y").auto_followup and plan.packet("y").followup_max == 1
    e = refused(load_plan, write("bad.yaml", "packets: [{id: z, prompt: z, followup_max: 0}]\n"))
    assert "followup_max" in e.message


def test_plan_folder_entry_loads_its_md_files(write):
    write("units/one.md", "---\nid: one\n---\nx\n")
    write("units/two.md", "---\nid: two\n---\nx\n")
    assert load_plan(write("plan.yaml", "packets: [units]\n")).ids == ("one", "two")


def test_iso_deadline_read_by_yaml_as_a_time(write):
    plan = load_plan(write("plan.yaml", """
        deadline: 2026-12-01T18:00:00+00:00
        packets: [{id: a, prompt: x}]
        """))
    assert plan.deadline.startswith("2026-12-01T18:00:00")


# --- errors name the file and the line, and say how to fix -----------------------------------

def test_unknown_field_names_line_and_suggests(write):
    path = write("plan.yaml", """
        packets:
          - id: a
            prompt: x
          - id: b
            prompt: y
            onws: [src/**]
        """)
    e = refused(load_plan, path)
    assert e.message.startswith(f"{path}:6: packets[1]: unknown field 'onws'")
    assert "owns" in e.hint


def test_bad_enum_names_line_and_choices(write):
    path = write("a.md", "---\nid: a\n\nkind: writer\n---\nx\n")
    e = refused(load_packet, path)
    assert e.message.startswith(f"{path}:4: kind:")
    assert "read-only" in e.hint and "code" in e.hint


def test_yaml_syntax_error_names_line(write):
    path = write("plan.yaml", "packets:\n  - id: a\n    prompt: [unclosed\n  - id: b\n")
    e = refused(load_plan, path)
    assert e.message.startswith(f"{path}:4: bad YAML")


def test_yaml_error_in_front_matter_counts_the_opening_line(write):
    path = write("a.md", "---\nid: a\nowns: [src/**\n---\nx\n")
    e = refused(load_packet, path)
    assert e.message.startswith(f"{path}:4: bad YAML")
    assert "opened at line 3" in e.message


def test_duplicate_yaml_key(write):
    path = write("a.md", "---\nid: a\nkind: code\nkind: read-only\n---\nx\n")
    e = refused(load_packet, path)
    assert e.message.startswith(f"{path}:4: duplicate key 'kind' (first at line 3)")


def test_number_where_a_string_is_needed(write):
    path = write("a.md", "---\nid: a\nstate: [8080]\n---\nx\n")
    e = refused(load_packet, path)
    assert e.message.startswith(f"{path}:3: state[0]: 8080 is not a string")


def test_bad_timeout(write):
    e = refused(load_packet, write("a.md", "---\nid: a\ntimeout: soon\n---\nx\n"))
    assert ":3: timeout" in e.message and "45m" in e.hint


def test_missing_front_matter_or_prompt(write):
    e = refused(load_packet, write("a.md", "Just a prompt\n"))
    assert e.message.endswith("a.md:1: a packet file starts with a '---' line (its front matter)")
    e = refused(load_packet, write("b.md", "---\nid: b\nno end\n"))
    assert "not closed" in e.message
    e = refused(load_packet, write("c.md", "---\nid: c\n---\n\n  \n"))
    assert "has no prompt" in e.message
    e = refused(load_packet, write("d.md", "---\nid: d\nprompt: hi\n---\nbody\n"))
    assert "both the body and prompt" in e.message


def test_inline_packet_without_prompt(write):
    path = write("plan.yaml", "packets:\n  - id: a\n    kind: code\n")
    e = refused(load_plan, path)
    assert e.message == f"{path}:2: packets[0]: needs prompt or prompt_file"


def test_bad_id(write):
    e = refused(load_packet, write("a.md", "---\nid: ../etc\n---\nx\n"))
    assert ":2: id:" in e.message and "letters, digits" in e.hint


def test_duplicate_ids_name_both_places(write):
    write("p/a.md", "---\nid: a\n---\nx\n")
    path = write("plan.yaml", "packets:\n  - p/a.md\n  - id: a\n    prompt: y\n")
    e = refused(load_plan, path)
    assert e.message.startswith(f"{path}:3: duplicate packet id 'a' (also at ")
    assert "p/a.md:2" in e.message


def test_after_unknown_packet(write):
    path = write("plan.yaml", """
        packets:
          - {id: build, prompt: x}
          - id: test
            prompt: y
            after: [biuld]
        """)
    e = refused(load_plan, path)
    assert e.message == f"{path}:5: packet 'test' comes after unknown packet 'biuld'"
    assert "build" in e.hint


def test_after_cycle(write):
    path = write("plan.yaml", """
        packets:
          - {id: a, prompt: x, after: [c]}
          - {id: b, prompt: x, after: [a]}
          - {id: c, prompt: x, after: [b]}
          - {id: d, prompt: x, after: [a]}
        """)
    e = refused(load_plan, path)
    assert "the after lists form a cycle: a -> c -> b -> a" in e.message
    assert "sequence" in e.hint


def test_after_cycle_is_named_from_its_smallest_id_at_its_line(write):
    path = write("plan.yaml", """
        packets:
          - {id: a, prompt: x, after: [z]}
          - {id: z, prompt: x, after: [y]}
          - {id: y, prompt: x, after: [z]}
        """)
    e = refused(load_plan, path)
    assert e.message == f"{path}:4: the after lists form a cycle: y -> z -> y"


def test_a_long_after_cycle_is_found(write):
    n = 3000
    rows = "".join(f"  - {{id: p{i}, prompt: x, after: [p{(i + 1) % n}]}}\n" for i in range(n))
    e = refused(load_plan, write("plan.yaml", "packets:\n" + rows))
    assert "the after lists form a cycle: p0 -> p1 -> p2 -> " in e.message
    assert e.message.endswith(f"p{n - 1} -> p0")


def test_after_itself(write):
    e = refused(load_plan, write("plan.yaml", "packets:\n  - {id: a, prompt: x, after: [a]}\n"))
    assert "comes after itself" in e.message


def test_unknown_shared_owner(write):
    path = write("plan.yaml", """
        packets:
          - id: a
            prompt: x
            shared:
              pyproject.toml: nobody
        """)
    e = refused(load_plan, path)
    assert e.message.startswith(f"{path}:4: packet 'a' names unknown packet 'nobody'")


def test_packet_glob_matching_nothing(write):
    path = write("plan.yaml", "packets:\n  - id: a\n    prompt: x\n  - missing/*.md\n")
    e = refused(load_plan, path)
    assert e.message.startswith(f"{path}:4: 'missing/*.md' matches no packet file")


def test_missing_packet_file_and_prompt_file(write):
    path = write("plan.yaml", "packets:\n  - nothere.md\n")
    assert refused(load_plan, path).message.startswith(f"{path}:2: packet file 'nothere.md'")
    path = write("plan2.yaml", "packets:\n  - id: a\n    prompt_file: gone.txt\n")
    assert refused(load_plan, path).message.startswith(f"{path}:3: prompt_file 'gone.txt'")


def test_error_inside_a_packet_file_names_that_file(write):
    bad = write("p/bad.md", "---\nid: bad\nexecutor: codx\n---\nx\n")
    e = refused(load_plan, write("plan.yaml", "packets: [p/*.md]\n"))
    assert e.message.startswith(f"{bad}:3: executor: unknown executor 'codx'")
    assert e.hint == "choose one of auto, agy, claude, command, gemini, session"


def test_an_unknown_executor_gets_a_did_you_mean(write):
    e = refused(load_packet, write("a.md", "---\nid: a\nkind: read-only\nexecutor: gemeni\n"
                                   "---\nx\n"))
    assert e.message.endswith(":4: executor: unknown executor 'gemeni'")
    assert e.hint == "did you mean 'gemini'?"
    e = refused(load_plan, write("plan.yaml", "defaults: {executor: claud}\npackets:\n"
                                 "  - {id: a, prompt: x}\n"))
    assert e.message.endswith("plan.yaml:1: defaults.executor: unknown executor 'claud'")
    assert e.hint == "did you mean 'claude'?"
    e = refused(load_plan, write("p2.yaml", "packets:\n  - {id: a, prompt: x}\n"
                                 "  - {id: b, executor: Agy, prompt: x}\n"))
    assert e.message.endswith("p2.yaml:3: packets[1].executor: unknown executor 'Agy'")
    assert e.hint == "did you mean 'agy'?"


def test_plan_must_be_a_mapping_with_packets(write):
    e = refused(load_plan, write("plan.yaml", "- a\n- b\n"))
    assert "plan.yaml:1:" in e.message
    e = refused(load_plan, write("p2.yaml", "name: x\n"))
    assert "missing required field 'packets'" in e.message
    e = refused(load_plan, write("p3.yaml", "packets: []\n"))
    assert "p3.yaml:1: packets: must not be empty" in e.message


def test_command_unit_needs_a_command(write):
    e = refused(load_plan, write("plan.yaml", "packets:\n  - {id: a, executor: command, "
                                 "prompt: x}\n"))
    assert "executor: command but no command" in e.message


def test_bad_deadline(write):
    e = refused(load_plan, write("plan.yaml", "deadline: whenever\npackets: [{id: a, "
                                 "prompt: x}]\n"))
    assert e.message.endswith("plan.yaml:1: bad deadline 'whenever'")


def test_missing_file():
    e = refused(load_plan, "/nonexistent/plan.yaml")
    assert "no such file" in e.message


def test_codex_is_refused_with_a_reason(write):
    e = refused(load_packet, write("a.md", "---\nid: a\nexecutor: codex\n---\nx\n"))
    assert e.message.endswith(":3: executor: codex is not a prun executor: its quota is "
                              "reserved for the /vet reviewer role")
    assert e.hint == "route the unit to agy, claude, gemini, session or command"
    e = refused(load_plan, write("plan.yaml", "defaults: {executor: codex}\npackets:\n"
                                 "  - {id: a, prompt: x}\n"))
    assert "plan.yaml:1: defaults.executor: codex is not a prun executor" in e.message


def test_session_tools_need_a_session_unit(write):
    e = refused(load_packet, write("a.md", "---\nid: a\nexecutor: agy\nsession_tools: true\n"
                                   "---\nx\n"))
    assert ":4: packet 'a' needs session tools but runs on 'agy'" in e.message
    assert "cannot reach them" in e.message and "executor: session" in e.hint


def test_a_plans_deadline_is_kept_as_written_and_read_as_a_time_once(write):
    from prun._util.timeparse import deadline_at

    plan = load_plan(write("plan.yaml", "deadline: 90m\npackets: [{id: a, prompt: x}]\n"))
    assert plan.deadline == "90m" and deadline_at(plan.deadline, 1000.0) == 1000.0 + 5400
    plan = load_plan(write("p2.yaml", "deadline: '2026-12-01T18:00:00Z'\n"
                           "packets: [{id: a, prompt: x}]\n"))
    assert deadline_at(plan.deadline, 0) == 1796148000.0
    assert load_plan(write("p3.yaml", "packets: [{id: a, prompt: x}]\n")).deadline is None


def test_a_commit_id_that_yaml_reads_as_a_number_must_be_quoted(write):
    e = refused(load_packet, write("a.md", "---\nid: a\nbase: 1234567\n---\nx\n"))
    assert e.message.endswith("a.md:3: base: 1234567 is not a string")
    assert "quote it" in e.hint
    assert load_packet(write("b.md", "---\nid: b\nbase: '0123456'\n---\nx\n")).base == "0123456"
