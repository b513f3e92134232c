"""prun (parallel run): fan coding work out to many AI agent processes, watch them, and
gather, check and integrate what they produced.

Importing prun has no side effects; modules import their heavy dependencies where used.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
