"""Call the local daemon over HTTP: one text, a batch, a glossary, and an error, printed as they come back.

    python examples/daemon_client.py                 # finds a running `dragoman serve`, else starts one here
    python examples/daemon_client.py --url http://127.0.0.1:8787 --target es "The house is red."

A running daemon is found through its PID/port file (what `dragoman status` reads). When none runs, the
example starts the daemon in a thread of this process on a free loopback port, so that it works out of the
box. ``SERVICE_SERVE_TOKEN``, when set, is sent as the bearer token.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Iterator

import httpx


@contextlib.contextmanager
def daemon_url(explicit: str | None) -> Iterator[str]:
    if explicit:
        yield explicit.rstrip("/")
        return
    from dragoman.server.daemon.portfile import daemon_status
    from dragoman.settings import Settings

    settings = Settings.from_env()
    status = daemon_status(settings)
    if status["alive"] and status["url"]:
        yield str(status["url"])
        return
    from dragoman.server.daemon.app import create_app
    from dragoman.testing.daemon import BackgroundDaemon
    from dragoman.translation.engine import Engine

    print(
        "no daemon running: starting one in this process (`dragoman serve` runs it for real)", file=sys.stderr
    )
    with Engine(settings) as engine:
        app = create_app(engine, settings, token=os.environ.get("SERVICE_SERVE_TOKEN") or None)
        with BackgroundDaemon(app) as running:
            yield running.url


def show(title: str, response: httpx.Response) -> None:
    print(f"--- {title}: HTTP {response.status_code}")
    print(json.dumps(response.json(), ensure_ascii=False, indent=2))


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("text", nargs="?", default="The house is red. Where is the train station?")
    parser.add_argument("--url", help="daemon base URL (default: the running daemon, else one started here)")
    parser.add_argument("--target", default="es", help="target language, BCP-47 or FLORES-200 (default es)")
    parser.add_argument("--source", help="source language (default: detected)")
    args = parser.parse_args()
    token = os.environ.get("SERVICE_SERVE_TOKEN")
    headers = {"Authorization": f"Bearer {token}"} if token else {}

    with daemon_url(args.url) as url, httpx.Client(base_url=url, headers=headers, timeout=120) as client:
        health = client.get("/health")
        show("GET /health", health)
        if health.status_code != 200:
            return 1
        one = {"text": args.text, "target": args.target}
        if args.source:
            one["source"] = args.source
        show("POST /translate (one text)", client.post("/translate", json=one))
        batch = {"texts": ["Good morning.", "The dog sleeps.", "Thank you very much."], "target": args.target}
        show("POST /translate (batch, results in input order)", client.post("/translate", json=batch))
        glossary = {**one, "glossary": [{"term": "house", "translation": "Haus™", "caseSensitive": False}]}
        show("POST /translate (request glossary)", client.post("/translate", json=glossary))
        show(
            "POST /translate (unknown language: a 400 with a reason)",
            client.post("/translate", json={"text": "Hello", "target": "xx-nowhere"}),
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
