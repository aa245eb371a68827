"""Live views of a running graph: `dis-serve top` (per pool, from the processes' Prometheus
`/metrics`, differences between two scrapes a window apart)."""
