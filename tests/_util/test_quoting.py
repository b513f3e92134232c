"""Quoting names: a quoted token is one word, holds no control byte, and reads back exactly;
text for a person keeps no control character; a shell word stays one line."""

from __future__ import annotations

import shlex
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prun._util.quoting import printable, quote, shell_word, split, unquote, word

# what a file name can hold: any character, and bytes that are not UTF-8 (surrogateescape)
NAMES = st.one_of(
    st.text(max_size=40),
    st.binary(max_size=40).map(lambda b: b.decode("utf-8", "surrogateescape")),
)


def safe(text: str) -> bool:
    """No byte below 0x20, none from 0x7f to 0x9f, no lone surrogate: fit for a terminal."""
    return not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F or 0xD800 <= ord(c) <= 0xDFFF
                   for c in text)


@settings(max_examples=500, deadline=None)
@given(NAMES)
def test_a_name_is_one_safe_token_that_reads_back(name):
    token = quote(name)
    assert safe(token)
    assert token.startswith('"') or not any(c.isspace() for c in token)
    assert len(split(f"WORD {token} tail")) == 3
    assert unquote(token) == name
    assert split(f"WORD {word('path', name)}") == ["WORD", f"path={name}"]


@settings(max_examples=300, deadline=None)
@given(NAMES)
def test_printable_text_holds_no_control_character(name):
    assert safe(printable(name))
    assert "\n" in printable(name + "\n", keep="\n")


@pytest.mark.parametrize(("name", "token"), [
    ("plain-name.py", "plain-name.py"),
    ("-leading", "-leading"),
    ("", '""'),
    ("sp ace", '"sp ace"'),
    ("x\nACCEPTED other", '"x\\nACCEPTED other"'),
    ("tab\there", '"tab\\there"'),
    ("title\x1b]0;pwned\x07", '"title\\033]0;pwned\\a"'),
    ("clip\x1b]52;c;eA==\x07", '"clip\\033]52;c;eA==\\a"'),
    ('quote"back\\slash', '"quote\\"back\\\\slash"'),
    (b"bad\xff\xfeutf8".decode("utf-8", "surrogateescape"), '"bad\\377\\376utf8"'),
    ("del\x7fc1\x85", '"del\\177c1\\302\\205"'),
    ("rtl\u202eevil", '"rtl\\342\\200\\256evil"'),
    ("café", "café"),
])
def test_quoted_as_git_quotes_a_path(name, token):
    assert quote(name) == token
    assert unquote(token) == name


def test_git_reads_the_same_quoting(tmp_path):
    """git's own core.quotePath output for the same names is what quote() writes (for the
    characters both escape)."""
    names = ["x\nACCEPTED other", "tab\there", "esc\x1b[2J", 'q"b\\s', "bad\xff".encode(
        "latin-1").decode("utf-8", "surrogateescape")]
    repo = tmp_path / "r"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    for n in names:
        (repo / n).write_text("x")
    out = subprocess.run(["git", "-C", str(repo), "-c", "core.quotePath=true", "ls-files",
                          "--others"], capture_output=True, check=True).stdout.decode()
    assert sorted(unquote(line) for line in out.splitlines()) == sorted(names)


def test_a_key_value_holding_an_equals_sign_is_quoted():
    assert word("cause", "a=b") == 'cause="a=b"'
    assert split('X cause="a=b" n=1') == ["X", "cause=a=b", "n=1"]


@pytest.mark.parametrize("arg", ["plain", "it's", "a b", "x\nb", "e\x1b]0;t\x07", "q'\n\\"])
def test_a_shell_word_stays_one_line_and_means_the_argument(arg):
    w = shell_word(arg)
    assert safe(w)
    out = subprocess.run(["bash", "-c", f"printf '%s' {w}"], capture_output=True,
                         check=True).stdout.decode()
    assert out == arg
    if arg.isprintable():
        assert shlex.split(w) == [arg]


def test_a_json_token_is_one_word_without_control_characters_and_still_json():
    import json

    from prun._util.quoting import json_token

    for value in ["a b", "x\x7fy\x85z\u2028\u202e", {"k": "v\tw\n"}, [1, "é"], "plain"]:
        token = json_token(value)
        assert json.loads(token) == value
        assert " " not in token and all(c.isprintable() for c in token), token
    assert json_token("two words", spaces=True) == '"two words"'
