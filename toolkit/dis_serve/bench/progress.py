"""Live progress of a sweep point, for the progress bar.

AIPerf prints no per-request progress when it runs without its own UI, so the count of
finished requests comes from the Dynamo frontend's `dynamo_frontend_requests_total`
counter (read once a second, the lines of one metric family only). Against a server that
has no such counter the bar shows elapsed time and AIPerf's phases instead.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from ..security.http_client import direct_client
from .metrics import PointResult
from .scenario import SweepPoint

if TYPE_CHECKING:
    from ..security.pki_files import EndpointTls

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
    """Sum of every series of the frontend's finished-requests counter; None if absent (or
    the text is not Prometheus' exposition format)."""
    from prometheus_client.parser import text_string_to_metric_families

    try:
        values = [sample.value for family in text_string_to_metric_families(text)
                  for sample in family.samples if sample.name == REQUESTS_COUNTER]
    except ValueError:
        return None
    return int(sum(values)) if values else None


class FrontendRequestCounter:
    """Requests the frontend has finished since this counter was made."""

    def __init__(self, url: str, timeout_s: float = 1.0,
                 tls: EndpointTls | None = None) -> None:
        self._client = direct_client(timeout_s, tls=tls)
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
