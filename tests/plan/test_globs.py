"""Glob overlap and containment, decided on the patterns alone (files need not exist)."""

from __future__ import annotations

import itertools

import pathspec
import pytest

from prun.plan.globs import common, covers, fixed_prefix, fixed_suffix, matches, normalize, overlap

OVERLAP = [
    ("src/**/*.py", "src/api/*.py"),
    ("src/**", "src/api/**"),
    ("src", "src/x.py"),                      # a folder covers everything below it
    ("src/api/", "src/api/v1/handlers.py"),
    ("**/*.lock", "*.lock"),
    ("**", "README.md"),
    ("src/a[0-9].py", "src/a?.py"),
    ("src/[abc]*.py", "src/bar.py"),
    ("a/**/b", "a/b"),
    ("a/**/b", "a/x/y/b"),
    ("tests/**/test_*.py", "tests/unit/**"),
    ("*.md", "READ*"),
    ("./pyproject.toml", "/pyproject.toml"),
    ("docs/**/*.md", "docs/*/index.*"),
    ("src/\\*literal", "src/*"),
    ("conf.d/", "conf.d/x.conf"),             # a trailing '/' makes a dotted name a folder
    (".github", ".github/workflows/ci.yml"),
]

DISJOINT = [
    ("docs/*.md", "src/**"),
    ("src/*.py", "src/sub/x.py"),             # '*' stays inside one folder
    ("src/**/*.py", "src/**/*.js"),
    ("src/a[!0-9].py", "src/a[0-9].py"),
    ("pyproject.toml", "src/**"),
    ("*.lock", "sub/uv.lock"),                # patterns are anchored at the root
    ("a/**/b", "a/*c"),
    ("src/api", "src/apiv2/**"),
    ("src/\\*literal", "src/xliteral"),
    ("web/**", "src/web/**"),
    ("pyproject.toml", "**/mod/*.py"),        # a file name is not a folder
    ("conf.d", "conf.d/x.conf"),
]


@pytest.mark.parametrize(("a", "b"), OVERLAP)
def test_overlap_found_without_files(a, b):
    example = overlap(a, b)
    assert example is not None
    assert matches(a, example) and matches(b, example)
    assert overlap(b, a) is not None


@pytest.mark.parametrize(("a", "b"), DISJOINT)
def test_disjoint(a, b):
    assert overlap(a, b) is None and overlap(b, a) is None
    assert common(a, b) is None


def test_common_names_the_narrower_glob_or_an_example():
    assert common("src/**/*.py", "src/api/*.py") == "src/api/*.py"
    assert common("src/api/*.py", "src/**/*.py") == "src/api/*.py"
    assert common("src/**", "src/api/**") == "src/api/**"
    assert common("pyproject.toml", "pyproject.toml") == "pyproject.toml"
    assert common("src/**/*.py", "src/api/**") == "src/api/**/*.py"   # a glob both cover
    example = common("src/*/x.py", "src/a*/*.py")     # no simple glob: a shortest example
    assert example == "src/a/x.py"
    assert matches("src/*/x.py", example) and matches("src/a*/*.py", example)


def test_covers():
    assert covers("src/**", "src/api/*.py")
    assert covers("src", "src/api/**")
    assert covers("**/*.py", "src/*.py")
    assert covers("src/?.py", "src/[ab].py")
    assert not covers("src/*.py", "src/**/*.py")
    assert not covers("src/[ab].py", "src/?.py")
    assert not covers("src/api/**", "src/**")


def test_normalize():
    assert normalize("./src//api/") == "src/api/**"
    assert normalize("./src//api") == "src/api"
    assert normalize("/") == "**"


def test_fixed_prefix_and_suffix():
    assert [fixed_prefix(p) for p in ("src/api/**", "./docs/*.md", "**/x.py", "a\\*b")] == \
        ["src/api/", "docs/", "", "a"]
    assert [fixed_suffix(p) for p in ("**/x.py", "a/**/x.py", "src/*.py", "src/api", "src/**",
                                      "x.md")] == ["x.py", "/x.py", ".py", "", "", "x.md"]


PATTERNS = ["src", "src/api", "src/**", "src/**/*.py", "src/*.py", "**/test_*.py", "*.md",
            "docs/**/*.md", "a/**/b", "src/[ab]?.py", "src/[!a]*.py", "src/api/**"]
PATHS = ["src", "src/a.py", "src/ab.py", "src/bc.py", "src/api", "src/api/x.py",
         "src/api/v1/y.py", "README.md", "docs/a.md", "docs/x/y/z.md", "a/b", "a/x/b",
         "a/x/y/b", "tests/test_a.py", "tests/unit/test_b.py", "x/src/a.py", "src.py", "srcx"]


@pytest.mark.parametrize("pattern", PATTERNS)
def test_matches_agrees_with_pathspec(pattern):
    """Cross-check against pathspec (git's wildmatch, anchored). The one intended difference:
    a pattern whose last segment has a wildcard does not cover the inside of a folder it
    happens to match (pathspec's 'src/*.py' would cover 'src/x.py/inner')."""
    spec = pathspec.PathSpec.from_lines("gitignore", ["/" + pattern])
    for path in PATHS:
        assert matches(pattern, path) == spec.match_file(path), (pattern, path)


def test_overlap_agrees_with_brute_force_over_paths():
    for a, b in itertools.product(PATTERNS, repeat=2):
        both = [p for p in PATHS if matches(a, p) and matches(b, p)]
        if both:
            assert overlap(a, b) is not None, (a, b, both)
        if overlap(a, b) is None:
            assert both == [], (a, b)
