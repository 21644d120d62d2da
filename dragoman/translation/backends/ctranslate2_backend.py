"""The CTranslate2 + SentencePiece backend: Argos pair packs and multilingual (NLLB-200, M2M-100) packs.

Tokenization is SentencePiece (``encode(..., out_type=str)``). Multilingual packs follow the NLLB and
M2M-100 convention: the source is ``[source token] + pieces + ["</s>"]`` and decoding is forced to start
with the target token (``target_prefix``), which is dropped from the output. Argos packs take the pieces as
they are (their model's ``config.json`` says whether CTranslate2 adds ``<s>``/``</s>`` itself).

A batch is ONE ``Translator.translate_batch`` call: CTranslate2 sorts the examples by length and cuts them
into sub-batches of ``max_batch_size`` itself. Segments longer than the pack's input limit are split with
:func:`dragoman.translation.segmentation.split_to_limit` (token-level chunks as a last resort), translated in
the same call, and joined with a space. Decoding is bounded: ``max_decoding_length`` is
``min(limit, 2 * longest input + 16)`` per call, which also caps runaway repetition.

Thread safety: ``ctranslate2.Translator`` accepts concurrent ``translate_batch`` calls from several threads
(each call is queued to one of ``inter_threads`` workers; the GIL is released while it runs), and
``SentencePieceProcessor`` encode/decode are const, re-entrant C++ calls (sentencepiece issues #207, #657).
The backend keeps no mutable state after loading, so one instance serves every caller.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dragoman.errors import (
    BackendError,
    LimitExceeded,
    PackIntegrityError,
    UnsupportedPair,
    map_exceptions,
)
from dragoman.models.device import compute_device
from dragoman.models.manifest import PackManifest
from dragoman.translation.backends.base import translate_protected
from dragoman.translation.segmentation import split_to_limit
from dragoman.translation.types import BatchOutput, Pieces

__all__ = ["CTranslate2Backend", "DecodeOptions", "compute_device", "cpu_support"]

log = logging.getLogger("dragoman.translation.ctranslate2")

EOS = "</s>"


@dataclass(frozen=True)
class DecodeOptions:
    """How the backend decodes. The defaults trade a little quality for speed on a laptop CPU.

    ``beam_size`` 2 keeps most of the gain of a wider beam (Argos uses 4) at about half its cost; 1 is
    greedy and fastest. ``no_repeat_ngram_size`` 0 and ``repetition_penalty`` 1.0 leave real models alone
    (legitimate repetition exists in text); runaway loops are cut by the length bound instead.
    """

    beam_size: int = 2
    max_batch_size: int = 32
    batch_type: str = "examples"
    length_factor: float = 2.0
    length_slack: int = 16
    repetition_penalty: float = 1.0
    no_repeat_ngram_size: int = 0


def cpu_support() -> dict[str, object]:
    """What CTranslate2 can use on this machine, for ``engine_status``."""
    import ctranslate2

    return {
        "ctranslate2": ctranslate2.__version__,
        "compute_types_cpu": sorted(ctranslate2.get_supported_compute_types("cpu")),
        "cuda_devices": ctranslate2.get_cuda_device_count(),
    }


def _dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _model_config(model_dir: Path) -> dict[str, Any]:
    try:
        data = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PackIntegrityError(f"{model_dir / 'config.json'} is not valid JSON: {exc}") from exc
    return data if isinstance(data, dict) else {}


class CTranslate2Backend:
    """A loaded CTranslate2 pack. Build it with :meth:`load`."""

    #: One call of 64 segments costs about what a few single calls do: the engine's batcher merges
    #: concurrent callers' segments into one call (:mod:`dragoman.translation.batcher`).
    coalesces = True
    #: Calls CTranslate2 runs at once (its ``inter_threads``): the batcher keeps this many batches running.
    parallel_calls = 1

    def __init__(
        self,
        manifest: PackManifest,
        directory: Path,
        translator: Any,
        source_sp: Any,
        target_sp: Any,
        *,
        options: DecodeOptions | None = None,
        model_specials: int = 0,
    ) -> None:
        self.pack_id = manifest.id
        self.manifest = manifest
        self.directory = directory
        self.options = options or DecodeOptions()
        self._translator = translator
        self._source_sp = source_sp
        self._target_sp = target_sp
        self._multilingual = manifest.kind == "multilingual"
        self._lang_tokens: frozenset[str] = (
            frozenset(manifest.token_for(code) for code in manifest.languages)
            if self._multilingual
            else frozenset()
        )
        # Tokens the model sees besides the pieces: the language token and </s> for multilingual packs,
        # and whatever the model's config adds (add_source_bos / add_source_eos).
        self._specials = (2 if self._multilingual else 0) + model_specials
        self.loaded_bytes = _dir_bytes(directory / manifest.model_dir)

    @classmethod
    def load(
        cls,
        manifest: PackManifest,
        directory: Path,
        *,
        device: str = "cpu",
        compute_type: str = "default",
        inter_threads: int = 1,
        intra_threads: int = 0,
        options: DecodeOptions | None = None,
    ) -> CTranslate2Backend:
        """Load the model and the SentencePiece model(s) of a pack; errors come out as our types."""
        import ctranslate2
        import sentencepiece as spm

        context = f"loading pack {manifest.id} from {directory}"
        model_dir = directory / manifest.model_dir
        config = _model_config(model_dir)
        specials = int(bool(config.get("add_source_bos"))) + int(bool(config.get("add_source_eos")))
        hint = (
            f"If device {device!r} and compute type {compute_type!r} are right, the pack is damaged: "
            f"check it with `dragoman packs verify {manifest.id}` and reinstall it with "
            "`dragoman packs install SOURCE --replace`"
        )
        try:
            with map_exceptions(context):
                source_sp = spm.SentencePieceProcessor(model_file=str(directory / manifest.sentencepiece))
                target_sp = source_sp
                if manifest.target_sentencepiece:
                    target_sp = spm.SentencePieceProcessor(
                        model_file=str(directory / manifest.target_sentencepiece)
                    )
                translator = ctranslate2.Translator(
                    str(model_dir),
                    device=device,
                    compute_type=compute_type,
                    inter_threads=inter_threads,
                    intra_threads=intra_threads,
                )
        except BackendError as exc:
            raise BackendError(f"{exc.message}. {hint}") from exc.__cause__
        except (IndexError, KeyError) as exc:  # ctranslate2 on a model.bin with a valid header, wrong body
            raise PackIntegrityError(f"{context}: model.bin is unreadable ({exc}). {hint}") from exc
        log.info("loaded pack %s (%s, %s, %s)", manifest.id, manifest.kind, device, compute_type)
        backend = cls(
            manifest, directory, translator, source_sp, target_sp, options=options, model_specials=specials
        )
        backend.parallel_calls = max(1, inter_threads)
        return backend

    # -- tokens -----------------------------------------------------------------------------------

    def _pieces(self, text: str) -> list[str]:
        pieces: list[str] = self._source_sp.encode(text, out_type=str)
        return pieces

    def count_tokens(self, text: str) -> int:
        """How many tokens the model would be handed for ``text``, special tokens included."""
        return len(self._pieces(text)) + self._specials

    def _source_tokens(self, pieces: list[str], source: str) -> list[str]:
        if self._multilingual:
            return [self.manifest.token_for(source), *pieces, EOS]
        return pieces

    def _chunks(self, text: str) -> list[list[str]]:
        """The piece lists of ``text``, each within the pack's input limit."""
        limit = self.manifest.max_input_tokens
        pieces = self._pieces(text)
        if not pieces:  # only characters the tokenizer drops (zero-width spaces, BOM)
            return []
        if len(pieces) + self._specials <= limit:
            return [pieces]
        room = max(1, limit - self._specials)
        try:
            parts = [part.strip() for part in split_to_limit(text, self.count_tokens, limit)]
        except LimitExceeded:  # one character takes more than the limit: only token chunks can cut it
            parts = [text]
        chunks: list[list[str]] = []
        for part in parts:
            part_pieces = self._pieces(part) if part else []
            # Token chunks bound whatever split_to_limit could not cut.
            chunks.extend(part_pieces[i : i + room] for i in range(0, len(part_pieces), room))
        return [chunk for chunk in chunks if chunk]

    def _decode(self, tokens: list[str]) -> str:
        if self._multilingual:
            tokens = [t for t in tokens if t not in self._lang_tokens]
        text: str = self._target_sp.decode(tokens)
        return text

    # -- translation ------------------------------------------------------------------------------

    def _check_pair(self, source: str, target: str) -> None:
        if (source, target) in self.manifest.pairs:
            return
        pairs = ", ".join(f"{s}->{t}" for s, t in self.manifest.pairs[:12])
        raise UnsupportedPair(
            f"pack {self.pack_id} does not translate {source}->{target}; it translates {pairs}. "
            "Pick a route with engine_status or install a pack for this pair"
        )

    def translate_texts(self, texts: Sequence[str], source: str, target: str) -> list[str]:
        """Translate plain texts (no protected spans) with one model call; blank texts come back as given."""
        self._check_pair(source, target)
        sources: list[list[str]] = []
        owners: list[int] = []
        for index, text in enumerate(texts):
            if not text.strip():
                continue
            for chunk in self._chunks(text.strip()):
                sources.append(self._source_tokens(chunk, source))
                owners.append(index)
        if not sources:
            return list(texts)
        outputs = self._run(sources, target)
        parts: dict[int, list[str]] = {}
        for index, output in zip(owners, outputs, strict=True):
            parts.setdefault(index, []).append(output)
        results: list[str] = []
        for index, text in enumerate(texts):
            if index not in parts:
                results.append(text)
                continue
            lead = text[: len(text) - len(text.lstrip())]
            trail = text[len(text.rstrip()) :]
            results.append(lead + " ".join(p for p in parts[index] if p) + trail)
        return results

    def _run(self, sources: list[list[str]], target: str) -> list[str]:
        opts = self.options
        longest = max(len(s) for s in sources)
        max_length = min(
            self.manifest.max_input_tokens, int(opts.length_factor * longest) + opts.length_slack
        )
        prefix = [[self.manifest.token_for(target)] for _ in sources] if self._multilingual else None
        translator = self._translator
        if translator is None:
            raise BackendError(
                f"pack {self.pack_id} was closed (the engine shut down or the pack was removed); "
                "start a new engine or reinstall the pack"
            )
        with map_exceptions(f"translating with pack {self.pack_id}"):
            results = translator.translate_batch(
                sources,
                target_prefix=prefix,
                max_batch_size=opts.max_batch_size,
                batch_type=opts.batch_type,
                beam_size=opts.beam_size,
                max_decoding_length=max_length + (1 if prefix else 0),
                repetition_penalty=opts.repetition_penalty,
                no_repeat_ngram_size=opts.no_repeat_ngram_size,
                replace_unknowns=True,
            )
            outputs: list[str] = []
            for result in results:
                tokens = list(result.hypotheses[0])
                if prefix and tokens and tokens[0] == prefix[0][0]:
                    tokens = tokens[1:]
                outputs.append(self._decode(tokens))
        return outputs

    def translate_batch(self, batch: Sequence[Pieces], source: str, target: str) -> BatchOutput:
        """Translate segments keeping every protected span (see :func:`translate_protected`)."""
        self._check_pair(source, target)
        results, fallbacks = translate_protected(
            batch, lambda texts: self.translate_texts(texts, source, target)
        )
        if fallbacks:
            log.debug("pack %s: %d segment(s) translated piecewise around spans", self.pack_id, fallbacks)
        return BatchOutput(tuple(results))

    def smoke_test(self) -> None:
        """One token through the model: a device that loads a model but cannot run it (a GPU whose CUDA
        libraries are missing: CTranslate2 4.8's wheels want CUDA 12's cuBLAS) fails here, not later."""
        with map_exceptions(f"running pack {self.pack_id} on {self._translator.device}"):
            self._translator.translate_batch([["▁"]], max_decoding_length=1, beam_size=1)

    def close(self) -> None:
        """Unload the model; later calls fail with BackendError. Calls under way finish first.

        ``unload_model`` declines while the translator has been used (ctranslate2 4.8), so the reference
        is dropped too: the model is freed once the last call holding it returns.
        """
        translator, self._translator = self._translator, None
        if translator is None:
            return
        try:
            translator.unload_model()
        except RuntimeError as exc:
            log.debug("unloading pack %s: %s", self.pack_id, exc)
        log.info("closed pack %s", self.pack_id)
