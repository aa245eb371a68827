"""The GPUs and models dis-serve knows (catalog) and what fits on them (sizing)."""
