"""The MCP file tools fail closed: they may touch the client's roots and DRAGOMAN_ALLOWED_DIRS, nothing else.

Hosts such as Claude Desktop start servers in ``/``, so the working directory is never implied: with no roots
and no configured directory every file tool refuses, with a message that says how to allow one. Tried as a
hostile client would: no roots, an empty roots list, the server started in ``/``, ``..`` and symlinks out of
an allowed directory, percent-encoded and ``localhost`` file URIs, roots that are not files at all.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp_support import error_text, in_process, structured

from dragoman.server.paths import NOTHING_ALLOWED, allowed_roots, check_allowed, roots_from_uris

pytestmark = pytest.mark.anyio


# a raw URI goes out as the string it is (a careless client), past the SDK's typed serializer's warning
RAW_URIS = pytest.mark.filterwarnings("ignore:Pydantic serializer warnings:UserWarning")


def _text_file(directory: Path, name: str = "a.txt") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text("Good morning.", encoding="utf-8")
    return path


async def _both_tools(client: Client, path: str) -> list[str]:
    """The errors of translate_file and ocr_translate on ``path`` (each must refuse)."""
    args: dict[str, Any] = {"path": path, "target": "es", "source": "en"}
    return [error_text(await client.call_tool(tool, args)) for tool in ("translate_file", "ocr_translate")]


def _assert_nothing_allowed(text: str) -> None:
    assert "[path_not_allowed]" in text
    assert "DRAGOMAN_ALLOWED_DIRS=/path" in text and "roots" in text and "none is allowed by default" in text


# ----- nothing offered, nothing allowed --------------------------------------------------------------
@pytest.mark.parametrize("roots", [None, []], ids=["no-roots-capability", "empty-roots-list"])
async def test_no_roots_and_no_env_refuse_even_the_working_directory(
    server_env: dict[str, str], workdir: Path, monkeypatch: pytest.MonkeyPatch, roots: list[Path | str] | None
) -> None:
    source = _text_file(workdir)
    monkeypatch.chdir(workdir)
    server_env.pop("DRAGOMAN_ALLOWED_DIRS", None)
    async with in_process(server_env, roots=roots) as client:
        status = structured(await client.call_tool("engine_status", {}))
        errors = [*await _both_tools(client, "a.txt"), *await _both_tools(client, str(source))]
        out = error_text(
            await client.call_tool(
                "translate_file", {"path": str(source), "target": "es", "output_path": str(workdir / "o.txt")}
            )
        )
    assert status["allowed_dirs"] == []
    for text in [*errors, out]:
        _assert_nothing_allowed(text)
    assert sorted(p.name for p in workdir.iterdir()) == ["a.txt"]


async def test_a_server_started_in_the_filesystem_root_allows_nothing(
    server_env: dict[str, str], workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = _text_file(workdir)
    monkeypatch.chdir("/")
    server_env.pop("DRAGOMAN_ALLOWED_DIRS", None)
    async with in_process(server_env) as client:
        status = structured(await client.call_tool("engine_status", {}))
        errors = await _both_tools(client, str(source))
        relative = await _both_tools(client, str(source.relative_to("/")))
    assert status["allowed_dirs"] == []
    for text in [*errors, *relative]:
        _assert_nothing_allowed(text)
    assert not (workdir / "a.es.txt").exists()


# ----- DRAGOMAN_ALLOWED_DIRS replaces, never adds to, the working directory ------------------------
async def test_allowed_dirs_alone_are_allowed_and_the_working_directory_is_not(
    server_env: dict[str, str], workdir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    _text_file(first), _text_file(second)
    in_cwd = _text_file(workdir)
    monkeypatch.chdir(workdir)
    env = {**server_env, "DRAGOMAN_ALLOWED_DIRS": f"{first}{os.pathsep}{second}"}
    async with in_process(env) as client:
        status = structured(await client.call_tool("engine_status", {}))
        relative = structured(await client.call_tool("translate_file", {"path": "a.txt", "target": "es"}))
        other = structured(
            await client.call_tool("translate_file", {"path": str(second / "a.txt"), "target": "es"})
        )
        refused = await _both_tools(client, str(in_cwd))
    assert status["allowed_dirs"] == [str(first.resolve()), str(second.resolve())]
    assert relative["output_path"] == str(first.resolve() / "a.es.txt")  # relative: the first allowed dir
    assert other["output_path"] == str(second.resolve() / "a.es.txt")
    for text in refused:
        assert "[path_not_allowed]" in text and "outside the allowed directories" in text
        assert str(first.resolve()) in text and str(workdir.resolve()) + "," not in text
    assert not (workdir / "a.es.txt").exists()


async def test_a_relative_allowed_dir_does_not_smuggle_the_working_directory_in(
    server_env: dict[str, str], workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = _text_file(workdir)
    monkeypatch.chdir(workdir)
    async with in_process({**server_env, "DRAGOMAN_ALLOWED_DIRS": "."}) as client:
        status = structured(await client.call_tool("engine_status", {}))
        errors = await _both_tools(client, str(source))
    assert status["allowed_dirs"] == []
    for text in errors:
        _assert_nothing_allowed(text)


# ----- client roots ----------------------------------------------------------------------------------
async def test_client_roots_alone_are_allowed(
    server_env: dict[str, str], workdir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "project"
    _text_file(root)
    in_cwd = _text_file(workdir)
    monkeypatch.chdir(workdir)
    server_env.pop("DRAGOMAN_ALLOWED_DIRS", None)
    async with in_process(server_env, roots=[root]) as client:
        status = structured(await client.call_tool("engine_status", {}))
        done = structured(await client.call_tool("translate_file", {"path": "a.txt", "target": "es"}))
        refused = await _both_tools(client, str(in_cwd))
    assert status["allowed_dirs"] == [str(root.resolve())]
    assert done["output_path"] == str(root.resolve() / "a.es.txt")
    for text in refused:
        assert "[path_not_allowed]" in text and str(root.resolve()) in text
    assert not (workdir / "a.es.txt").exists()


@pytest.mark.parametrize("how", ["roots", "env"])
async def test_dotdot_and_symlinks_out_of_an_allowed_dir_are_refused(
    server_env: dict[str, str], tmp_path: Path, how: str
) -> None:
    allowed, outside = tmp_path / "allowed", tmp_path / "outside"
    secret = _text_file(outside, "secret.txt")
    _text_file(allowed)
    (allowed / "link.txt").symlink_to(secret)
    (allowed / "linkdir").symlink_to(outside, target_is_directory=True)
    env = {**server_env, "DRAGOMAN_ALLOWED_DIRS": str(allowed)} if how == "env" else server_env
    roots: list[Path | str] | None = [allowed] if how == "roots" else None
    async with in_process(env, roots=roots) as client:
        errors = [
            *await _both_tools(client, "../outside/secret.txt"),
            *await _both_tools(client, str(allowed / ".." / "outside" / "secret.txt")),
            *await _both_tools(client, "link.txt"),
            *await _both_tools(client, "linkdir/secret.txt"),
        ]
        out = error_text(
            await client.call_tool(
                "translate_file", {"path": "a.txt", "target": "es", "output_path": "linkdir/x.txt"}
            )
        )
    for text in [*errors, out]:
        assert "[path_not_allowed]" in text and "outside the allowed directories" in text
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]


@RAW_URIS
async def test_percent_encoded_and_localhost_file_uris_are_understood(
    server_env: dict[str, str], tmp_path: Path
) -> None:
    spaced, hosted = tmp_path / "with space", tmp_path / "hosted dir"
    _text_file(spaced), _text_file(hosted)
    localhost = "file://localhost" + hosted.as_uri().removeprefix("file://")
    assert "%20" in spaced.as_uri() and "%20" in localhost
    async with in_process(server_env, roots=[spaced, localhost]) as client:
        status = structured(await client.call_tool("engine_status", {}))
        done = structured(
            await client.call_tool("translate_file", {"path": str(hosted / "a.txt"), "target": "es"})
        )
    assert status["allowed_dirs"] == [str(spaced.resolve()), str(hosted.resolve())]
    assert done["output_path"] == str(hosted.resolve() / "a.es.txt")


@RAW_URIS
async def test_a_root_that_is_not_a_local_file_uri_allows_nothing(
    server_env: dict[str, str], workdir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The SDK refuses a ``roots/list`` answer with a non-file URI outright: the call fails, nothing is
    touched. A remote ``file://`` host passes the SDK and is ignored by our own reading of the URIs."""
    source = _text_file(workdir)
    monkeypatch.chdir(workdir)
    async with in_process(server_env, roots=["https://example.com" + str(workdir)]) as client:
        web = await _both_tools(client, str(source))
    async with in_process(server_env, roots=["file://otherhost" + str(workdir)]) as client:
        status = structured(await client.call_tool("engine_status", {}))
        remote = await _both_tools(client, str(source))
    assert all(text for text in web)
    assert status["allowed_dirs"] == []
    for text in remote:
        _assert_nothing_allowed(text)
    assert sorted(p.name for p in workdir.iterdir()) == ["a.txt"]


# ----- the pieces, directly ----------------------------------------------------------------------------
def test_file_uris_are_decoded_and_other_schemes_and_hosts_name_nothing(tmp_path: Path) -> None:
    uris = [
        "file:///srv/with%20space/%C3%A9t%C3%A9",
        "file://localhost/srv/local",
        "FILE://LOCALHOST/srv/upper",
        "file://otherhost/srv/remote",
        "https://example.com/srv/web",
        "ftp:///srv/ftp",
        "/srv/bare-path",
        "file:relative/dir",
        "file:///srv/nul%00byte",
    ]
    assert roots_from_uris(uris) == [Path("/srv/with space/été"), Path("/srv/local"), Path("/srv/upper")]


def test_nothing_configured_means_nothing_allowed_and_a_typed_refusal(tmp_path: Path) -> None:
    from dragoman.errors import PathNotAllowed

    assert allowed_roots(None, ()) == () and allowed_roots([], ()) == ()
    assert allowed_roots([], (Path("relative"),)) == ()
    with pytest.raises(PathNotAllowed) as caught:
        check_allowed(tmp_path, ())
    assert str(caught.value) == NOTHING_ALLOWED and caught.value.code == "path_not_allowed"
    assert check_allowed(tmp_path / "x", (tmp_path.resolve(),)) == tmp_path.resolve() / "x"


def test_every_shipped_host_config_allows_a_real_directory() -> None:
    """The snippets users copy must restrict something: each sets DRAGOMAN_ALLOWED_DIRS to a folder."""
    import json

    configs = Path(__file__).parents[2] / "examples" / "configs"
    found = sorted(configs.glob("*.json"))
    assert found
    for config in found:
        data = json.loads(config.read_text(encoding="utf-8"))
        servers = data.get("mcpServers") or data["servers"]
        value = servers["dragoman"]["env"]["DRAGOMAN_ALLOWED_DIRS"]
        assert value.startswith(("/", "${workspaceFolder}")) and value != "/", config.name
    shell = (configs / "claude_code.sh").read_text(encoding="utf-8")
    assert "-e DRAGOMAN_ALLOWED_DIRS=/" in shell
