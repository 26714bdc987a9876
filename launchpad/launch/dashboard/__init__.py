"""The web dashboard of a running program, served by its launching process on loopback.

    server.py    the HTTP server: one per launch that asks for it (`dashboard_port=` of
                 lp.launch, `--lp_dashboard_port`), behind a token made for the launch
    views.py     what its JSON answers hold: the program's status, a node's log tail
    graph.py     the program's picture (Graphviz's `dot`, else the DOT source as text)
    exporter.py  `/metrics`: the status in Prometheus' text format (the `dashboard` extra)
    static/      the page: plain HTML, CSS and JavaScript, no build step, nothing fetched
                 from elsewhere

`launch.py` imports this package only for a launch that serves a dashboard.
"""
