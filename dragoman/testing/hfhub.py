"""A loopback server answering the Hugging Face Hub's API for tests (issue 17): model info with file
metadata, and ``resolve`` downloads with the headers huggingface_hub reads (``ETag``/``X-Linked-Etag``,
``X-Linked-Size``, ``X-Repo-Commit``), ranges included, so a download cut short resumes.

Repos are dicts of file name -> bytes, published at a commit (a made-up 40-hex id) under the branch
``main``. Knobs make it misbehave the ways a test needs: ``declared_sizes`` lies about sizes in the API,
``truncate_once`` cuts a file's first body short, ``names`` may hold unsafe file names. Every request is
recorded in ``requests`` (method, path, Range header).
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from dragoman.testing.tinypack import build_argos_pack

#: Files at least this large are published as LFS files (sha256 ETag), as the hub does for weights.
LFS_FROM = 1024


def git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


@dataclass
class Repo:
    files: dict[str, bytes]
    commit: str = "0123456789abcdef0123456789abcdef01234567"
    branches: tuple[str, ...] = ("main",)
    declared_sizes: dict[str, int] = field(default_factory=dict)
    truncate_once: set[str] = field(default_factory=set)
    declared_sha256: dict[str, str] = field(default_factory=dict)

    def is_lfs(self, name: str) -> bool:
        return len(self.files[name]) >= LFS_FROM

    def etag(self, name: str) -> str:
        data = self.files[name]
        return hashlib.sha256(data).hexdigest() if self.is_lfs(name) else git_blob_id(data)

    def sibling(self, name: str) -> dict[str, Any]:
        data = self.files[name]
        size = self.declared_sizes.get(name, len(data))
        entry: dict[str, Any] = {"rfilename": name, "size": size, "blobId": git_blob_id(data)}
        if self.is_lfs(name):
            sha = self.declared_sha256.get(name, hashlib.sha256(data).hexdigest())
            entry["lfs"] = {"sha256": sha, "size": size, "pointerSize": 130}
        return entry


@dataclass
class Hub:
    repos: dict[str, Repo] = field(default_factory=dict)
    requests: list[tuple[str, str, str]] = field(default_factory=list)
    url: str = ""

    def revision(self, repo: Repo, name: str) -> bool:
        return name in repo.branches or name == repo.commit


def _handler(hub: Hub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            return None

        def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
            self.send_response(status)
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _error(self, status: int, code: str, message: str) -> None:
            self._send(
                status,
                json.dumps({"error": message}).encode(),
                {"Content-Type": "application/json", "X-Error-Code": code, "X-Error-Message": message},
            )

        def do_HEAD(self) -> None:
            self._serve()

        def do_GET(self) -> None:
            self._serve()

        def _serve(self) -> None:
            path = unquote(urlparse(self.path).path)
            hub.requests.append((self.command, path, self.headers.get("Range", "")))
            parts = path.strip("/").split("/")
            if parts[:2] == ["api", "models"] and len(parts) >= 4:
                self._info(parts)
            elif len(parts) >= 5 and parts[2] == "resolve":
                self._resolve("/".join(parts[:2]), parts[3], "/".join(parts[4:]))
            else:
                self._error(404, "EntryNotFound", f"no route {path}")

        def _info(self, parts: list[str]) -> None:
            name = "/".join(parts[2:4])
            repo = hub.repos.get(name)
            if repo is None:
                self._error(401, "RepoNotFound", f"Repository {name} not found")
                return
            if len(parts) > 5 and parts[4] == "tree":
                self._tree(repo, parts[5])
                return
            revision = "/".join(parts[5:]) if len(parts) > 5 and parts[4] == "revision" else "main"
            if not hub.revision(repo, revision):
                self._error(404, "RevisionNotFound", f"Invalid rev id: {revision}")
                return
            body = {
                "id": name,
                "modelId": name,
                "sha": repo.commit,
                "private": False,
                "siblings": [repo.sibling(n) for n in sorted(repo.files)],
            }
            self._send(200, json.dumps(body).encode(), {"Content-Type": "application/json"})

        def _tree(self, repo: Repo, revision: str) -> None:
            if not hub.revision(repo, revision):
                self._error(404, "RevisionNotFound", f"Invalid rev id: {revision}")
                return
            entries = []
            for name in sorted(repo.files):
                sib = repo.sibling(name)
                entry: dict[str, Any] = {
                    "type": "file",
                    "path": name,
                    "size": sib["size"],
                    "oid": sib["blobId"],
                }
                if "lfs" in sib:
                    lfs = sib["lfs"]
                    entry["lfs"] = {"oid": lfs["sha256"], "size": lfs["size"], "pointerSize": 130}
                entries.append(entry)
            self._send(200, json.dumps(entries).encode(), {"Content-Type": "application/json"})

        def _resolve(self, name: str, revision: str, file: str) -> None:
            repo = hub.repos.get(name)
            if repo is None:
                self._error(401, "RepoNotFound", f"Repository {name} not found")
                return
            if not hub.revision(repo, revision):
                self._error(404, "RevisionNotFound", f"Invalid rev id: {revision}")
                return
            if file not in repo.files:
                self._error(404, "EntryNotFound", f"{file} does not exist")
                return
            data = repo.files[file]
            etag = f'"{repo.etag(file)}"'
            headers = {"ETag": etag, "X-Repo-Commit": repo.commit, "Accept-Ranges": "bytes"}
            if repo.is_lfs(file):
                headers["X-Linked-Etag"] = etag
                headers["X-Linked-Size"] = str(len(data))
            start = 0
            ranged = self.headers.get("Range", "")
            if ranged.startswith("bytes=") and self.command == "GET":
                start = int(ranged[len("bytes=") :].split("-")[0] or 0)
            body = data[start:]
            status = 206 if start else 200
            if start:
                headers["Content-Range"] = f"bytes {start}-{len(data) - 1}/{len(data)}"
            if self.command == "GET" and file in repo.truncate_once:
                repo.truncate_once.discard(file)
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body[: len(body) // 2])
                self.wfile.flush()
                self.close_connection = True
                return
            self._send(status, body, headers)

    return Handler


@contextmanager
def serve_hub(hub: Hub) -> Iterator[Hub]:
    """Serve ``hub`` on 127.0.0.1 (a free port; ``hub.url`` is set) for the ``with`` block."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(hub))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    hub.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield hub
    finally:
        server.shutdown()
        server.server_close()


def card(licence: str, *languages: str) -> bytes:
    """A model card (README.md) whose front matter states a licence and languages."""
    langs = "".join(f"- {code}\n" for code in languages)
    return f"---\nlicense: {licence}\nlanguage:\n{langs}---\n# a model\n".encode()


def opus_files(tmp: Path, licence: str = "cc-by-4.0") -> dict[str, bytes]:
    """The files of an OPUS-MT en-es model converted for CTranslate2, as users publish them (tiny)."""
    pack = build_argos_pack(tmp / "opus-build")
    files = {p.name: p.read_bytes() for p in (pack / "model").iterdir()}
    sp = (pack / "sentencepiece.model").read_bytes()
    files.update({"source.spm": sp, "target.spm": sp, "README.md": card(licence, "en", "es")})
    files[".gitattributes"] = b"*.bin filter=lfs\n"
    return files
