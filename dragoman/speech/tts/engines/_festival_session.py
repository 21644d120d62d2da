"""A festival process kept running with one voice loaded: ``festival --pipe`` fed Scheme on its stdin.

festival spends 0.5-1.3 s starting and loading a voice, far more than a sentence's synthesis (0.06-0.9 s
here): run afresh for each render (as ``text2wave`` is), festival's voices rendered 2-8x faster than real
time. A session loads the voice once and then renders each text the way ``text2wave`` does (the same
``tts_hooks`` collecting each utterance's wave into one RIFF file, byte for byte the same output): the text
goes in a file of ours, in the voice's encoding; the only Scheme sent is built here from our own names,
numbers and paths (a path holding a quote or a backslash is refused), never from the text or a caller's
string.

The session's stderr is its control channel: after each command a marker line is written to it
(``format stderr``, unbuffered), and a reader thread hands the lines over. A render that outlasts its timeout
has the process group killed (:class:`~dragoman.errors.EngineTimeout`) and the session is finished; so is one
whose process died. A SIOD error (a file that cannot be read, a voice that fails) leaves festival reading
its next command; the render then has no audio and is a :class:`~dragoman.errors.SpeechEngineError`
quoting the error.
"""

from __future__ import annotations

import itertools
import os
import queue
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from dragoman.errors import EngineTimeout, SpeechEngineError
from dragoman.media.audio import Audio, read_wav
from dragoman.speech.tts.engines.base import MAX_PROGRAM_OUTPUT

#: Defined once per session: text2wave's collecting of waves (``save_record_wave_fp``), as a function of
#: an input and an output path.
SETUP = r"""
(gc-status nil)
(defvar dragoman_fp nil)
(defvar dragoman_total 0)
(defvar dragoman_last nil)
(define (dragoman_save utt)
  (if (eq? dragoman_total 0)
      (wave.save.header dragoman_fp (utt.wave utt) 'riff nil (list (list "numsamples" 0))))
  (set! dragoman_total (+ dragoman_total (get_param 'num_samples (wave.info (utt.wave utt)) 0)))
  (wave.save.data.fp (utt.wave utt) dragoman_fp 'riff nil)
  (set! dragoman_last utt))
(set! tts_hooks (list utt.synth dragoman_save))
(define (dragoman_render infile outfile)
  (set! dragoman_total 0)
  (set! dragoman_last nil)
  (set! dragoman_fp (fopen outfile "wb"))
  (tts_file infile nil)
  (if dragoman_last
      (begin
        (fseek dragoman_fp 0 0)
        (wave.save.header dragoman_fp (utt.wave dragoman_last) 'riff nil
                          (list (list "numsamples" dragoman_total)))))
  (fclose dragoman_fp))
"""
#: Lines of stderr kept to quote in an error.
KEPT_LINES = 20


class FestivalSession:
    """One ``festival --pipe`` process with the voice whose function is ``(voice_<name>)`` loaded.

    ``setup``: Scheme run once after the voice is loaded (saving the voice's own parameters to restore
    after each render). Not safe for two threads at once: the engine hands a session to one render at a
    time."""

    def __init__(self, program: str, name: str, setup: str, timeout: float) -> None:
        self.name = name
        self._folder = Path(tempfile.mkdtemp(prefix="dragoman_festival_"))
        if '"' in str(self._folder) or "\\" in str(self._folder):  # (never sent into Scheme)
            shutil.rmtree(self._folder, ignore_errors=True)
            raise SpeechEngineError(f"festival: the folder {self._folder} cannot be named in Scheme")
        self._counter = itertools.count(1)
        self._lines: queue.Queue[bytes | None] = queue.Queue()
        self._recent: list[str] = []
        self._running = False
        #: The process had gone before a command could be sent: nothing was rendered, so the render may be
        #: tried again on a new session.
        self.lost = False
        try:
            self._proc = subprocess.Popen(
                [program, "--pipe"],
                bufsize=0,  # stdin unbuffered: nothing left to flush into a pipe whose reader has gone
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as exc:
            shutil.rmtree(self._folder, ignore_errors=True)
            why = exc.strerror or exc
            raise SpeechEngineError(f"festival voice {name}: cannot start {program}: {why}") from exc
        self._running = True
        threading.Thread(target=self._read, name=f"festival-{name}", daemon=True).start()
        errors = self._command(f"{SETUP}\n(voice_{name})\n{setup}\n", timeout, "loading the voice")
        if errors:
            self.close()
            raise SpeechEngineError(f"festival voice {name} failed to load: {errors[-1]}")

    @property
    def alive(self) -> bool:
        """Whether the process is still there to take commands."""
        return self._running and self._proc.poll() is None

    def _read(self) -> None:
        stream = self._proc.stderr
        assert stream is not None
        with stream:
            for line in stream:
                self._lines.put(line)
        self._lines.put(None)

    def _command(self, scheme: str, timeout: float, doing: str) -> list[str]:
        """Send ``scheme`` and a marker, wait for the marker; the SIOD errors festival wrote meanwhile."""
        marker = f"dragoman-done-{os.getpid()}-{next(self._counter)}"
        try:
            assert self._proc.stdin is not None
            data = memoryview(f'{scheme}\n(format stderr "{marker}\\n")\n'.encode("ascii"))
            while data:
                data = data[self._proc.stdin.write(data) or 0 :]
        except (BrokenPipeError, OSError) as exc:
            self.close()
            self.lost = True
            raise SpeechEngineError(f"festival voice {self.name} has stopped: {self._tail()}") from exc
        deadline = time.monotonic() + timeout
        errors: list[str] = []
        while True:
            try:
                line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                self.close()
                raise EngineTimeout(
                    f"festival voice {self.name}: {doing} took longer than {timeout:.3g} s and was stopped"
                ) from None
            if line is None:
                self.close()
                raise SpeechEngineError(f"festival voice {self.name} exited while {doing}: {self._tail()}")
            text = line.decode("utf-8", "replace").strip()
            if text == marker:
                return errors
            self._recent = [*self._recent[-(KEPT_LINES - 1) :], text]
            if "ERROR" in text:
                errors.append(text)

    def _tail(self) -> str:
        return " | ".join(self._recent[-3:]) or "no message"

    def render(self, text: bytes, before: str, after: str, timeout: float) -> Audio:
        """``text`` (in the voice's encoding) spoken; ``before`` and ``after``: Scheme setting and restoring
        the render's parameters."""
        source, output = self._folder / "in.txt", self._folder / "out.wav"
        output.unlink(missing_ok=True)
        source.write_bytes(text)
        try:
            errors = self._command(
                f'{before}\n(dragoman_render "{source}" "{output}")\n{after}', timeout, "rendering"
            )
            size = output.stat().st_size if output.is_file() else 0
            if size <= 44:
                why = errors[-1] if errors else "no message"
                raise SpeechEngineError(f"festival voice {self.name} wrote no audio: {why}")
            if size > MAX_PROGRAM_OUTPUT:
                raise SpeechEngineError(f"festival voice {self.name} wrote over {MAX_PROGRAM_OUTPUT} bytes")
            return read_wav(output)
        finally:
            source.unlink(missing_ok=True)
            output.unlink(missing_ok=True)

    def close(self) -> None:
        """Stop the process (its whole group) and remove the session's folder."""
        if self._running:
            self._running = False
            try:
                os.killpg(self._proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            self._proc.kill()
            self._proc.wait()
            if self._proc.stdin is not None:  # (stderr ends, and is closed, with its reader thread)
                try:
                    self._proc.stdin.close()
                except OSError:
                    pass
        shutil.rmtree(self._folder, ignore_errors=True)
