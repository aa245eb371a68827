"""`doctor` on a graph spread over nodes reads each worker's metrics where that worker's
own node serves them, not at the head's address."""

from __future__ import annotations

from urllib.parse import urlsplit

from test_observe_top_nodes import ADDRESS, THREE_NODES, _cluster_run

from dis_serve.launch.cluster_tls import write_cluster_ca
from dis_serve.placements.lookup import doctor_target


def test_each_workers_metrics_are_read_at_its_own_nodes_address(tmp_path):
    run = _cluster_run(tmp_path)
    write_cluster_ca(THREE_NODES, run.path)
    target = doctor_target(run)
    assert len(target.worker_metrics) == len(target.plan.workers)
    hosts = [urlsplit(url).hostname for url in target.worker_metrics]
    # demo-3node-slurm puts a worker on every node: each is read on its own.
    assert sorted(hosts) == sorted(ADDRESS.values())
