"""URLs a user gives (a frontend to benchmark or watch, an etcd or NATS to inspect), checked
where a request model reads them: as field types whose errors name the field."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated
from urllib.parse import urlsplit

from pydantic import AfterValidator

from .options import OptionProblem


def frontend_url(url: str) -> str:
    """A frontend's base URL, http(s)://HOST[:PORT], without a trailing slash."""
    fix = "give the frontend's base URL, e.g. http://127.0.0.1:8000"
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise OptionProblem(f"{url!r} is not a URL ({exc})", fix=fix) from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise OptionProblem(f"{url!r} is not an http(s) URL with a host", fix=fix)
    if port == 0 or parts.query or parts.fragment or parts.path.strip("/"):
        raise OptionProblem(f"{url!r} is not a frontend's base URL (no port 0, path, query "
                            "or fragment)", fix=fix)
    return url.rstrip("/")


def scheme_check(*schemes: str) -> Callable[[str], str]:
    """A check that a URL starts with one of `schemes`."""
    def check(url: str) -> str:
        if not url.startswith(tuple(f"{s}://" for s in schemes)):
            raise OptionProblem(f"{url!r} is not a {'/'.join(schemes)}:// URL",
                                fix=f"give {schemes[0]}://HOST:PORT")
        return url
    return check


FrontendUrl = Annotated[str, AfterValidator(frontend_url)]
HttpUrl = Annotated[str, AfterValidator(scheme_check("http", "https"))]
NatsUrl = Annotated[str, AfterValidator(scheme_check("nats", "tls"))]
