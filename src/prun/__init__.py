"""prun (parallel run): fan coding work out to many AI agent processes, watch them, and
gather, check and integrate what they produced.

The Python API (docs/api.md), for a coordinator written in Python:

    import prun

    plan = prun.load_plan("plan.yaml")
    if not prun.check(plan).ok: ...                  # the independence test
    started = prun.run_plan(plan)                    # frozen; driven in the background
    woke = prun.wait(started.run_id)                 # until something needs attention
    report = prun.reconcile(started.run_id)          # each packet's verdict
    result = prun.integrate(started.run_id)          # applied and checked, never committed

Every function returns a typed record and raises a ``prun.PrunError`` (its ``exit_code`` is
the command's) for what it refuses. Importing prun has no side effects and loads nothing
heavy: each name below is imported from its module on first use.
"""

__version__ = "0.1.0"

__all__ = [
    "CheckReport",
    "DispatchRequest",
    "ExitCode",
    "Integration",
    "NotIndependent",
    "Outcome",
    "Plan",
    "PrunError",
    "Reconciliation",
    "RunView",
    "Started",
    "UnitView",
    "UsageError",
    "Wake",
    "WakeEvent",
    "__version__",
    "check",
    "dispatch",
    "freeze_run",
    "integrate",
    "integrate_exit_code",
    "load_plan",
    "reconcile",
    "reconcile_exit_code",
    "run_exit_code",
    "run_plan",
    "status",
    "wait",
]

TYPE_CHECKING = False  # typing costs milliseconds on the dispatcher's fast path
if TYPE_CHECKING:
    from .api import (
        Started,
        Wake,
        WakeEvent,
        check,
        dispatch,
        freeze_run,
        integrate,
        integrate_exit_code,
        reconcile,
        reconcile_exit_code,
        run_exit_code,
        run_plan,
        status,
        wait,
    )
    from .attempt.outcome import Outcome
    from .attempt.request import Request as DispatchRequest
    from .errors import ExitCode, NotIndependent, PrunError, UsageError
    from .git.integrate import Integration
    from .git.verdict import Report as Reconciliation
    from .plan import load_plan
    from .plan.model import Plan
    from .plan.pair_report import Report as CheckReport
    from .views.model import RunView, UnitView

# each exported name: the module it is defined in, and its name there
_WHERE = {
    "CheckReport": ("prun.plan.pair_report", "Report"),
    "DispatchRequest": ("prun.attempt.request", "Request"),
    "ExitCode": ("prun.errors", "ExitCode"),
    "Integration": ("prun.git.integrate", "Integration"),
    "NotIndependent": ("prun.errors", "NotIndependent"),
    "Outcome": ("prun.attempt.outcome", "Outcome"),
    "Plan": ("prun.plan.model", "Plan"),
    "PrunError": ("prun.errors", "PrunError"),
    "Reconciliation": ("prun.git.verdict", "Report"),
    "RunView": ("prun.views.model", "RunView"),
    "UnitView": ("prun.views.model", "UnitView"),
    "UsageError": ("prun.errors", "UsageError"),
    "load_plan": ("prun.plan", "load_plan"),
}


def __getattr__(name: str) -> object:
    """An exported name, imported from its module on first use (then kept here)."""
    import importlib

    if name in __all__ and name != "__version__":
        module, attr = _WHERE.get(name, ("prun.api", name))
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'prun' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
