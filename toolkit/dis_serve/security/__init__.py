"""The per-graph certificate authority of `security.tls: auto` (certs.py) and where its files
are (pki_files.py); the schema of the `security` section is topology/security.py."""
