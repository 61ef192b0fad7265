"""moto's S3 API server (``moto_server``) for the tests, with its per-request backend lookup cached.

moto picks the service of every request from its ``Host`` header: for a loopback endpoint
(``127.0.0.1:<port>``) it lists its own package's folders, then tries every service's URL
patterns, twice a request (the host, then the host it infers from the request's signature). In
the object-storage stories that lookup was a quarter of the server's busy time, and the server,
one Python process, was busy 84 % of the story. The answer depends on the host only, so it is
kept per host here. Run as ``python tests/moto_server.py -p PORT`` (``moto_server``'s arguments).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from moto.moto_server import werkzeug_app
from moto.server import main


def cached_per_host(lookup: Callable[[Any, str | None], Any]) -> Callable[[Any, str | None], Any]:
    """``lookup`` (``DomainDispatcherApplication.get_backend_for_host``) answered once per host."""
    known: dict[str | None, Any] = {}

    def get_backend_for_host(self: Any, host: str | None) -> Any:
        if host not in known:
            known[host] = lookup(self, host)
        return known[host]

    return get_backend_for_host


if __name__ == "__main__":
    app = werkzeug_app.DomainDispatcherApplication
    setattr(app, "get_backend_for_host", cached_per_host(app.get_backend_for_host))  # noqa: B010 (a method replaced)
    main(sys.argv[1:])
