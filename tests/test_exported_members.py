"""prun's public surface (``prun.__all__``, docs/api.md): every exported name exists, is
documented and is defined inside prun; ``__all__`` is sorted and names every public name; and
importing prun stays light (each name is loaded on first use)."""

from __future__ import annotations

import inspect
import subprocess
import sys

import prun


def test_all_exports_exist_are_documented_and_defined_in_prun():
    for name in prun.__all__:
        member = getattr(prun, name)
        if name == "__version__":
            assert isinstance(member, str)
            continue
        assert inspect.getdoc(member), f"prun.{name} has no docstring"
        if callable(member):
            module = member.__module__
            assert module == "prun" or module.startswith("prun."), (name, module)


def test_all_is_sorted_and_names_every_public_member():
    assert prun.__all__ == sorted(prun.__all__)
    assert len(set(prun.__all__)) == len(prun.__all__)
    public = {name for name in dir(prun) if not name.startswith("_")  # its packages aside
              and not inspect.ismodule(getattr(prun, name))} - {"TYPE_CHECKING"}
    assert public == set(prun.__all__) - {"__version__"}


def test_an_unknown_name_is_an_attribute_error():
    try:
        prun.no_such_name  # noqa: B018
    except AttributeError as e:
        assert "no_such_name" in str(e)
    else:
        raise AssertionError("prun.no_such_name did not raise AttributeError")


def test_import_prun_loads_nothing_until_a_name_is_used():
    probe = ("import sys; import prun; before = set(sys.modules); prun.status; "
             "print(sorted(m for m in before if m.startswith('prun')), "
             "'sqlite3' in before, 'prun.api' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "['prun'] False True"
