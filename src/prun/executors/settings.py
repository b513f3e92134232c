"""A unit's resolved executor settings: the model, effort and timeout asked of its CLI."""

from __future__ import annotations

from collections.abc import Mapping


class Settings:
    """A unit's resolved executor settings (what will actually be asked of the CLI).

    A plain class rather than a dataclass: it is built on the dispatcher's path to its first
    output line, where importing ``dataclasses`` alone would cost more than the rest.
    """

    __slots__ = ("effort", "extra", "model", "timeout_s")

    def __init__(self, model: str | None, effort: str | None, timeout_s: float,
                 extra: Mapping[str, object] | None = None):
        self.model = model
        self.effort = effort
        self.timeout_s = timeout_s
        self.extra = dict(extra or {})  # executor-specific, e.g. agy's sandbox

    def replace(self, *, model: str | None, effort: str | None) -> Settings:
        """These settings with another model and effort (the quota gate's MODEL-FALLBACK)."""
        return Settings(model=model, effort=effort, timeout_s=self.timeout_s, extra=self.extra)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Settings) and all(
            getattr(self, k) == getattr(other, k) for k in self.__slots__)

    def __repr__(self) -> str:
        return "Settings(" + ", ".join(f"{k}={getattr(self, k)!r}" for k in self.__slots__) + ")"
