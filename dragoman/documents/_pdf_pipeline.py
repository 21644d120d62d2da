"""The order of work on a PDF, and the two threads that share it.

MuPDF work (reading, OCR, removing text, laying out, saving) runs on one worker thread; translation and
progress stay on the calling thread (a front door's progress callback and cancellation check may need the
thread it handed the work to, as the MCP server's do). The worker asks for translations a group of pages at
a time (at least :data:`GROUP_TEXTS` texts, :data:`MAX_GROUPS` groups at most), and lays out each group
while the next one is being translated: the format layer's cost is mostly hidden behind the engine's time
when a core is free (Apertium runs in other processes; CTranslate2 releases the GIL). When the source
language is known, the first groups are asked for while later pages are still being read; otherwise every
page is read first (OCR of a scan needs the language, which the translator detects on its first call). The
text is removed from every page while the first group is translated. Progress counts the document's texts
across groups: each group goes to the translator with the count of texts before it and the document's total.
Set :data:`MAX_GROUPS` to 1 for a single translator call per document. Bookmark titles, if any, go to
the translator in one more call after the pages' texts.

Messages go through two queues: the worker's requests (translate, progress, done, error) and the
caller's answers (translations, or None to stop). MuPDF is not thread-safe and its calls hold the GIL: one
PDF is worked on at a time in the process (:data:`MUPDF_LOCK`), and the worker yields the GIL after each
page it writes so that the caller can feed the engine.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dragoman.documents import _bounds
from dragoman.documents import _pdf_document as document
from dragoman.documents import _pdf_text as pdf_text
from dragoman.documents._pdf_layout import PageWork
from dragoman.documents.base import DocumentReport, TextTranslator
from dragoman.languages.catalogue import get
from dragoman.progress import ProgressCallback

log = logging.getLogger("dragoman.documents.pdf")

#: Held while a PDF is worked on: MuPDF's context may not be used by two threads at once.
MUPDF_LOCK = threading.Lock()
#: Fewest texts in a group of pages sent to the translator, and most groups in a document.
GROUP_TEXTS = 48
MAX_GROUPS = 8


class _Stop(Exception):
    """The caller stopped (its translation failed or was cancelled): the worker ends without saving."""


def group_size(texts: int) -> int:
    """Texts per group for a document of about ``texts`` texts."""
    return max(GROUP_TEXTS, -(-texts // MAX_GROUPS))


def groups(works: Sequence[PageWork], size: int) -> list[list[PageWork]]:
    """Consecutive pages in groups of at least ``size`` texts (the last one may hold fewer)."""
    out: list[list[PageWork]] = [[]]
    count = 0
    for work in works:
        if count >= size:
            out.append([])
            count = 0
        out[-1].append(work)
        count += len(work.blocks)
    return [group for group in out if any(w.blocks for w in group)]


def _check_bounds(doc: Any, name: str) -> None:
    """Refuse a PDF of too many pages, or of too many scanned pages to OCR (issue 9, item 2), before any
    page is read: a scan is counted the way the reader finds one (images, no text), from the text layer
    only, which takes milliseconds a page where OCR takes seconds."""
    _bounds.check_pages(doc.page_count, name)
    if doc.page_count > _bounds.MAX_OCR_PAGES:
        scans = sum(1 for page in doc if not page.get_text("text").strip() and page.get_images(full=False))
        _bounds.check_ocr_pages(scans, name)


def _texts(group: Sequence[PageWork]) -> list[str]:
    return [b.text for w in group for b in w.blocks]


class PdfJob:
    """One PDF translated into ``output``; :meth:`run` on the calling thread drives it."""

    def __init__(self, source: Path, output: Path, translate: TextTranslator) -> None:
        self.source = source
        self.output = output
        self.translate = translate
        self.requests: queue.Queue[tuple[str, Any]] = queue.Queue()
        self.answers: queue.Queue[list[str] | None] = queue.Queue()
        self.report = DocumentReport()
        # once run: the pages as read (their blocks) and the blocks' translations, for the DOCX export
        self.works: list[PageWork] = []
        self.translations: list[str] = []
        self.stopped = threading.Event()  # set when the caller gives up: the worker stops at the next page

    def run(self, progress: ProgressCallback | None) -> DocumentReport:
        """Translate the worker's texts as it asks for them; the report once the PDF is saved."""
        with MUPDF_LOCK:
            worker = threading.Thread(target=self._work, name="dragoman-pdf", daemon=True)
            worker.start()
            try:
                while True:
                    kind, payload = self.requests.get()
                    if kind == "translate":
                        texts, done, total = payload
                        self.answers.put(self._translate_group(texts, done, total))
                    elif kind == "progress":
                        if progress is not None:
                            progress(*payload)
                    elif kind == "error":
                        raise payload
                    else:
                        return self.report
            finally:
                self.stopped.set()
                self.answers.put(None)  # a worker still waiting for translations stops
                worker.join()

    def _translate_group(self, texts: list[str], done: int, total: int) -> list[str]:
        """One group through the translator, which counts its progress as the document's: the texts done
        before this group, the document's total (the count only grows)."""
        return self.translate(texts, done=done, total=total)

    # ----- the worker thread ------------------------------------------------------------------------
    def _ask(self, texts: list[str], done: int, total: int) -> None:
        self.requests.put(("translate", (texts, done, total)))

    def _answer(self) -> list[str]:
        answer = self.answers.get()
        if answer is None:
            raise _Stop
        return answer

    def _work(self) -> None:
        try:
            self._translate()
        except _Stop:
            log.debug("PDF translation of %s stopped by the caller", self.source.name)
        except BaseException as exc:  # handed to the calling thread, which raises it
            self.requests.put(("error", exc))
        else:
            self.requests.put(("done", None))

    def _translate(self) -> None:
        target = get(self.translate.target)
        doc = document.open_pdf(self.source)
        try:
            report = self.report
            report.pages = doc.page_count
            _check_bounds(doc, self.source.name)
            document.check_document(doc, self.source.name, target.flores, report)
            rotations = document.unrotate(doc)
            reader = document.PageReader(doc, self.translate, report, grow=not target.rtl)
            # With the source language known, groups are asked for while later pages are still read (OCR
            # of a scan needs the language; without it the translator detects it on its first call).
            stream = self.translate.source is not None
            works: list[PageWork] = []
            batches: list[list[PageWork]] = []  # groups asked for, in order
            asked = pending = grouped = 0  # texts asked for; texts read, not asked for; pages in batches
            for number in range(doc.page_count):
                self._check_stopped()
                work = reader.read(number)
                _bounds.check_ocr_pages(reader.scanned, self.source.name)  # scans the first count missed
                works.append(work)
                pending += len(work.blocks)
                if reader.scanned:
                    self._progress(number + 1, doc.page_count, "reading pages (OCR)")
                estimate = (asked + pending) * doc.page_count // (number + 1)
                if stream and pending >= group_size(estimate) and number + 1 < doc.page_count:
                    batches.append(works[grouped:])
                    grouped = len(works)
                    self._ask(_texts(batches[-1]), asked, estimate)
                    asked, pending = asked + pending, 0
            reader.finish(works)
            texts = [b.text for w in works for b in w.blocks]
            batches += groups(works[grouped:], group_size(len(texts)))
            if batches and asked == 0:
                self._ask(_texts(batches[0]), 0, len(texts))
                asked = len(_texts(batches[0]))
            rewriter = document.Rewriter(doc, rtl=target.rtl, report=report, book=reader.book)
            for work in works:  # while the first groups are translated
                self._check_stopped()
                rewriter.remove(work)
            translations: list[str] = []
            done = 0
            for index, batch in enumerate(batches):
                following = index + 1
                if following < len(batches) and asked <= done + len(_texts(batch)):
                    # the next group is translated while this one is laid out
                    self._ask(_texts(batches[following]), asked, len(texts))
                    asked += len(_texts(batches[following]))
                answer = self._answer()
                translations += answer
                done += len(answer)
                position = 0
                for work in batch:
                    rewriter.write(work, answer[position : position + len(work.blocks)])
                    time.sleep(0)  # let the calling thread take the GIL to feed the engine
                    position += len(work.blocks)
            bookmarks = document.outline(doc)
            if bookmarks:  # bookmark titles: one more call, after the pages' texts
                self._ask([title for _, title in bookmarks], len(texts), len(texts) + len(bookmarks))
                document.set_outline(doc, bookmarks, self._answer())
            rewriter.finish()
            document.rotate_back(doc, rotations)
            report.segments = len(texts)
            # as read on the page: placeholders of inline runs replaced by their text
            blocks = [b for w in works for b in w.blocks]
            plain = [pdf_text.plain_text(b, b.text) for b in blocks]
            report.characters = sum(len(t) for t in plain)
            report.extracted_text = "\n\n".join(plain)
            report.translated_text = "\n\n".join(
                pdf_text.plain_text(b, t) for b, t in zip(blocks, translations, strict=True)
            )
            document.save(doc, self.output)
            self.works, self.translations = works, translations
        finally:
            document.close(doc)

    def _check_stopped(self) -> None:
        if self.stopped.is_set():
            raise _Stop

    def _progress(self, done: int, total: int, message: str) -> None:
        self.requests.put(("progress", (done, total, message)))
