"""The local daemon in a thread of this process, on a free loopback port: for tests, benchmarks, examples."""

from __future__ import annotations

import threading
import time

from starlette.types import ASGIApp

from dragoman.server.daemon.app import bind_socket, uvicorn_server


class BackgroundDaemon:
    """The daemon in a thread of this process, on a free loopback port: for tests, benchmarks, examples.

    ``with BackgroundDaemon(app) as daemon: httpx.get(daemon.url + "/health")``.
    """

    def __init__(
        self, app: ASGIApp, *, host: str = "127.0.0.1", port: int = 0, timeout: float = 30.0
    ) -> None:
        self._sock = bind_socket(host, port)
        self.port: int = self._sock.getsockname()[1]
        self.url = f"http://[{host}]:{self.port}" if ":" in host else f"http://{host}:{self.port}"
        self.server = uvicorn_server(app, timeout)
        self._thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self._sock]}, daemon=True)

    def __enter__(self) -> BackgroundDaemon:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the background daemon did not start")
            time.sleep(0.01)
        return self

    def stop(self, timeout: float = 30.0) -> None:
        self.server.should_exit = True
        self._thread.join(timeout)

    def __exit__(self, *exc: object) -> None:
        self.stop()
