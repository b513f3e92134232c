"""prun over MCP: a stdio server on the official Python SDK (``mcp`` 2.x, the ``mcp`` extra),
and the entries that make Claude Code and Gemini CLI start it.

Each tool runs the same code path as its command, in a child process (``python -m prun ...``,
or ``python -m prun.cli.capture`` for the commands whose ``--json`` and lines it returns
together), so the text a tool returns is the command's lines and its structured content the
command's ``--json``: the server knows nothing of the engine behind the commands.

Modules: ``args`` (what a tool accepts: every argument checked as data, and the child's argv
built so that none becomes a flag), ``tools`` (which command each tool runs and which exit
codes report a state), ``child`` (running a child with a bound, streaming its lines),
``lines`` (reading the terse lines), ``server`` (the tools and resources; imports the SDK),
``config`` (the CLIs' config files; no SDK needed).
"""
