"""An S3-compatible server on loopback for tests, benchmarks and ``make up`` (issue 13): moto's threaded
server.

:class:`S3Server` runs ``moto.server.ThreadedMotoServer`` bound to 127.0.0.1 on a free port, in a thread of
this process (moto keeps its buckets in memory: they last as long as the process). :meth:`S3Server.environ`
is what a process needs to use it through obstore's ``S3Store`` (``AWS_ENDPOINT``, ``AWS_ALLOW_HTTP``, a
region and dummy credentials: moto checks no signature), :meth:`S3Server.create_bucket` makes a bucket.

    with S3Server() as s3:
        bucket = s3.create_bucket("files")
        os.environ.update(s3.environ)            # DRAGOMAN_STORE_URL=s3://files/prefix then works

moto is a test dependency (``moto[server]`` in the dev extra); importing this module without it raises
:class:`ImportError`.
"""

from __future__ import annotations

import logging
import urllib.request
import uuid

from moto.server import ThreadedMotoServer

__all__ = ["S3Server"]

#: Region and dummy credentials handed to clients (moto accepts any).
REGION = "us-east-1"
ACCESS_KEY_ID = "testing"
SECRET_ACCESS_KEY = "testing"  # noqa: S105 - moto's dummy credential, not a secret


class S3Server:
    """moto's S3 server in a thread, listening on ``host`` (loopback) and a free port."""

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host = host
        self._port = port
        self._server: ThreadedMotoServer | None = None
        self.port = 0

    def start(self) -> S3Server:
        """Starts the server; after a :meth:`stop`, on the same port (moto's buckets live in this process, so
        they are all still there: an S3 outage and its end, for fault tests)."""
        if self._server is None:
            logging.getLogger("werkzeug").setLevel(logging.WARNING)  # not a line per request
            port = self.port or self._port
            server = ThreadedMotoServer(ip_address=self.host, port=port, verbose=False)
            server.start()
            self._server = server
            self.port = int(server.get_host_and_port()[1])
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.stop()
            wsgi = getattr(server, "_server", None)  # shutdown() leaves the socket listening: close it
            if wsgi is not None:
                wsgi.server_close()

    def __enter__(self) -> S3Server:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def environ(self) -> dict[str, str]:
        """The standard AWS variables obstore's ``S3Store`` reads to reach this server."""
        return {
            "AWS_ENDPOINT": self.endpoint,
            "AWS_ALLOW_HTTP": "true",
            "AWS_REGION": REGION,
            "AWS_ACCESS_KEY_ID": ACCESS_KEY_ID,
            "AWS_SECRET_ACCESS_KEY": SECRET_ACCESS_KEY,
        }

    def create_bucket(self, name: str | None = None) -> str:
        """Creates a bucket (a fresh unique name when none is given) and returns its name."""
        bucket = name or f"dragoman-{uuid.uuid4().hex[:12]}"
        request = urllib.request.Request(f"{self.endpoint}/{bucket}", method="PUT")
        with urllib.request.urlopen(request, timeout=10) as answer:  # noqa: S310 - loopback http by design
            answer.read()
        return bucket
