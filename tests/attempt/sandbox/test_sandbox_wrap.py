"""The bubblewrap sandbox, driven for real: writes into read-only paths, daemons that try to
outlive the unit, exit codes, and what the unit sees of the machine's processes."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from prun._util.process import Worker, end_group, spawn
from prun.attempt import sandbox
from prun.errors import UsageError
from prun.settings import parse_sandbox


def run_in(code: str, *, writable=(), read_only=(), timeout: float = 60, **more):
    """Run Python ``code`` in a sandbox; its output and exit code."""
    argv = sandbox.wrap([sys.executable, "-c", textwrap.dedent(code)],
                        writable=[str(p) for p in writable], read_only=[str(p) for p in read_only],
                        **{k: [str(p) for p in v] if k == "hidden" else v
                           for k, v in more.items()})
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def tree(root: Path) -> dict[str, tuple[int, bytes]]:
    """Every entry under ``root``: its mode and (for a file) its bytes."""
    found = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            p = Path(folder, name)
            found[str(p.relative_to(root))] = (p.lstat().st_mode,
                                               p.read_bytes() if p.is_file() else b"")
    return found


def make_repo(root: Path) -> Path:
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("print('real')\n")
    (root / "README").write_text("the real repository\n")
    return root


ATTEMPTS = """
    import os, pathlib, sys
    root = pathlib.Path(sys.argv[1])
    tries = {
        "overwrite": lambda: (root / "README").write_text("changed"),
        "append": lambda: open(root / "src" / "app.py", "a").write("x"),
        "create": lambda: (root / "new.txt").write_text("new"),
        "mkdir": lambda: (root / "newdir").mkdir(),
        "delete": lambda: (root / "README").unlink(),
        "rename": lambda: (root / "README").rename(root / "README2"),
        "chmod": lambda: (root / "README").chmod(0o777),
        "rmdir": lambda: os.rmdir(root / "src"),
    }
    for name, attempt in tries.items():
        try:
            attempt()
            print(name, "done")
        except OSError as e:
            print(name, e.errno)
"""


def attempt_writes(root: Path, **mounts) -> dict[str, str]:
    argv = sandbox.wrap([sys.executable, "-c", textwrap.dedent(ATTEMPTS), str(root)], **mounts)
    p = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return dict(line.split() for line in p.stdout.splitlines())


def test_a_read_only_tree_refuses_every_write_and_stays_as_it_was(bwrap, tmp_path):
    import errno

    repo = make_repo(tmp_path / "repo")
    before = tree(repo)
    got = attempt_writes(repo, writable=[], read_only=[str(repo)])
    assert got == dict.fromkeys(got, str(errno.EROFS)) and len(got) == 8
    assert tree(repo) == before


@pytest.mark.skipif(os.geteuid() != 0, reason="what root could do to a mount")
def test_root_cannot_remount_or_unmount_a_read_only_tree(bwrap, tmp_path):
    repo = make_repo(tmp_path / "repo")
    before = tree(repo)
    p = run_in(f"""
        import subprocess
        for argv in (["mount", "-o", "remount,rw", {str(repo)!r}], ["umount", {str(repo)!r}],
                     ["umount", "-l", {str(repo)!r}]):
            subprocess.run(argv, capture_output=True)
        try:
            open({str(repo / "README")!r}, "w").write("changed")
        except OSError as e:
            print("refused", e.errno)
    """, read_only=[repo])
    assert p.stdout.startswith("refused"), (p.stdout, p.stderr)
    assert tree(repo) == before


def test_writable_inside_read_only_and_read_only_inside_writable(bwrap, tmp_path):
    root = tmp_path / "workspaces"
    ws = root / "unit-1"
    snap = ws / "snapshot"
    for d in (ws / "sub", snap, root / "unit-2"):
        d.mkdir(parents=True)
    (snap / "ref.txt").write_text("reference\n")
    p = run_in(f"""
        import pathlib
        for target in ({str(ws / "sub" / "out")!r}, {str(root / "unit-2" / "out")!r},
                       {str(snap / "ref.txt")!r}, {str(ws / "out")!r}):
            try:
                pathlib.Path(target).write_text("written")
                print("ok")
            except OSError as e:
                print("refused")
    """, writable=[ws], read_only=[snap, root])  # deepest first on purpose: order is wrap's job
    assert p.stdout.split() == ["ok", "refused", "refused", "ok"], p.stderr
    assert (snap / "ref.txt").read_text() == "reference\n"
    assert not (root / "unit-2" / "out").exists()
    assert (ws / "out").read_text() == "written"


def test_a_path_given_through_a_symbolic_link_is_read_only_by_its_real_path(bwrap, tmp_path):
    repo = make_repo(tmp_path / "repo")
    (tmp_path / "link").symlink_to(repo)
    before = tree(repo)
    got = attempt_writes(repo, writable=[], read_only=[str(tmp_path / "link")])
    assert "done" not in got.values()
    assert tree(repo) == before


def test_missing_paths_are_skipped_and_the_rest_is_read_only(bwrap, tmp_path):
    p = run_in(f"""
        import pathlib
        try:
            pathlib.Path({str(tmp_path / "out")!r}).write_text("here")
        except OSError as e:
            print("refused", e.errno)
    """, writable=[tmp_path / "not-yet"], read_only=[tmp_path / "nowhere"])
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["refused", str(errno.EROFS)]   # outside the lists: read-only
    assert not (tmp_path / "out").exists()


def test_a_path_in_both_lists_is_read_only(bwrap, tmp_path):
    repo = make_repo(tmp_path / "repo")
    got = attempt_writes(repo, writable=[str(repo)], read_only=[str(repo)])
    assert "done" not in got.values()


@pytest.mark.parametrize("code,expected", [
    ("pass", 0),
    ("raise SystemExit(3)", 3),
    ("raise SystemExit(255)", 255),
    ("import os, signal; os.kill(os.getpid(), signal.SIGTERM)", 128 + signal.SIGTERM),
    ("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", 128 + signal.SIGKILL),
    ("import os, signal; os.kill(os.getpid(), signal.SIGSEGV)", 128 + signal.SIGSEGV),
])
def test_exit_codes_come_through_as_prun_reports_them(bwrap, tmp_path, code, expected):
    w = spawn(sandbox.wrap([sys.executable, "-c", code], writable=[], read_only=[]),
              cwd=str(tmp_path), env=dict(os.environ), stdout_path=str(tmp_path / "out"),
              stderr_path=str(tmp_path / "err"))
    assert w.wait_exit(60)
    assert w.reap() == expected
    assert (tmp_path / "err").read_text() == ""


# Escapes: a setsid daemon, a double-forked daemon, a process that ignores SIGTERM -------------

TREE = """
    import os, signal, subprocess, sys, time
    fd, mode = int(sys.argv[1]), sys.argv[2]
    subprocess.Popen(["setsid", "sleep", "300"], pass_fds=(fd,))
    if os.fork() == 0:                 # the classic daemon: fork, setsid, fork
        os.setsid()
        if os.fork() == 0:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            time.sleep(300)
        os._exit(0)
    subprocess.Popen([sys.executable, "-c", "import signal, time; "
                      "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(300)"],
                     pass_fds=(fd,))
    if mode == "graceful":
        def ending(*_):
            print("cleaning up", flush=True)
            time.sleep(0.3)            # longer than bwrap would have given it
            print("done", flush=True)
            raise SystemExit(5)
        signal.signal(signal.SIGTERM, ending)
    elif mode == "stubborn":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    print("ready", flush=True)
    if mode == "exit":
        raise SystemExit(4)
    time.sleep(300)
"""


def start_tree(holders, mode: str) -> Worker:
    argv = sandbox.wrap([sys.executable, "-c", textwrap.dedent(TREE), str(holders.fd), mode],
                        writable=[], read_only=[])
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, pass_fds=(holders.fd,),
                            start_new_session=True, stdin=subprocess.DEVNULL)
    assert proc.stdout.readline() == "ready\n"
    return Worker(proc, os.pidfd_open(proc.pid))


def test_every_process_inside_ends_when_the_main_process_exits(bwrap, holders):
    w = start_tree(holders, "exit")
    assert holders.gone(), "a daemon outlived the unit's main process"
    assert w.wait_exit(30) and w.reap() == 4


def test_ending_the_group_gives_the_main_process_its_grace_then_ends_everything(bwrap, holders):
    w = start_tree(holders, "graceful")
    end_group(w, grace=30)
    assert w.reap() == 5                       # it handled SIGTERM in its own time
    assert w.proc.stdout.read() == "cleaning up\ndone\n"
    assert holders.gone()


def test_a_main_process_that_ignores_sigterm_is_killed_with_everything_inside(bwrap, holders):
    w = start_tree(holders, "stubborn")
    end_group(w, grace=0.2)
    assert w.reap() == 128 + signal.SIGKILL
    assert holders.gone()


def test_everything_inside_dies_with_the_process_that_started_bwrap(bwrap, holders, tmp_path):
    argv = sandbox.wrap([sys.executable, "-c", textwrap.dedent(TREE), str(holders.fd), "wait"],
                        writable=[], read_only=[])
    parent = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import subprocess, sys, time
        p = subprocess.Popen({argv!r}, stdout=subprocess.PIPE, text=True,
                             pass_fds=({holders.fd},), start_new_session=True)
        print(p.stdout.readline(), end="", flush=True)
        time.sleep(300)
    """)], stdout=subprocess.PIPE, text=True, pass_fds=(holders.fd,))
    assert parent.stdout.readline() == "ready\n"
    parent.kill()
    parent.wait()
    assert holders.gone()


def test_the_unit_sees_only_its_own_processes(bwrap):
    if not sandbox.fresh_proc():
        pytest.skip("no fresh /proc can be mounted here: the unit sees every process")
    p = run_in("""
        import os, subprocess
        pids = sorted(int(d) for d in os.listdir("/proc") if d.isdigit())
        comms = [open(f"/proc/{n}/comm").read().strip() for n in pids]
        print(pids, comms, os.getpid())
        print(subprocess.run(["ps", "-e", "-o", "pid="], capture_output=True, text=True).stdout
              .split())
    """)
    first, second = p.stdout.splitlines()
    assert first.startswith("[1, 2] ['bwrap', ") and first.endswith(" 2"), first
    assert second == "['1', '2', '3']"       # init, the unit, ps itself


def test_a_sandbox_inside_a_sandbox_is_refused_with_bwraps_reason(bwrap):
    if os.geteuid() != 0:
        pytest.skip("without root, a nested bwrap may be allowed")
    p = run_in("""
        import subprocess
        from prun.attempt import sandbox
        print(sandbox.unavailable())
        failed = subprocess.run(["bwrap", "--dev-bind", "/", "/", "--unshare-pid", "--", "true"],
                                capture_output=True, text=True)
        print(failed.returncode, failed.stderr.count("\\n"), failed.stderr[:7])
    """)
    reason, failure = p.stdout.splitlines()
    assert reason.startswith("bwrap refused: bwrap: "), (p.stdout, p.stderr)
    assert failure == "1 1 bwrap: "          # bwrap's own failure: exit 1, one line


def test_without_bwrap_the_reason_names_it(tmp_path):
    p = subprocess.run([sys.executable, "-c", "from prun.attempt import sandbox; "
                        "print(sandbox.unavailable())"], capture_output=True, text=True,
                       env={**os.environ, "PATH": str(tmp_path)}, timeout=60)
    expected = "no bwrap on PATH" if sys.platform == "linux" else "not Linux"
    assert p.stdout.startswith(expected), p.stderr


def test_wrap_refuses_where_no_sandbox_can_be_made(tmp_path):
    p = subprocess.run([sys.executable, "-c", "from prun.attempt import sandbox\n"
                        "try:\n    sandbox.wrap(['true'], writable=[], read_only=[])\n"
                        "except Exception as e:\n    print(type(e).__name__, e.exit_code)"],
                       capture_output=True, text=True, env={**os.environ, "PATH": str(tmp_path)},
                       timeout=60)
    assert p.stdout == "UsageError 2\n", p.stderr


def test_a_program_name_with_an_equals_sign_is_refused(bwrap):
    with pytest.raises(UsageError):
        sandbox.wrap(["A=b"], writable=[], read_only=[])


@pytest.mark.parametrize("value,setting", [
    (None, "auto"), ("auto", "auto"), ("on", "on"), ("off", "off"), ("ON", "on"),
    (True, "on"), (False, "off"),
])
def test_settings(value, setting):
    assert parse_sandbox(value) == setting


@pytest.mark.parametrize("value", ["yes", "", 1, 0, "always", ["on"]])
def test_other_settings_are_refused_naming_the_accepted_ones(value):
    with pytest.raises(UsageError) as e:
        parse_sandbox(value)
    assert e.value.exit_code == 2
    assert "auto" in e.value.hint and "on" in e.value.hint and "off" in e.value.hint


# The unit's own places: a private /tmp, hidden folders, covers -------------------------------

def test_tmp_is_the_units_own_and_the_machines_is_not_seen(bwrap, tmp_path):
    own = tmp_path / "own-tmp"
    own.mkdir()
    (tmp_path / "beside.txt").write_text("the machine's /tmp\n")
    name = f"prun-made-{os.getpid()}-{id(own)}"
    p = run_in(f"""
        import os
        open("/tmp/{name}", "w").write("mine")
        open("/var/tmp/{name}", "w").write("mine too")
        print(os.path.exists({str(tmp_path / "beside.txt")!r}))
    """, tmp=str(own))
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["False"]                 # the machine's /tmp is not there
    assert (own / name).read_text() == "mine too"        # /var/tmp is the same folder
    assert not Path("/tmp", name).exists() and not Path("/var/tmp", name).exists()


def test_a_hidden_folder_shows_only_what_is_bound_back_into_it(bwrap, tmp_path):
    root = tmp_path / "workspaces"
    for name in ("other", "mine", "snap"):
        (root / "run" / name).mkdir(parents=True)
        (root / "run" / name / "file.txt").write_text(f"{name}'s\n")
    p = run_in(f"""
        import errno, os
        root = {str(root)!r}
        print(sorted(os.listdir(root + "/run")))
        for path in ("/run/other/file.txt", "/run/snap/file.txt", "/run/mine/file.txt"):
            try:
                print(open(root + path).read().strip())
            except OSError as e:
                print(errno.errorcode[e.errno])
        for path in ("/run/new.txt", "/new.txt", "/run/snap/new.txt", "/run/mine/new.txt"):
            try:
                open(root + path, "w").write("x")
                print("written")
            except OSError as e:
                print(errno.errorcode[e.errno])
    """, hidden=[root], writable=[root / "run" / "mine"], read_only=[root / "run" / "snap"])
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == [
        "['mine', 'snap']", "ENOENT", "snap's", "mine's",
        "EROFS", "EROFS", "EROFS", "written"], p.stdout
    assert sorted(os.listdir(root / "run")) == ["mine", "other", "snap"]   # as it was
    assert not (root / "run" / "new.txt").exists() and (root / "run" / "mine" / "new.txt").exists()


def test_covers_go_over_files_the_unit_sees_and_cannot_be_removed(bwrap, tmp_path):
    tool = tmp_path / "bin" / "agent"
    tool.parent.mkdir()
    tool.write_text("#!/bin/sh\necho the real agent\n")
    tool.chmod(0o755)
    hidden_tool = tmp_path / "hidden" / "agent"
    hidden_tool.parent.mkdir()
    hidden_tool.write_text("#!/bin/sh\necho hidden\n")
    stub = tmp_path / "stub"
    stub.write_text("#!/bin/sh\necho stubbed >&2\nexit 2\n")
    stub.chmod(0o755)
    marker = tmp_path / "marker.json"
    marker.write_text('{"subdispatch": false}\n')
    p = run_in(f"""
        import errno, os, subprocess
        r = subprocess.run([{str(tool)!r}], capture_output=True, text=True)
        print(r.returncode, r.stdout.strip(), r.stderr.strip())
        print(open("/dev/prun-test").read().strip())
        for attempt in (lambda: os.unlink("/dev/prun-test"),
                        lambda: open("/dev/prun-test", "w"), lambda: os.unlink({str(tool)!r})):
            try:
                attempt()
                print("done")
            except OSError as e:
                print(errno.errorcode[e.errno])
        print(os.path.exists({str(hidden_tool)!r}))
    """, hidden=[hidden_tool.parent], covers=[(str(stub), str(tool)),
                                              (str(marker), "/dev/prun-test"),
                                              (str(stub), str(hidden_tool))])
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == ['2  stubbed', '{"subdispatch": false}', "EBUSY", "EROFS",
                                     "EROFS", "False"], p.stdout
    assert tool.read_text() == "#!/bin/sh\necho the real agent\n"


def test_the_sandbox_has_its_own_dev(bwrap):
    p = run_in("""
        import os
        print(sorted(n for n in os.listdir("/dev") if not n.startswith(".")))
        open("/dev/null", "w").write("x")
        print(len(open("/dev/urandom", "rb").read(8)))
    """)
    assert p.returncode == 0, p.stderr
    names, eight = p.stdout.splitlines()
    assert eight == "8"
    assert set(eval(names)) <= {"core", "fd", "full", "null", "ptmx", "pts", "random", "shm",
                                "stderr", "stdin", "stdout", "tty", "urandom", "zero"}
