"""Pydantic models at the MCP edge: tool inputs that need a shape, and every tool's structured output.

Each output model carries ``provenance`` (spec 4.5: every structured result includes it), so clients get an
``outputSchema`` and ``structuredContent`` that say where the work was done. The spec's shapes (2.5 language
rows, 2.6 translation results, 2.7 glossary entries: ``caseSensitive``) are the wire models of
:mod:`dragoman.server._wire`, shared with the daemon; the tool models here derive from them.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from dragoman.limits import MAX_GLOSSARY_ENTRIES, MAX_TERM_CHARS, MAX_TEXT_CHARS, Provenance
from dragoman.limits import Tier as TierName
from dragoman.server._wire import BatchingInfo, GlossaryItem, TranslationResultModel
from dragoman.server._wire import LanguageRow as LanguageRow  # the tools name it from here

#: Spec 8: 64 texts and 200 glossary terms per request, 1 MB of text per translate body.
#: Spec 8: 200 MB per file.

_PROVENANCE = Field(description="Where the work ran: 'on-device' for this server (nothing left the machine).")


class GlossaryEntryInput(GlossaryItem):
    """Spec 2.7 (the wire's :class:`~dragoman.server._wire.GlossaryItem`) as a tool argument: JSON types
    taken as the SDK hands them (lax), and the term length checked here."""

    model_config = ConfigDict(strict=False, populate_by_name=True, extra="forbid")

    term: str = Field(min_length=1, max_length=MAX_TERM_CHARS, description="Source-language term to protect.")
    translation: str = Field(
        max_length=MAX_TERM_CHARS, description="Exact text the translation must contain in its place."
    )


class TranslateOutput(TranslationResultModel):
    """Spec 2.6 plus the route the engine took and the tier it used (the wire's result model)."""


class BatchOutput(BaseModel):
    """Results in input order, one per text."""

    results: list[TranslateOutput]
    count: int
    provenance: Provenance = _PROVENANCE
    seconds: float


class DetectOutput(BaseModel):
    flores: str | None = Field(description="FLORES-200 code, or null when the detection is uncertain.")
    bcp47: str | None
    name: str | None
    confidence: float = Field(ge=0.0, le=1.0)
    label: str | None = Field(description="The identification model's own top label, even when uncertain.")
    reason: str | None = Field(description="Why flores is null: 'too short', 'low confidence', 'mixed'.")
    provenance: Provenance = _PROVENANCE


class LanguagesOutput(BaseModel):
    languages: list[LanguageRow]
    count: int
    installed_only: bool
    provenance: Provenance = _PROVENANCE


class PackStatus(BaseModel):
    model_config = ConfigDict(extra="allow")

    id: str
    kind: str
    languages: list[str]
    path: str
    version: str
    loaded: bool


class StatusOutput(BaseModel):
    """What this device can do: platform support, packs, binaries, model paths, daemon liveness."""

    model_config = ConfigDict(extra="allow")

    version: str
    provenance: Provenance = _PROVENANCE
    platform: dict[str, Any]
    packs_dir: str
    packs: list[PackStatus]
    broken_packs: list[dict[str, Any]]
    detection: dict[str, Any]
    glossary: dict[str, Any]
    apertium: dict[str, Any]
    tesseract: dict[str, Any]
    daemon: dict[str, Any] | None
    batching: BatchingInfo = Field(
        description="The engine's dynamic batcher: batches formed, mean size, queue."
    )
    uptime_seconds: float
    allowed_dirs: list[str] = Field(
        description="Directories the file tools may read and write now: the client's roots plus "
        "DRAGOMAN_ALLOWED_DIRS; empty means every file tool refuses."
    )


class GlossaryRow(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    term: str
    translation: str
    case_sensitive: bool = Field(alias="caseSensitive")
    source: str | None = Field(description="FLORES-200 source scope, or null for every source.")
    target: str | None = Field(description="FLORES-200 target scope, or null for every target.")


class GlossaryOutput(BaseModel):
    """The glossary after a change (or as listed), filtered to the scope asked for."""

    entries: list[GlossaryRow]
    count: int
    added: int = 0
    removed: int = 0
    source: str | None = None
    target: str | None = None
    path: str = Field(description="The user glossary file every front door reads.")
    provenance: Provenance = _PROVENANCE


class FileOutput(BaseModel):
    input_path: str
    output_path: str
    format: str = Field(description="The format found in the file's content: docx, pdf, image, txt, md, ...")
    source: str
    target: str
    segments: int = Field(description="Texts translated (paragraphs, cells, cues, strings, text boxes).")
    characters: int
    pages: int | None = None
    extra_outputs: dict[str, str] = Field(
        default_factory=dict, description="Other files written, by kind (a PDF's DOCX export: 'docx')."
    )
    provenance: Provenance = _PROVENANCE
    seconds: float
    warnings: list[str]


class OcrBox(BaseModel):
    page: int
    bbox: list[float] = Field(description="x0, y0, x1, y1 in pixels of the page image.")
    text: str
    translation: str


class OcrOutput(BaseModel):
    text: str = Field(description="Text extracted from the image.")
    translation: str
    source: str
    target: str
    pages: int | None = None
    boxes: list[OcrBox] = Field(default_factory=list, description="Each text box with its translation.")
    output_path: str | None = Field(default=None, description="The rendered image, when render was asked.")
    provenance: Provenance = _PROVENANCE
    seconds: float
    warnings: list[str]


# ----- tool parameters ------------------------------------------------------------------------------
Text = Annotated[str, Field(max_length=MAX_TEXT_CHARS, description="The text to translate (at most 1 MB).")]
Target = Annotated[
    str,
    Field(
        min_length=2,
        max_length=64,
        description="Target language: BCP-47 ('es', 'pt-BR', 'zh-Hant') or FLORES-200 ('spa_Latn').",
    ),
]
Source = Annotated[
    str | None,
    Field(
        max_length=64,
        description="Source language, BCP-47 or FLORES-200; omit to detect it (eng_Latn when uncertain).",
    ),
]
Tier = Annotated[
    TierName | None,
    Field(description="'best' (highest quality, default) or 'fast' (primary engine plus guards)."),
]
Glossary = Annotated[
    list[GlossaryEntryInput] | None,
    Field(
        max_length=MAX_GLOSSARY_ENTRIES,
        description=f"Terms kept verbatim for this call only (at most {MAX_GLOSSARY_ENTRIES}); "
        "omit to apply the "
        "user's glossary, [] for none.",
    ),
]
Scope = Annotated[
    str | None,
    Field(max_length=64, description="Language-pair scope (BCP-47 or FLORES-200); omit for every language."),
]
FilePath = Annotated[
    str,
    Field(
        min_length=1,
        max_length=4096,
        description="File path inside the allowed directories (the client's roots plus "
        "DRAGOMAN_ALLOWED_DIRS; nothing by default); relative paths start at the first of them.",
    ),
]
