"""Who may talk to a graph: the topology's `security` section (settings.py) and the per-graph
certificate authority of `tls: auto` (certs.py)."""
