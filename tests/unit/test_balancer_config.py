"""The load balancer's and the floating address's configurations (render/balancer.py): what
each promises, read off the rendered text. Integration tests run them through haproxy's and
keepalived's own config checks (tests/integration/test_balancer.py)."""

from __future__ import annotations

from dis_serve.render.balancer import (
    BalancerSettings,
    BalancerTls,
    Replica,
    VrrpSettings,
    haproxy_config,
    haproxy_word,
    keepalived_config,
    keepalived_word,
)
from dis_serve.render.model_ready import model_ready_path

REPLICAS = [Replica(name="frontend-0", host="10.0.0.1", port=8001),
            Replica(name="frontend-1", host="10.0.0.2", port=8002)]


def _balancer(**changes) -> BalancerSettings:
    return BalancerSettings(**{"bind_host": "10.0.0.100", "bind_port": 8000, "floating": True,
                               "model_name": "demo-model", "replicas": REPLICAS,
                               "monitor_socket": "/run/node/balancer.sock",
                               "hold_socket": "/run/node/hold.sock",
                               "hold_script": "/run/node/balancer_hold.lua"} | changes)


def _vrrp(**changes) -> VrrpSettings:
    return VrrpSettings(**{"instance": "dis-serve-demo", "router_id": 51, "interface": "eth0",
                           "address": "10.0.0.1", "peers": ["10.0.0.2"],
                           "floating_address": "10.0.0.100",
                           "monitor_socket": "/run/node/balancer.sock",
                           "bid_file": "/run/node/vrrp-bid", "first": True} | changes)


def test_a_replica_is_healthy_only_when_it_can_route_the_model():
    config = haproxy_config(_balancer())
    assert "option httpchk GET /v1/models/demo-model/ready" in config
    assert "http-check expect status 200" in config


def test_the_health_check_path_escapes_the_model_name():
    assert model_ready_path("org/model 7b") == "/v1/models/org%2Fmodel%207b/ready"


SERVER_CHECK = "check inter 500ms downinter 100ms fall 2 rise 2"


def test_every_replica_is_checked_twice_a_second_and_needs_two_answers_to_come_back():
    config = haproxy_config(_balancer())
    for replica in REPLICAS:
        assert f"server {replica.name} {replica.host}:{replica.port} {SERVER_CHECK} " in config


def test_a_replica_that_is_down_is_checked_ten_times_a_second_and_rises_at_the_usual_pace():
    config = haproxy_config(_balancer())
    for replica in REPLICAS:
        line = next(line for line in config.splitlines()
                    if line.strip().startswith(f"server {replica.name} "))
        assert " downinter 100ms " in line
        assert "fastinter" not in line  # the second of two answers 0.5 s after the first


def test_a_replica_is_marked_down_at_its_first_refused_connection():
    config = haproxy_config(_balancer())
    for replica in REPLICAS:
        assert (f"server {replica.name} {replica.host}:{replica.port} {SERVER_CHECK} "
                "observe layer4 error-limit 1 on-error mark-down") in config


def test_a_request_whose_replica_died_before_answering_goes_to_another():
    config = haproxy_config(_balancer())
    assert "retry-on conn-failure empty-response" in config
    assert "option redispatch 1" in config
    assert "option http-buffer-request" in config  # the whole request, to send it again


def test_streamed_tokens_are_forwarded_without_waiting_to_fill_a_packet():
    assert "option http-no-delay" in haproxy_config(_balancer())


def test_while_no_replica_can_route_requests_are_held_by_the_backup_listener():
    from dis_serve.render.balancer import HOLD_MS

    config = haproxy_config(_balancer())
    assert "lua-load '/run/node/balancer_hold.lua'" in config
    assert "server hold 'unix@/run/node/hold.sock' backup" in config
    hold = config.split("frontend hold\n")[1].split("frontend monitor")[0]
    assert "bind 'unix@/run/node/hold.sock' mode 600" in hold
    assert f"http-request lua.hold_for_replica replicas {HOLD_MS}" in hold
    assert "http-request deny deny_status 503 unless { var(txn.routable) -m bool }" in hold
    assert "default_backend replicas" in hold


def test_the_hold_action_the_config_names_is_the_one_the_script_registers():
    from dis_serve.render.balancer import hold_script_text

    assert 'core.register_action("hold_for_replica", {"http-req"}' in hold_script_text()
    assert 'txn:set_var("txn.routable"' in hold_script_text()


def test_the_floating_address_is_bound_before_this_node_holds_it():
    assert "bind 10.0.0.100:8000 transparent" in haproxy_config(_balancer())
    assert "transparent" not in haproxy_config(_balancer(bind_host="10.0.0.1",
                                                         floating=False))


def test_https_is_terminated_with_the_nodes_certificate_and_spoken_again_to_the_replicas():
    tls = BalancerTls(server_pem="/tls/node-a/balancer.pem", ca_cert="/tls/ca.pem",
                      client_pem="/tls/client-bundle.pem")
    config = haproxy_config(_balancer(tls=tls))
    assert "ssl crt '/tls/node-a/balancer.pem'" in config
    assert ("ssl verify required ca-file '/tls/ca.pem' crt '/tls/client-bundle.pem'"
            in config)
    assert "verify required" not in config.split("frontend api")[1].split("frontend monitor")[0]


def test_client_certificates_are_required_at_the_balancer_when_the_graph_asks_for_them():
    tls = BalancerTls(server_pem="/s.pem", ca_cert="/ca.pem", client_pem="/c.pem",
                      client_ca="/ca.pem")
    assert "ssl crt '/s.pem' ca-file '/ca.pem' verify required" in haproxy_config(
        _balancer(tls=tls))


def test_the_monitor_fails_when_no_replica_can_route():
    config = haproxy_config(_balancer())
    assert "bind 'unix@/run/node/balancer.sock' mode 600" in config
    # Not nbsrv, which counts the backup `hold` server while no replica is up.
    assert ("monitor fail unless { srv_is_up(replicas/frontend-0) } || "
            "{ srv_is_up(replicas/frontend-1) }") in config


def test_haproxy_words_are_single_quoted_so_nothing_in_them_expands():
    assert haproxy_word("/a b/$HOME/it's") == "'/a b/$HOME/it'\\''s'"


def test_every_node_starts_as_a_backup_that_never_preempts():
    config = keepalived_config(_vrrp())
    assert "state BACKUP" in config and "nopreempt" in config


def test_advertisements_go_unicast_to_the_other_frontend_nodes():
    config = keepalived_config(_vrrp(peers=["10.0.0.2", "10.0.0.3"]))
    assert "unicast_src_ip 10.0.0.1" in config
    assert "unicast_peer {\n    10.0.0.2\n    10.0.0.3\n  }" in config


def test_the_floating_address_is_a_host_address_on_the_named_interface():
    assert "10.0.0.100/32 dev ib0" in keepalived_config(_vrrp(interface="ib0"))


def test_a_holder_whose_balancer_cannot_route_is_outbid_by_any_healthy_node():
    from dis_serve.render.balancer import BASE_PRIORITY, MAX_TAKEOVERS, SICK_PENALTY

    config = keepalived_config(_vrrp())
    assert "--unix-socket /run/node/balancer.sock http://balancer/healthz" in config
    assert f"weight -{SICK_PENALTY}" in config
    assert BASE_PRIORITY + MAX_TAKEOVERS - SICK_PENALTY < BASE_PRIORITY


def test_the_agents_bid_raises_the_priority_one_per_takeover():
    config = keepalived_config(_vrrp())
    assert 'file "/run/node/vrrp-bid"\n  weight 1' in config


def test_keepalived_words_escape_quotes_and_backslashes():
    assert keepalived_word('a "b" \\c') == '"a \\"b\\" \\\\c"'


def test_the_first_frontend_node_takes_the_address_and_the_others_join_after():
    from dis_serve.render.balancer import JOIN_DELAY_S

    assert "vrrp_startup_delay" not in keepalived_config(_vrrp(first=True))
    assert f"vrrp_startup_delay {JOIN_DELAY_S}" in keepalived_config(_vrrp(first=False))


def test_the_holder_repeats_its_gratuitous_arp_so_a_stale_holder_is_outshouted():
    assert "vrrp_garp_master_refresh 1" in keepalived_config(_vrrp())
