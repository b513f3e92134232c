"""The person's review page: one run's packets, verdicts, results, diffs, check and cost on a
local web page, and their decisions (accept, reject, include) recorded in the ledger for
``prun integrate`` to honour.

    model      what the page shows, read from the ledger, state dirs and clones (no web code)
    cost       an attempt's tokens and dollars, read defensively
    decide     a decision checked and recorded (also ``prun review --decide``)
    diffview   one file's diff as highlighted HTML (Pygments)
    render     the page as HTML (markdown-it-py for results, HTML off)
    guard      who may reach the page: the printed secret, page tokens, Host, Origin
    server     the aiohttp server: 127.0.0.1 only, 403 for whatever the guard refuses

aiohttp, markdown-it-py and Pygments (the ``review`` extra) are imported only by ``server``,
``render`` and ``diffview``; importing this package imports none of them.
"""
