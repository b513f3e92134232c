"""prun over MCP: a stdio server on the official Python SDK (``mcp`` 2.x, the ``mcp`` extra),
and the entries that make Claude Code and Gemini CLI start it.

Each tool does what its command does and returns the command's lines as text and its
``--json`` as structured content. ``status``, ``reconcile`` and the result resources
call the library (``prun.api``) in the server's process; the other tools run their command in
a child process (``python -m prun ...``, or ``python -m prun.cli.capture`` for the commands whose
``--json`` and lines it returns together) because the call needs one: a bound that must end
whatever the call started (a wait, a person's check command, a probe of the agent CLIs), a
supervisor or unit that must outlive the call without taking over the server's signals, or a
fault that must not take the server down (docs/coordinators.md, "How the server runs a
command"; ``prun.mcp.calls`` says which tool is which).

Modules: ``args`` (what a tool accepts: every argument checked as data, and the child's argv
built so that none becomes a flag), ``calls`` (one call: its folder, its bound, its command in a
child or the library in this process, its result), ``tools`` (which command each tool runs and
which exit codes report a state), ``child`` (running a child with a bound, streaming its
lines), ``lines`` (reading the terse lines), ``catalog``, ``units``, ``panel_tools`` and
``review_tools`` (the tools, by group), ``server`` (registers them; imports the SDK),
``config`` (the CLIs' config files; no SDK needed).
"""
