"""Evidence that travels with results: what produced a run (fingerprint) and how two runs
differ (diff)."""
