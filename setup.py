"""The wheel's one build step beyond pyproject.toml: copy the skill (skills/prun/) into the
package as prun/skill/files/, so that `prun skill install` works from an installed wheel.
skills/prun/ stays the one source of truth; a source checkout or an editable install reads it
in place (prun.skill.bundle). Everything else is declared in pyproject.toml.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

SKILL = Path(__file__).resolve().parent / "skills" / "prun"


class BuildWithSkill(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False) or not SKILL.is_dir():
            return
        dest = Path(self.build_lib, "prun", "skill", "files")
        if dest.exists():
            shutil.rmtree(dest)
        shutil.copytree(SKILL, dest, ignore=shutil.ignore_patterns("__pycache__", "*.py[co]"))


setup(cmdclass={"build_py": BuildWithSkill})
