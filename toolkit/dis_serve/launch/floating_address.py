"""A frontend node's agent's part in the floating address (keepalived does the VRRP).

- Before keepalived (re)starts: the address is taken off the node's interface when the last
  keepalived was killed holding it (a SIGKILLed keepalived leaves it there, and the kernel
  would go on answering ARP for it beside the real holder), and its stale pid files go
  (keepalived refuses to start over them: "daemon is already running").
- While it runs: the takeover bid. keepalived adds the number in the node's bid file to its
  priority; a node that newly holds the address bids one more than any bid it knows, so the
  holder it took over from, waking from a pause that still believes itself the holder, is
  outbid and steps back instead of taking the address back (which would cut every stream
  through the new holder). Each bid is published in the run directory
  (`vrrp-<node>.json`), where the others read it and `status` shows the holder.

The policy (`next_bid`) is pure; `FloatingAddressWatch` does the I/O it decides.
"""

from __future__ import annotations

import contextlib
import errno
import json
import socket
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path

from ..files.atomic_file import write_atomic
from ..files.private_path import PRIVATE_FILE
from ..render.balancer import MAX_TAKEOVERS

POLL_S = 0.2


@dataclass(frozen=True)
class Bid:
    holds: bool
    bid: int


def next_bid(last: Bid, holds_now: bool, others: list[int]) -> Bid:
    """A node that newly holds the address bids one more than any bid it knows, its own
    included (capped at MAX_TAKEOVERS); otherwise its bid stays as it was."""
    if holds_now and not last.holds:
        return Bid(True, min(MAX_TAKEOVERS, max([last.bid, *others]) + 1))
    return Bid(holds_now, last.bid)


def holds_address(address: str) -> bool:
    """Whether `address` is this node's now: only a local address can be bound."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            sock.bind((address, 0))
        except OSError as exc:
            if exc.errno == errno.EADDRNOTAVAIL:
                return False
            raise
    return True


def release_stale_address(address: str, interface: str) -> bool:
    """Take `address` off `interface` if it is still there (before keepalived starts, which
    puts it back only where it wins); whether it was there."""
    if not holds_address(address):
        return False
    subprocess.run(["ip", "addr", "del", f"{address}/32", "dev", interface],
                   capture_output=True, check=False, timeout=10)
    return True


def remove_pid_files(paths: list[Path]) -> None:
    for path in paths:
        path.unlink(missing_ok=True)


def published_bid(run_dir: Path, node: str) -> int:
    try:
        return int(json.loads((run_dir / f"vrrp-{node}.json").read_text())["bid"])
    except (OSError, ValueError, KeyError, TypeError):
        return 0


class FloatingAddressWatch:
    """Follows whether this node holds the address and keeps its bid file and its published
    bid up to date, until `stop`."""

    def __init__(self, *, address: str, node: str, others: list[str], run_dir: Path,
                 bid_file: Path) -> None:
        self.address, self.node, self.others = address, node, others
        self.run_dir, self.bid_file = run_dir, bid_file
        self._stop = threading.Event()
        self._bid = Bid(False, published_bid(run_dir, node))

    def start(self) -> None:
        self._write(self._bid)
        threading.Thread(target=self._run, name="floating-address", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(OSError):
                holds = holds_address(self.address)
                bid = next_bid(self._bid, holds,
                               [published_bid(self.run_dir, n) for n in self.others])
                if bid != self._bid:
                    self._write(bid)
                    self._bid = bid
            self._stop.wait(POLL_S)

    def _write(self, bid: Bid) -> None:
        write_atomic(self.bid_file, f"{bid.bid}\n", PRIVATE_FILE)
        write_atomic(self.run_dir / f"vrrp-{self.node}.json",
                     json.dumps({"node": self.node, "holds": bid.holds, "bid": bid.bid}),
                     PRIVATE_FILE)
