"""The one address in front of the frontends (one, or several replicas): haproxy's
configuration on each node that runs a load balancer, and keepalived's (VRRP) where a
floating address moves between those nodes. Pure: typed settings in, configuration text out.

haproxy (Debian's 2.6) forwards each request to a replica whose health check says it can
route the graph's model (`GET /v1/models/<model>/ready` answers 200 only once every worker
type is attached: a replica that does not know the model yet answers 404 or 503 and gets no
request). A replica is marked down at its first refused connection, not after two failed
checks (`observe layer4`); a request whose connection fails, or whose replica closes without
a response, is sent again (`retry-on conn-failure empty-response`, `option redispatch`;
`option http-buffer-request` keeps the whole request to resend), so a replica's death fails
only the streams it was already answering. While no replica can route (a lone frontend
restarting), requests go to a backup server that is haproxy's own `hold` listener: its Lua
action (balancer_hold.lua) holds each request until a replica is up again and then forwards
it, or answers 503 after HOLD_MS. With TLS the balancer terminates the clients' HTTPS with
its node's certificate (which names the floating address) and speaks HTTPS to the replicas
with the graph's CA and client certificate.

keepalived moves the floating address to another frontend node when its holder stops
advertising (VRRPv3, unicast to the other frontend nodes: many sites block multicast) or its
load balancer cannot route (its `monitor` answers 503 when no replica is up). The node's agent
writes a bid into a file keepalived follows (`track_file`): each new holder outbids the one
it took over from, so a holder that was only paused does not take the address back when it
wakes (which would cut every stream through the new holder).
"""

from __future__ import annotations

from importlib import resources

from pydantic import BaseModel, ConfigDict, Field

from .model_ready import model_ready_path

# VRRP advertisements every second: a lost holder is replaced after three silent intervals
# (and its skew), about 3 s; measured on the test bed in docs/multi-node.md.
ADVERT_INTERVAL_S = 1
# The holder repeats its gratuitous ARP every second: a node that held the address and was
# not shut down cleanly (keepalived killed on a live machine, a paused one) still answers
# ARP for it, and a client that asked at the wrong moment is set right within a second.
GARP_REFRESH_S = 1
# The other frontend nodes start taking part this long after the first, which therefore
# holds the address from the start (where to look; the head's loss is the full failover).
JOIN_DELAY_S = 3
# The bid: base priority plus the holder's takeover count (capped), minus this when its load
# balancer cannot route, so that a healthy node always outbids a sick holder.
BASE_PRIORITY = 100
MAX_TAKEOVERS = 100
SICK_PENALTY = 110
# What the health checks allow a replica: a check every half second, down after two failures,
# up after two successes. A replica that is down is checked ten times a second, so its first
# 200 is seen within 0.1 s rather than 0.5 s; the second still comes 0.5 s later (haproxy's
# fastinter, unset, is `inter`), past Dynamo's prefill router activation (docs/running.md).
CHECK_INTERVAL_MS = 500
DOWN_CHECK_INTERVAL_MS = 100
CHECK_TIMEOUT_S = 1
# A stream may go quiet this long (a long prefill) before the balancer gives up on it.
STREAM_IDLE_TIMEOUT = "10m"
# While no replica can route, a request waits this long for one before it is answered 503:
# longer than a frontend's restart (supervisor backoff, Dynamo's start, model discovery and
# two passed checks; measured in docs/running.md).
HOLD_MS = 10_000
# The Lua action that holds requests (shipped beside this module, copied into the run
# directory where haproxy loads it: hold_script_name), and the backend's backup server that
# runs it.
HOLD_SCRIPT = "balancer_hold.lua"
HOLD_SERVER = "hold"
BACKEND = "replicas"
# In the node's own data directory (node-local, private): the monitor keepalived and the
# agent's probe ask, keepalived's pid files, and the agent's bid.
MONITOR_SOCKET = "balancer.sock"
# Beside it, the `hold` listener's socket (private like the monitor's: only haproxy itself
# connects to it).
HOLD_SOCKET = "hold.sock"
VRRP_PID_FILES = ("keepalived.pid", "keepalived-vrrp.pid")
BID_FILE = "vrrp-bid"
MONITOR_URL = "http://balancer/healthz"


def balancer_config_name(node: str) -> str:
    """haproxy's config of `node`, in the run directory (written by its agent at start)."""
    return f"balancer-{node}.cfg"


def hold_script_name(node: str) -> str:
    """The hold's Lua as `node`'s balancer loads it, in the run directory beside its config
    (written by its agent at start)."""
    return f"balancer-{node}.lua"


def vrrp_config_name(node: str) -> str:
    """keepalived's config of `node`, in the run directory (written by its agent)."""
    return f"vrrp-{node}.conf"


class Replica(BaseModel):
    """A frontend replica behind the balancer."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    name: str
    host: str
    port: int


class BalancerTls(BaseModel):
    """What an HTTPS balancer reads: its own certificate and key in one PEM (haproxy's
    format), the CA its replicas' certificates chain to, the graph's client certificate and
    key in one PEM for the replicas that ask for one, and the CA clients' certificates must
    chain to when the graph asks clients for one."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    server_pem: str
    ca_cert: str
    client_pem: str
    client_ca: str | None = None


class BalancerSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    bind_host: str = Field(description="Address clients connect to (the floating address, "
                                       "a node's address, or loopback).")
    bind_port: int
    floating: bool = Field(description="The bind address is the floating one, which this "
                                       "node may not hold yet (bound anyway).")
    model_name: str
    replicas: list[Replica]
    monitor_socket: str = Field(description="Unix socket of the `monitor` keepalived asks, "
                                            "relative to haproxy's directory (`-C`).")
    hold_socket: str = Field(description="Unix socket of the `hold` listener (the backup "
                                         "server while no replica can route), relative to "
                                         "haproxy's directory.")
    hold_script: str = Field(description="The hold's Lua file (hold_script_text) as haproxy "
                                         "loads it (absolute, or relative to its directory).")
    tls: BalancerTls | None = None


def haproxy_word(value: str) -> str:
    """One haproxy configuration word: single-quoted (no variable expansion), a quote in it
    written outside the quotes."""
    return "'" + value.replace("'", "'\\''") + "'"


def _bind_line(settings: BalancerSettings) -> str:
    words = [f"bind {settings.bind_host}:{settings.bind_port}"]
    if settings.floating:
        words.append("transparent")  # IP_FREEBIND: listen before the address is ours
    tls = settings.tls
    if tls is not None:
        words += ["ssl", "crt", haproxy_word(tls.server_pem)]
        if tls.client_ca is not None:
            words += ["ca-file", haproxy_word(tls.client_ca), "verify", "required"]
    return "  " + " ".join(words)


def hold_script_text() -> str:
    """The Lua the balancer loads (a file of this package, not rendered: it takes the
    backend and the hold time as the action's arguments)."""
    return resources.files(__package__).joinpath(HOLD_SCRIPT).read_text()


def _server_line(replica: Replica, tls: BalancerTls | None) -> str:
    # `observe layer4`: a refused connection marks the replica down at once, so the next
    # request is held instead of refused again until two checks have failed.
    words = [f"server {replica.name} {replica.host}:{replica.port}",
             f"check inter {CHECK_INTERVAL_MS}ms downinter {DOWN_CHECK_INTERVAL_MS}ms "
             "fall 2 rise 2",
             "observe layer4 error-limit 1 on-error mark-down"]
    if tls is not None:
        words += ["ssl verify required", "ca-file", haproxy_word(tls.ca_cert),
                  "crt", haproxy_word(tls.client_pem)]
    return "  " + " ".join(words)


def _any_replica_up(settings: BalancerSettings) -> str:
    # srv_is_up, not nbsrv: nbsrv counts the backup `hold` server when no replica is up.
    return " || ".join(f"{{ srv_is_up({BACKEND}/{replica.name}) }}"
                       for replica in settings.replicas)


def haproxy_config(settings: BalancerSettings) -> str:
    """haproxy.cfg for one node's balancer (run as `haproxy -W -db -f FILE`)."""
    # `unix@`: a Unix socket even where the path is relative (haproxy's directory, -C).
    hold = haproxy_word("unix@" + settings.hold_socket)
    lines = [
        "# Generated by dis-serve (render/balancer.py): the load balancer in front of the "
        "frontends.",
        "global",
        "  maxconn 4096",
        f"  lua-load {haproxy_word(settings.hold_script)}",
        "defaults",
        "  mode http",
        "  timeout connect 1s",
        f"  timeout check {CHECK_TIMEOUT_S}s",
        "  timeout http-request 30s",
        f"  timeout client {STREAM_IDLE_TIMEOUT}",
        f"  timeout server {STREAM_IDLE_TIMEOUT}",
        "  retries 3",
        "  option redispatch 1",
        "  retry-on conn-failure empty-response",
        # The whole request is kept, so a retry can send it again.
        "  option http-buffer-request",
        # Each streamed token goes out as it comes (no Nagle wait for a fuller packet).
        "  option http-no-delay",
        "frontend api",
        _bind_line(settings),
        f"  default_backend {BACKEND}",
        "frontend hold",
        f"  bind {hold} mode 600",
        f"  http-request lua.hold_for_replica {BACKEND} {HOLD_MS}",
        "  http-request deny deny_status 503 unless { var(txn.routable) -m bool }",
        f"  default_backend {BACKEND}",
        "frontend monitor",
        f"  bind {haproxy_word('unix@' + settings.monitor_socket)} mode 600",
        "  monitor-uri /healthz",
        f"  monitor fail unless {_any_replica_up(settings)}",
        f"backend {BACKEND}",
        "  balance leastconn",
        f"  option httpchk GET {model_ready_path(settings.model_name)}",
        "  http-check expect status 200",
        *(_server_line(replica, settings.tls) for replica in settings.replicas),
        f"  server {HOLD_SERVER} {hold} backup",
        "",
    ]
    return "\n".join(lines)


class VrrpSettings(BaseModel):
    """One frontend node's share of the floating address."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    instance: str = Field(description="VRRP instance name (the graph's).")
    router_id: int
    interface: str
    address: str = Field(description="This node's own address on `interface`.")
    peers: list[str] = Field(description="The other frontend nodes' addresses.")
    floating_address: str
    monitor_socket: str = Field(description="The local balancer's monitor (haproxy_config).")
    bid_file: str = Field(description="The file the node's agent writes its takeover count "
                                      "into (an integer keepalived adds to the priority).")
    first: bool = Field(description="The first frontend node (the head): it takes the address "
                                    "when the graph starts, the others join a moment later.")
    curl: str = "/usr/bin/curl"


def keepalived_word(value: str) -> str:
    """A keepalived string: double-quoted, backslashes and quotes escaped."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def keepalived_config(settings: VrrpSettings) -> str:
    """keepalived.conf for one frontend node (run as `keepalived -n -l --vrrp -f FILE`):
    every node starts as a backup that never preempts; the holder is whoever outbids."""
    check = (f"{settings.curl} -sf -m {CHECK_TIMEOUT_S} -o /dev/null --unix-socket "
             f"{settings.monitor_socket} http://balancer/healthz")
    lines = [
        "# Generated by dis-serve (render/balancer.py): the floating address of the frontend "
        "replicas.",
        "global_defs {",
        f"  router_id {settings.instance}",
        "  vrrp_version 3",
        f"  vrrp_garp_master_refresh {GARP_REFRESH_S}",
        *([] if settings.first else [f"  vrrp_startup_delay {JOIN_DELAY_S}"]),
        "  enable_script_security",
        "  script_user root",
        "}",
        "vrrp_script balancer_routes {",
        f"  script {keepalived_word(check)}",
        "  interval 1",
        f"  timeout {CHECK_TIMEOUT_S + 1}",
        "  fall 2",
        "  rise 1",
        f"  weight -{SICK_PENALTY}",
        "}",
        "track_file takeovers {",
        f"  file {keepalived_word(settings.bid_file)}",
        "  weight 1",
        "  init_file 0",
        "}",
        f"vrrp_instance {settings.instance} {{",
        "  state BACKUP",
        "  nopreempt",
        f"  interface {settings.interface}",
        f"  virtual_router_id {settings.router_id}",
        f"  priority {BASE_PRIORITY}",
        f"  advert_int {ADVERT_INTERVAL_S}",
        f"  unicast_src_ip {settings.address}",
        "  unicast_peer {",
        *(f"    {peer}" for peer in settings.peers),
        "  }",
        "  virtual_ipaddress {",
        f"    {settings.floating_address}/32 dev {settings.interface}",
        "  }",
        "  track_script {",
        "    balancer_routes",
        "  }",
        "  track_file {",
        "    takeovers",
        "  }",
        "}",
        "",
    ]
    return "\n".join(lines)
