"""Benchmarks of running graphs: AIPerf sweeps, per-pool server metrics, reports, CI gate."""
