"""A client of the hosted service (v1): a job, polling, a cancel, a document's exports and a signed webhook.

    python examples/hosted_client.py --start     # starts `dragoman hosted serve` here, stops it at the end
    python examples/hosted_client.py --url https://translate.example --key svc_live_... \\
        --webhook-secret whsec_...               # a running service (or the environment, below)

Steps, one line each on stdout:

1. ``POST /api/v1/translate`` with a text of more than 500 characters: a 202 and a job. The request names a
   webhook on a tiny HTTP receiver of this process (a thread on loopback), so that the job's ``job.done``
   event comes back to us.
2. Poll ``GET /api/v1/jobs/{id}`` every 2 s (longer when the answer has a ``Retry-After``), showing the
   progress, until the job is done; print the start of the translation.
3. Create a second job (a long text) and cancel it at once with ``DELETE``: its credits are refunded.
4. Upload a DOCX (made here with python-docx) as a document job, poll it, and download its DOCX and PDF
   exports (into a temporary directory; their sizes and magic bytes are printed).
5. Wait for the webhook and check it with :func:`dragoman.webhooks.verify` and the key's webhook secret.

The service must be able to reach the receiver: on a remote service give ``--receiver-host`` an address it
can reach, or leave out the secret (step 5 is then skipped). ``--start`` runs the service in a subprocess
with its data in a temporary directory (``DRAGOMAN_HOSTED_DIR``), webhooks to loopback allowed
(``DRAGOMAN_WEBHOOKS_ALLOW_PRIVATE=1``), and an account and key made with the admin CLI (``dragoman hosted
accounts create --json``, ``dragoman hosted keys create --json``). It translates English -> Spanish on the
embedded default, Apertium (``apt-get install apertium apertium-eng-spa``), with no model pack read from
your own directories.

Environment: ``DRAGOMAN_HOSTED_URL``, ``DRAGOMAN_API_KEY`` and ``DRAGOMAN_WEBHOOK_SECRET`` stand in for the
options. Exit status 0 when every step did what it should.
"""

from __future__ import annotations

import argparse
import contextlib
import http.server
import io
import json
import os
import queue
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

POLL_SECONDS = 2.0
#: Seconds a job may take before the client gives up on it.
JOB_DEADLINE = 300.0

PARAGRAPH = (
    "The old lighthouse stands at the end of the harbour, where the fishing boats come home in the evening. "
    "Every night the keeper climbs the narrow stairs, cleans the lamp and watches the sea until morning. "
    "In winter the storms are long and the waves break over the wall, but the light has never gone out. "
)


def say(step: str, text: str) -> None:
    print(f"[{step}] {text}", flush=True)


# ----- the webhook receiver ------------------------------------------------------------------------------
class Receiver:
    """A tiny HTTP server on a thread: every POST's raw body and headers go into :attr:`received`."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        received: queue.Queue[tuple[bytes, dict[str, str]]] = queue.Queue()
        self.received = received

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                received.put((body, dict(self.headers.items())))
                self.send_response(204)
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

        self.server = http.server.ThreadingHTTPServer((host, 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}/hook"

    def __enter__(self) -> Receiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


# ----- a service started here (--start) ------------------------------------------------------------------
@dataclass
class Started:
    url: str
    key: str
    webhook_secret: str


def _cli(env: dict[str, str], *args: str) -> Any:
    done = subprocess.run(
        [sys.executable, "-m", "dragoman.cli", "hosted", *args, "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if done.returncode != 0:
        raise SystemExit(f"dragoman hosted {' '.join(args)} failed: {done.stderr.strip()[-500:]}")
    return json.loads(done.stdout)


@contextlib.contextmanager
def started_service() -> Iterator[Started]:
    """``dragoman hosted serve --port 0`` in a subprocess over a temporary data directory, with an account
    and a key made by the admin CLI; stopped (SIGTERM) and its directory removed at the end."""
    tmp = Path(tempfile.mkdtemp(prefix="dragoman-hosted-demo-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("DRAGOMAN_")}
    env.update(
        DRAGOMAN_HOSTED_DIR=str(tmp / "hosted"),
        DRAGOMAN_WEBHOOKS_ALLOW_PRIVATE="1",
        DRAGOMAN_PACKS_DIR=str(tmp / "packs"),  # the embedded default only: Apertium, no user pack
        DRAGOMAN_GLOSSARY=str(tmp / "glossary.json"),
        DRAGOMAN_STATE_DIR=str(tmp / "state"),
    )
    try:
        account = _cli(env, "accounts", "create", "--name", "hosted_client demo", "--credits", "1000000")
        made = _cli(env, "keys", "create", "--account", account["account_id"], "--name", "demo")
        say(
            "start",
            f"account {account['account_id']} with {account['balance']:,} credits, key {made['key_id']}",
        )
        proc = subprocess.Popen(
            [sys.executable, "-m", "dragoman.cli", "hosted", "serve", "--port", "0"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        found: queue.Queue[str] = queue.Queue()
        tail: list[str] = []

        def drain() -> None:  # read stderr to its end (a full pipe would block the service)
            assert proc.stderr is not None
            for line in proc.stderr:
                tail[:] = [*tail[-40:], line]
                match = re.search(r"dragoman hosted service on (http://\S+)", line)
                if match:
                    found.put(match.group(1))

        threading.Thread(target=drain, daemon=True).start()
        try:
            try:
                url = found.get(timeout=120)
            except queue.Empty:
                raise SystemExit("the hosted service did not start:\n" + "".join(tail)) from None
            say("start", f"dragoman hosted serve (pid {proc.pid}) on {url}, data in {tmp / 'hosted'}")
            yield Started(url, made["key"], made["webhook_secret"])
        finally:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
            say("stop", f"service stopped (exit {proc.returncode})")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# ----- the client ----------------------------------------------------------------------------------------
def poll(client: httpx.Client, url: str, step: str) -> dict[str, Any]:
    """GET the job every 2 s (or as long as Retry-After says) until it is terminal; its last answer."""
    deadline = time.monotonic() + JOB_DEADLINE
    shown = -1
    while True:
        answer = client.get(url)
        if answer.status_code == 429:  # the rate limit: wait as long as the service says
            wait = float(answer.headers.get("Retry-After", POLL_SECONDS))
            say(step, f"rate limited: waiting {wait:g} s (Retry-After)")
            time.sleep(wait)
            continue
        answer.raise_for_status()
        job: dict[str, Any] = answer.json()
        if job["progress_percent"] != shown or job["status"] not in ("queued", "active"):
            shown = job["progress_percent"]
            say(step, f"job {job['job_id']}: {job['status']}, {shown}%, {job['elapsed_seconds']:.1f} s")
        if job["status"] not in ("queued", "active"):
            return job
        if time.monotonic() > deadline:
            raise SystemExit(f"job {job['job_id']} not done after {JOB_DEADLINE:g} s")
        time.sleep(max(POLL_SECONDS, float(answer.headers.get("Retry-After", 0) or 0)))


def make_docx() -> bytes:
    from docx import Document

    doc = Document()
    doc.add_heading("The lighthouse keeper", level=1)
    doc.add_paragraph(PARAGRAPH)
    doc.add_paragraph("The harbour is quiet in the morning. The boats are ready and the sky is clear.")
    table = doc.add_table(rows=2, cols=2)
    for row, (left, right) in zip(table.rows, [("Day", "Weather"), ("Monday", "Rain and wind")], strict=True):
        row.cells[0].text, row.cells[1].text = left, right
    out = io.BytesIO()
    doc.save(out)
    return out.getvalue()


def run(url: str, key: str, secret: str | None, receiver_host: str, source: str, target: str) -> int:
    failures = 0
    headers = {"Authorization": f"Bearer {key}"}
    with contextlib.ExitStack() as stack:
        client = stack.enter_context(httpx.Client(base_url=url, headers=headers, timeout=120))
        receiver = stack.enter_context(Receiver(receiver_host)) if secret else None

        # 1. a text over 500 characters: a job
        text = PARAGRAPH * 8
        body: dict[str, Any] = {"text": text, "src": source, "tgt": target, "title": "lighthouse"}
        if receiver is not None:
            body["webhook"] = receiver.url
        created = client.post("/api/v1/translate", json=body)
        if created.status_code != 202:
            say("create", f"expected 202, got HTTP {created.status_code}: {created.text[:300]}")
            return 1
        job = created.json()
        say(
            "create",
            f"HTTP 202: job {job['job_id']} {job['status']}, {len(text):,} characters, "
            f"{job['credits_reserved']} credits reserved"
            + (f", webhook {receiver.url}" if receiver is not None else ""),
        )

        # 2. poll until done
        done = poll(client, job["poll_url"], "poll")
        if done["status"] == "done":
            say("result", f"{done['credits']} credits charged: {done['result'][:90]!r}...")
        else:
            failures += 1
            say("result", f"the job ended {done['status']}: {done.get('error')}")

        # 3. a second job, canceled at once
        long_text = PARAGRAPH * 1500
        second = client.post("/api/v1/translate", json={"text": long_text, "src": source, "tgt": target})
        second.raise_for_status()
        job2 = second.json()
        say(
            "cancel",
            f"job {job2['job_id']} created ({len(long_text):,} characters, "
            f"{job2['credits_reserved']} credits reserved)",
        )
        canceled = client.delete(f"/api/v1/jobs/{job2['job_id']}")
        if canceled.status_code == 200:
            info = canceled.json()
            say(
                "cancel",
                f"HTTP 200: job {info['job_id']} {info['status']}, "
                f"credits_refunded {info['credits_refunded']}",
            )
        else:
            failures += 1
            say("cancel", f"HTTP {canceled.status_code}: {canceled.text[:300]}")

        # 4. a document job and its exports
        docx = make_docx()
        uploaded = client.post(
            "/api/v1/translate",
            data={"src": source, "tgt": target},
            files={
                "file": (
                    "lighthouse.docx",
                    docx,
                    "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
                )
            },
        )
        if uploaded.status_code != 202:
            say("document", f"expected 202, got HTTP {uploaded.status_code}: {uploaded.text[:300]}")
            return 1
        doc_job = uploaded.json()
        say("document", f"HTTP 202: uploaded lighthouse.docx ({len(docx):,} bytes), job {doc_job['job_id']}")
        doc_done = poll(client, doc_job["poll_url"], "document")
        if doc_done["status"] != "done":
            failures += 1
        out_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="dragoman-exports-")))
        for fmt, magic in (("docx", b"PK"), ("pdf", b"%PDF")):
            link = doc_done.get(f"export_{fmt}")
            if not link:
                failures += 1
                say("export", f"no {fmt} export in the job")
                continue
            got = client.get(link)
            disposition = got.headers.get("Content-Disposition", "")
            name = re.search(r'filename="([^"]+)"', disposition)
            path = out_dir / (name.group(1) if name else f"export.{fmt}")
            path.write_bytes(got.content)
            ok = got.status_code == 200 and got.content.startswith(magic)
            failures += not ok
            say(
                "export",
                f"{fmt}: HTTP {got.status_code}, {got.headers.get('Content-Type')}, "
                f"{len(got.content):,} bytes, {path.name} ({'ok' if ok else 'NOT a ' + fmt})",
            )

        # 5. the webhook, verified
        if receiver is None or secret is None:
            say("webhook", "skipped (no webhook secret: --webhook-secret or DRAGOMAN_WEBHOOK_SECRET)")
        else:
            from dragoman.errors import WebhookVerificationError
            from dragoman.webhooks import verify

            try:
                raw, received_headers = receiver.received.get(timeout=60)
            except queue.Empty:
                failures += 1
                say("webhook", "no delivery within 60 s")
            else:
                try:
                    event = verify(raw, received_headers, secret)
                except WebhookVerificationError as exc:
                    failures += 1
                    say("webhook", f"REJECTED: {exc}")
                else:
                    say(
                        "webhook",
                        f"{event.get('event', event.get('type'))} for job {event.get('job_id')} "
                        f"(event {received_headers.get('webhook-id')}): signature verified",
                    )
    say("done", "every step ok" if not failures else f"{failures} step(s) failed")
    return 1 if failures else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", default=os.environ.get("DRAGOMAN_HOSTED_URL"), help="the service's base URL")
    parser.add_argument("--key", default=os.environ.get("DRAGOMAN_API_KEY"), help="an API key (svc_live_…)")
    parser.add_argument(
        "--webhook-secret",
        default=os.environ.get("DRAGOMAN_WEBHOOK_SECRET"),
        help="the key's webhook secret (whsec_…): step 5 is skipped without it",
    )
    parser.add_argument(
        "--receiver-host", default="127.0.0.1", help="address the webhook receiver listens on"
    )
    parser.add_argument("--start", action="store_true", help="start a service here (temporary, Apertium)")
    parser.add_argument("--source", default="en", help="source language (default en)")
    parser.add_argument("--target", default="es", help="target language (default es)")
    args = parser.parse_args(argv)
    if args.start:
        if shutil.which("lt-proc") is None:
            print(
                "Apertium is not installed: run `make demo` as root on Debian, or `apt-get install apertium "
                "apertium-eng-spa`, then try again.",
                file=sys.stderr,
            )
            return 1
        with started_service() as service:
            return run(
                service.url, service.key, service.webhook_secret, "127.0.0.1", args.source, args.target
            )
    if not args.url or not args.key:
        parser.error("give --url and --key (or DRAGOMAN_HOSTED_URL and DRAGOMAN_API_KEY), or --start")
    return run(
        args.url.rstrip("/"), args.key, args.webhook_secret, args.receiver_host, args.source, args.target
    )


if __name__ == "__main__":
    sys.exit(main())
