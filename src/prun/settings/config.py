"""prun's config file: TOML, optional, read when a command needs it.

Location: ``$PRUN_CONFIG`` when set, else ``config.toml`` in the user's config folder for
``prun`` (platformdirs: ``~/.config/prun/config.toml`` on Linux,
``~/Library/Application Support/prun/config.toml`` on macOS). A missing file means defaults.
It is read as a regular file of at most 1 MiB (a FIFO or a device is refused unread). A file
that is not valid TOML, or holds a value of the wrong type, raises ``ConfigError``
(exit 2) naming the file and the key.

Sections read so far (see docs/quota.md)::

    [quota]
    ttl = "5m"            # a reading older than this is re-read before use (when a probe exists)
    probe_timeout = "15s" # a probe still running after this is killed with its process group
    hit_reset = "15m"     # how long a quota error that names no reset time counts as empty

    [quota.probes]        # one command per quota group: a list of words, or one shell-like string
    claude = ["python3", "/opt/probes/claude_probe.py"]
    agy-gemini = "python3 /opt/probes/agy_probe.py --group agy-gemini"
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .._util.regular import read_regular
from .._util.timeparse import parse_duration
from ..errors import ConfigError, UsageError

DEFAULT_TTL_S = 300.0
DEFAULT_PROBE_TIMEOUT_S = 15.0
DEFAULT_HIT_RESET_S = 900.0
MAX_CONFIG_BYTES = 1024 * 1024   # the config file: a regular file of at most 1 MiB


def config_path(env: Mapping[str, str] | None = None) -> str:
    """``$PRUN_CONFIG``, else ``<user config dir>/prun/config.toml``."""
    from . import load

    return load(env).config


def load(env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The whole config file as a dict; ``{}`` when there is none."""
    path = config_path(env)
    if path == os.devnull or not os.path.exists(path):
        return {}
    data = read_regular(path, MAX_CONFIG_BYTES, "config file", ConfigError)

    try:
        return tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise ConfigError(f"config file {path} is not valid TOML: {e}",
                          hint="fix the file (see docs/quota.md for its keys)")


@dataclass(frozen=True)
class QuotaConfig:
    """The ``[quota]`` section, resolved."""

    probes: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    ttl_s: float = DEFAULT_TTL_S
    probe_timeout_s: float = DEFAULT_PROBE_TIMEOUT_S
    hit_reset_s: float = DEFAULT_HIT_RESET_S
    path: str = ""


def quota(env: Mapping[str, str] | None = None) -> QuotaConfig:
    """The quota settings and probe commands from the config file (defaults when absent)."""
    path = config_path(env)
    section = load(env).get("quota", {})
    if not isinstance(section, dict):
        raise _bad(path, "quota", "a table")
    probes_raw = section.get("probes", {})
    if not isinstance(probes_raw, dict):
        raise _bad(path, "quota.probes", "a table of group = command")
    probes = {}
    for group, command in probes_raw.items():
        probes[str(group)] = _command(command, path, f"quota.probes.{group}")
    return QuotaConfig(
        probes=probes,
        ttl_s=_duration(section.get("ttl"), DEFAULT_TTL_S, path, "quota.ttl"),
        probe_timeout_s=_duration(section.get("probe_timeout"), DEFAULT_PROBE_TIMEOUT_S, path,
                                  "quota.probe_timeout"),
        hit_reset_s=_duration(section.get("hit_reset"), DEFAULT_HIT_RESET_S, path,
                              "quota.hit_reset"),
        path=path,
    )


def _command(value: object, path: str, key: str) -> tuple[str, ...]:
    if isinstance(value, str):
        import shlex

        try:
            words = shlex.split(value)
        except ValueError as e:
            raise ConfigError(f"{path}: {key} is not a valid command line: {e}",
                              hint="write it as a list of words instead")
    elif isinstance(value, list) and all(isinstance(w, str) for w in value):
        words = list(value)
    else:
        raise _bad(path, key, "a command: a list of strings or one string")
    if not words or not words[0].strip():
        raise _bad(path, key, "a non-empty command")
    return tuple(words)


def _duration(value: object, default: float, path: str, key: str) -> float:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise _bad(path, key, 'seconds or a duration such as "5m"')

    try:
        seconds = parse_duration(value, what=key)
    except UsageError as e:
        raise ConfigError(f"{path}: {e.message}", hint=e.hint)
    if seconds <= 0:
        raise _bad(path, key, "a positive duration")
    return seconds


def _bad(path: str, key: str, wanted: str) -> ConfigError:
    return ConfigError(f"{path}: {key} must be {wanted}",
                       hint="fix the config file (see docs/quota.md)")
