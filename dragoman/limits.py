"""The interface spec's limits (section 8) and the shared literal types, written once.

Every layer imports these: the engine checks them, the wire models bound their fields with them, the CLI
offers their choices, the README quotes them. Nothing here imports anything of dragoman's.
"""

from __future__ import annotations

from typing import Final, Literal, get_args

#: How a route is chosen: 'best' (highest quality) or 'fast' (primary engine plus guards). Spec 4.4.
Tier = Literal["best", "fast"]
TIERS: Final[tuple[str, ...]] = get_args(Tier)
DEFAULT_TIER: Final[Tier] = "best"

#: Where work ran: 'on-device' locally (daemon, tool server, CLI), 'server' on the hosted service. Spec 2.6.
Provenance = Literal["on-device", "server"]

# ----- translation (spec 4.4, 8) -------------------------------------------------------------------------
#: Texts in one batch request.
MAX_BATCH_TEXTS: Final = 64
#: Glossary entries one request may carry, and entries that may apply to one language pair.
MAX_GLOSSARY_ENTRIES: Final = 200
#: Longest glossary term or translation, in characters (not in the spec; ours).
MAX_TERM_CHARS: Final = 1_000
#: Characters of one text in a translate request (spec 8: 1 MB of text).
MAX_TEXT_CHARS: Final = 1_000_000
#: Bytes of one local daemon request body (spec 8: 2 MB).
MAX_LOCAL_BODY_BYTES: Final = 2 * 1024 * 1024
#: Characters translated synchronously by hosted v1 translate; longer texts become jobs (spec 8).
SYNC_TEXT_CHARS: Final = 500

# ----- files (spec 8) ------------------------------------------------------------------------------------
#: Bytes of one file to translate or upload (413 beyond).
MAX_FILE_BYTES: Final = 200 * 1024 * 1024

# ----- speech (spec 8) -----------------------------------------------------------------------------------
#: Characters of one TTS render, and of one render answered with inline audio.
MAX_TTS_CHARS: Final = 50_000
MAX_TTS_INLINE_CHARS: Final = 1_500
#: Speaking speed range.
TTS_SPEED_MIN: Final = 0.5
TTS_SPEED_MAX: Final = 1.8
#: Seconds of reference audio a voice clone is made from; clones one user may keep.
CLONE_MIN_SECONDS: Final = 3.0
CLONE_MAX_SECONDS: Final = 20.0
MAX_CLONES_PER_USER: Final = 25

# ----- hosted service (spec 8) ---------------------------------------------------------------------------
#: Requests per minute per key on v1 authenticated endpoints (fixed window).
RATE_PER_MINUTE: Final = 60
#: Default daily character quota of a key on hosted v2.
DAILY_CHARS_DEFAULT: Final = 200_000
#: Jobs listed by default; idempotency window; usage window; word-editor retention.
JOB_LIST_DEFAULT: Final = 50
IDEMPOTENCY_SECONDS: Final = 24 * 3600
USAGE_WINDOW_DAYS: Final = 30
WORD_EDIT_RETENTION_SECONDS: Final = 12 * 3600
#: Webhooks: seconds the receiver has to answer, retries, timestamp tolerance.
WEBHOOK_REPLY_SECONDS: Final = 10
WEBHOOK_RETRIES: Final = 5
WEBHOOK_TOLERANCE_SECONDS: Final = 300

# ----- processes and connections (issue 9, item 4; ours, not the spec's) -------------------------------
#: Apertium pipelines one engine keeps running, and seconds an unused one is kept before it is closed
#: (``DRAGOMAN_APERTIUM_MAX_PIPELINES``, ``DRAGOMAN_APERTIUM_IDLE_SECONDS``). A pipeline is 8 to 17 processes
#: and 40 to 150 MB (PSS; Apertium 3.8's es-pt, eng-spa, eng-cat): four are as many as the daemon's default
#: engine threads can use at once.
APERTIUM_MAX_PIPELINES: Final = 4
APERTIUM_IDLE_SECONDS: Final = 300.0
#: Segments in one call of an Apertium pipeline through the dynamic batcher (its own budget, in place of
#: ``DRAGOMAN_BATCH_MAX_SEGMENTS``): one engine chunk, as a lone caller's call was before the batcher. A
#: stream gains per segment up to there (64 segments a call made 1000 lines 7-10% slower than 256), and the
#: character budget still bounds the call.
APERTIUM_BATCH_SEGMENTS: Final = 256
#: The daemon's open connections (``DRAGOMAN_SERVE_MAX_CONNECTIONS``; idle ones are closed to make room,
#: a connection over the cap with none idle gets 503), seconds a request's head and body may take to arrive
#: (``DRAGOMAN_SERVE_HEADER_TIMEOUT``: 408, slowloris), seconds an idle keep-alive connection is kept
#: (``DRAGOMAN_SERVE_KEEP_ALIVE``), and bytes of one request's line and headers (431 beyond).
DAEMON_MAX_CONNECTIONS: Final = 100
DAEMON_HEADER_TIMEOUT: Final = 10.0
DAEMON_KEEP_ALIVE: Final = 5.0
MAX_REQUEST_HEAD_BYTES: Final = 64 * 1024

# ----- document contents (issue 9, item 2; ours, not the spec's) ----------------------------------------
# A file within MAX_FILE_BYTES can still hold hours of work or gigabytes of parsed markup; these bound what
# a handler takes on, each refused with a typed 413 (``document_too_large``) before the work grows.
#: Pages of one PDF. Google Cloud Translation's batch document translation documents 1,000 pages per PDF;
#: a longer document is split into parts (``qpdf --split-pages=1000 in.pdf part-%d.pdf``).
MAX_PDF_PAGES: Final = 1_000
#: Pages of one PDF that need OCR (scans: images and no text layer). Tesseract takes seconds to tens of
#: seconds a page at 300 dpi (``documents.ocr.OCR_TIMEOUT_SECONDS`` bounds one), so 100 pages is already a
#: long wait; a file of thousands of blank scans (1.4 MB) would otherwise be hours of OCR.
MAX_OCR_PAGES: Final = 100
#: Bytes of markup (XML parts of a DOCX/PPTX/XLSX read together, or one HTML/XLIFF file) parsed for one
#: document. The tree lxml builds is several times the text it parses, so this bounds memory; DeepL documents
#: 30 MB files and 1 million characters for Office formats, 5 MB for HTML.
MAX_MARKUP_BYTES: Final = 128 * 1024 * 1024
#: Markup tags (``<``) in the parts parsed for one document, counted before parsing. The tree lxml builds and
#: the handler's objects take about 300 bytes a tag (an 816 KB DOCX of 5 million tags, within every zip
#: bound, peaked at 1.6 GB), so 2 million stay well under a gigabyte: about 500,000 spreadsheet cells (the
#: 100,000 some services allow, five times over) or ten thousand Word pages.
MAX_MARKUP_NODES: Final = 2_000_000
#: Expansion of a whole zip container (DOCX/PPTX/XLSX: declared uncompressed over compressed bytes of all
#: entries), checked once it expands past ZIP_RATIO_FLOOR_BYTES. Office files compress 3 to 30 times overall
#: (their media barely compress); a container of many small highly compressed entries, each under the
#: per-entry check, would otherwise inflate to the full uncompressed bound (1 GiB).
MAX_ZIP_RATIO: Final = 100
ZIP_RATIO_FLOOR_BYTES: Final = 16 * 1024 * 1024

# ----- the dynamic batcher (issue 10) --------------------------------------------------------------------
#: The most (milliseconds) a batch may wait to fill while its route's backend is busy (an idle one never
#: waits): ``DRAGOMAN_BATCH_WINDOW_MS``. It waits a quarter of the route's recent call time, up to this:
#: Triton's dynamic batcher leaves its delay to the user (0 by default); 20 ms is small beside a base-size
#: pack's call of 100-400 ms on a 2-core machine, and lets the callers of a batch that just ended meet again.
BATCH_WINDOW_MS: Final = 20.0
#: The batcher's budget per backend call (``DRAGOMAN_BATCH_MAX_SEGMENTS``, ``DRAGOMAN_BATCH_MAX_CHARS``: a
#: single segment longer than the character budget still goes, alone) and the segments allowed to wait per
#: route before a caller is refused with 503 ``saturated`` (``DRAGOMAN_BATCH_MAX_QUEUED``). 64 segments is the
#: size at which a base-size pack's call stops gaining per segment on a CPU; 16,000 characters keeps one call
#: (which cannot be interrupted) to a few seconds there.
BATCH_MAX_SEGMENTS: Final = 64
BATCH_MAX_CHARS: Final = 16_000
BATCH_MAX_QUEUED: Final = 8192
#: The most each of those settings may be set to: past these a value is a mistake (a "wait window" of more
#: than a second is no longer a window; a batch of thousands of segments would hold a route for minutes).
BATCH_WINDOW_MS_CEILING: Final = 1000.0
BATCH_MAX_SEGMENTS_CEILING: Final = 4096
BATCH_MAX_CHARS_CEILING: Final = 1_000_000
BATCH_MAX_QUEUED_CEILING: Final = 1_000_000

# ----- the hosted service's database on PostgreSQL (issue 13) --------------------------------------------
#: Connections each process keeps open to PostgreSQL, and how many more it may open under load
#: (``DRAGOMAN_DB_POOL_SIZE``, ``DRAGOMAN_DB_MAX_OVERFLOW``). An API process's thread pool runs up to 40
#: requests at once and most hold a connection for a few milliseconds; 10 + 20 per process leaves room for
#: N API processes and M workers under PostgreSQL's default 100 connections only for small N + M: raise
#: ``max_connections`` or put PgBouncer in front for more.
DB_POOL_SIZE: Final = 10
DB_MAX_OVERFLOW: Final = 20
#: Seconds a request waits for a free pooled connection before it is answered 503
#: (``DRAGOMAN_DB_POOL_TIMEOUT``).
DB_POOL_TIMEOUT_S: Final = 10.0
#: Seconds a new connection may take (libpq waits for ever by default: a server behind a dropped route).
DB_CONNECT_TIMEOUT_S: Final = 5.0

# ----- MCP tools over many files and over the packs (issue 17, R3) -------------------------------------
#: Files one ``translate_files`` call translates (a folder or a glob): more is ``limit_exceeded`` before any
#: work, naming how to narrow the pattern. Each file keeps its own 200 MB bound.
MAX_MCP_FILES: Final = 100
#: Folder entries a ``translate_files`` call may look at while it expands its folder or glob: a ``**`` over a
#: home folder is refused instead of walking it for minutes.
MAX_MCP_SCAN_ENTRIES: Final = 50_000
#: Language pairs one ``list_pairs`` call answers with their routes (an NLLB-200 pack alone reaches about
#: 40,000): more are counted and left out (``truncated``), a source or target narrows the list.
MAX_LIST_PAIRS: Final = 2_000
