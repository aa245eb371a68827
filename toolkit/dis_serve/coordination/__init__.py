"""The coordination plane of a running graph: etcd registrations, NATS, per-pool traffic."""
