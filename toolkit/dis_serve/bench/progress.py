"""Live progress of a sweep point, for the progress bar.

AIPerf prints no per-request progress when it runs without its own UI, so the count of
finished requests comes from the Dynamo frontend's `dynamo_frontend_requests_total`
counter (read once a second, the lines of one metric family only). Against a server that
has no such counter the bar shows elapsed time and AIPerf's phases instead.
"""

from __future__ import annotations

from typing import Protocol

from .metrics import PointResult
from .scenario import SweepPoint

REQUESTS_COUNTER = "dynamo_frontend_requests_total"


class SweepObserver(Protocol):
    """What the sweep tells whoever shows its progress (the CLI draws Rich bars)."""

    def point_reused(self, point: SweepPoint, result: PointResult) -> None: ...

    def point_started(self, point: SweepPoint, expected_requests: int | None,
                      duration_s: float | None) -> None: ...

    def point_phase(self, point: SweepPoint, phase: str, event: str) -> None: ...

    def point_tick(self, point: SweepPoint, elapsed_s: float,
                   finished_requests: int | None) -> None: ...

    def point_finished(self, point: SweepPoint, result: PointResult) -> None: ...

    def point_failed(self, point: SweepPoint) -> None: ...


class SilentObserver:
    def point_reused(self, point: SweepPoint, result: PointResult) -> None:
        pass

    def point_started(self, point: SweepPoint, expected_requests: int | None,
                      duration_s: float | None) -> None:
        pass

    def point_phase(self, point: SweepPoint, phase: str, event: str) -> None:
        pass

    def point_tick(self, point: SweepPoint, elapsed_s: float,
                   finished_requests: int | None) -> None:
        pass

    def point_finished(self, point: SweepPoint, result: PointResult) -> None:
        pass

    def point_failed(self, point: SweepPoint) -> None:
        pass


def parse_request_count(text: str) -> int | None:
    """Sum of every series of the frontend's finished-requests counter; None if absent."""
    total = 0.0
    seen = False
    for line in text.splitlines():
        if not line.startswith(REQUESTS_COUNTER):
            continue
        rest = line[len(REQUESTS_COUNTER):]
        if rest[:1] not in ("{", " "):
            continue  # another metric whose name merely starts the same way
        try:
            total += float(rest.rsplit(" ", 1)[-1])
        except ValueError:
            continue
        seen = True
    return int(total) if seen else None


class FrontendRequestCounter:
    """Requests the frontend has finished since this counter was made."""

    def __init__(self, url: str, timeout_s: float = 1.0) -> None:
        import httpx

        self._client = httpx.Client(timeout=timeout_s, trust_env=False)
        self._url = f"{url.rstrip('/')}/metrics"
        self._start = self._read()

    def _read(self) -> int | None:
        import httpx

        try:
            response = self._client.get(self._url)
        except httpx.HTTPError:
            return None
        return parse_request_count(response.text) if response.status_code == 200 else None

    def finished(self) -> int | None:
        now = self._read()
        if now is None or self._start is None:
            return None
        return max(0, now - self._start)

    def close(self) -> None:
        self._client.close()
