"""The one error tree (``dragoman.errors``) and the one place that maps dependencies' errors into it."""

from __future__ import annotations

import errno
import importlib
import os
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import pytest

import dragoman
from dragoman import errors
from dragoman.errors import (
    BackendError,
    BodyTooLarge,
    ConfigError,
    DocumentFormatError,
    DragomanError,
    EngineTimeout,
    GateRefusal,
    HostNotAllowed,
    InvalidRequest,
    OriginNotAllowed,
    PackInstallError,
    PortInUse,
    Saturated,
    Unauthorized,
    map_exception,
    map_exceptions,
)
from dragoman.settings import Settings


def _tree(root: type[DragomanError] = DragomanError) -> list[type[DragomanError]]:
    found = [root]
    for sub in root.__subclasses__():
        found += _tree(sub)
    return found


def test_every_class_has_a_status_and_a_unique_code() -> None:
    classes = [c for c in _tree() if c.__module__ == "dragoman.errors"]
    assert len(classes) >= 25
    codes = [c.code for c in classes]
    assert len(codes) == len(set(codes)), sorted(c for c in codes if codes.count(c) > 1)
    for cls in classes:
        assert isinstance(cls.status, int) and 400 <= cls.status <= 599, cls
        assert re.fullmatch(r"[a-z][a-z0-9_]*", cls.code), cls
        assert cls.__doc__, f"{cls.__name__} says what it means"


def test_every_error_class_of_the_package_lives_in_errors_py() -> None:
    for info in pkgutil.walk_packages(dragoman.__path__, "dragoman."):
        if not info.name.endswith("__main__"):
            importlib.import_module(info.name)
    outside = [f"{c.__module__}.{c.__qualname__}" for c in _tree() if c.__module__ != "dragoman.errors"]
    assert outside == []


@pytest.mark.parametrize(
    ("exc", "status", "code"),
    [
        (Unauthorized("unauthorized"), 401, "unauthorized"),
        (HostNotAllowed("Host 'evil.test' is not a loopback name"), 403, "host_not_allowed"),
        (OriginNotAllowed("Origin 'http://x' is not allowed"), 403, "origin_not_allowed"),
        (BodyTooLarge("the body is over the daemon's limit"), 413, "body_too_large"),
        (Saturated("the daemon is saturated", 3), 503, "saturated"),
        (PortInUse("port 8787 is already in use"), 409, "port_in_use"),
        (ConfigError("DRAGOMAN_PORT must be an integer"), 500, "config_error"),
    ],
)
def test_front_door_errors_are_named_classes_with_their_wire_shape(
    exc: DragomanError, status: int, code: str
) -> None:
    assert (exc.status, exc.code) == (status, code)
    assert exc.to_dict() == {"error": exc.message, "code": code}
    assert "status" not in vars(exc) and "code" not in vars(exc)  # the class knows them, not the instance


def test_gate_refusals_share_a_parent() -> None:
    for cls in (Unauthorized, HostNotAllowed, OriginNotAllowed, BodyTooLarge):
        assert issubclass(cls, GateRefusal)
    assert Saturated("busy", 7).retry_after == 7


@pytest.mark.parametrize(("variable", "value"), [("DRAGOMAN_TIER", "bogus"), ("DRAGOMAN_PORT", "abc")])
def test_a_bad_environment_variable_is_a_config_error_not_a_request_error(variable: str, value: str) -> None:
    with pytest.raises(ConfigError, match=variable) as caught:
        Settings.from_env({variable: value})
    assert not isinstance(caught.value, InvalidRequest) and caught.value.status == 500


# ----- map_exceptions -----------------------------------------------------------------------------------
def test_ctranslate2_errors_become_backend_errors_keeping_the_cause(tmp_path: Path) -> None:
    import ctranslate2

    with pytest.raises(BackendError, match=r"^loading pack p: Unable to open file 'model.bin'") as caught:
        with map_exceptions("loading pack p"):
            ctranslate2.Translator(str(tmp_path))
    assert isinstance(caught.value.__cause__, RuntimeError)


def test_sentencepiece_errors_become_backend_errors(tmp_path: Path) -> None:
    import sentencepiece as spm

    bad = tmp_path / "bad.model"
    bad.write_bytes(b"garbage")
    with pytest.raises(BackendError, match="loading pack p: .*bad.model") as caught:
        with map_exceptions("loading pack p"):
            spm.SentencePieceProcessor(model_file=str(bad))
    assert caught.value.__cause__ is not None


@pytest.mark.parametrize(("data", "name"), [(b"not a pdf at all", "FileDataError"), (b"", "EmptyFileError")])
def test_pymupdf_errors_are_document_errors_whatever_the_work(data: bytes, name: str) -> None:
    import pymupdf

    with pytest.raises(DocumentFormatError, match=r"^reading x.pdf: .*; check the file$") as caught:
        with map_exceptions("reading x.pdf", hint="check the file"):
            pymupdf.open(stream=data, filetype="pdf")  # type: ignore[no-untyped-call]
    assert type(caught.value.__cause__).__name__ == name


def test_a_child_process_killed_at_its_timeout_is_an_engine_timeout() -> None:
    with pytest.raises(EngineTimeout, match=r"^OCR in eng: .*python.* took longer than 0.2 s") as caught:
        with map_exceptions("OCR in eng", error=DocumentFormatError):
            subprocess.run([sys.executable, "-c", "import time; time.sleep(30)"], timeout=0.2, check=False)
    assert isinstance(caught.value.__cause__, subprocess.TimeoutExpired)


@pytest.mark.parametrize(
    ("code", "words"),
    [
        (errno.ENOSPC, "no space left on the device: /data/x"),
        (errno.EDQUOT, "no space left on the device: /data/x"),
        (errno.EACCES, "permission denied: /data/x"),
        (errno.EPERM, "permission denied: /data/x"),
        (errno.EROFS, "read-only file system: /data/x"),
        (errno.ENOENT, "no such file or directory: /data/x"),
        (errno.EIO, "[Errno 5] Input/output error: '/data/x'"),
    ],
)
def test_file_system_errors_are_worded_by_errno_in_the_class_of_the_work(code: int, words: str) -> None:
    with pytest.raises(PackInstallError) as caught:
        with map_exceptions("installing pack p", error=PackInstallError):
            raise OSError(code, os.strerror(code), "/data/x")
    assert caught.value.message.startswith("installing pack p: ") and words in caught.value.message
    assert isinstance(caught.value.__cause__, OSError) and caught.value.__cause__.errno == code


def test_memory_and_value_errors_become_the_class_of_the_work() -> None:
    with pytest.raises(BackendError, match="out of memory") as caught:
        with map_exceptions("translating with pack p"):
            raise MemoryError
    assert isinstance(caught.value.__cause__, MemoryError)
    with pytest.raises(DocumentFormatError, match="^reading a.txt: bad byte; fix it$"):
        with map_exceptions("reading a.txt", error=DocumentFormatError, hint="fix it"):
            raise ValueError("bad byte")


def test_our_errors_and_bugs_pass_through_untouched() -> None:
    ours = InvalidRequest("no")
    with pytest.raises(InvalidRequest) as caught, map_exceptions("x"):
        raise ours
    assert caught.value is ours
    with pytest.raises(TypeError, match="a bug"), map_exceptions("x"):
        raise TypeError("a bug")
    assert map_exception(KeyError("k"), "x") is None
    assert map_exception(ours, "x") is None


def test_errors_module_imports_no_dependency() -> None:
    code = (
        "import sys, dragoman.errors; "
        "print(sorted(m for m in ('pymupdf', 'fitz', 'ctranslate2', 'sentencepiece', 'fasttext') "
        "if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    assert errors.__doc__ and "map_exceptions" in errors.__doc__
