"""The skill prun ships for coordinating sessions (Claude Code, Gemini CLI, Antigravity), and
installing it where each CLI discovers skills.

``prun.skill.bundle`` finds the shipped files (one source of truth: ``skills/prun/`` of the
repository, carried into the wheel at build time); ``prun.skill.install`` writes, checks and
removes an installed copy, with a manifest of file hashes that tells current, outdated and
edited apart.
"""
