"""Files dis-serve writes: whole or not at all (atomic_file), and only its user's (private_path)."""
