"""The names a local frontend's certificate must carry: the address it binds, or, bound to
every interface, each address and the host name this machine answers to (clients on other
machines reach it by one of those). Reads the machine (psutil, socket): not for renderers."""

from __future__ import annotations

import socket

WILDCARDS = ("0.0.0.0", "::")  # noqa: S104 (names of the wildcard addresses)


def machine_names() -> list[str]:
    """This machine's interface addresses (IPv4 and IPv6, link-local left out: no client
    names a server by one) and its host names."""
    import psutil

    names = []
    for addresses in psutil.net_if_addrs().values():
        for address in addresses:
            if address.family in (socket.AF_INET, socket.AF_INET6) and \
                    not address.address.startswith("fe80"):
                names.append(address.address.split("%", 1)[0])
    names += [socket.gethostname(), socket.getfqdn()]
    return list(dict.fromkeys(name for name in names if name))


def frontend_names(bind_host: str) -> list[str]:
    """What clients may call a frontend bound to `bind_host`."""
    return machine_names() if bind_host in WILDCARDS else [bind_host]
