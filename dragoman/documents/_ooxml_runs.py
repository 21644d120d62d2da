"""Writing a decoded paragraph back into Office Open XML runs, shared by WordprocessingML (DOCX) and
DrawingML (PPTX, charts, SmartArt): the two differ only in their tag names, in how a text element is
written, in where runs live and in what a translated run marks (language, right-to-left)."""

from __future__ import annotations

from collections.abc import Sequence

from lxml import etree  # type: ignore[import-untyped]

from dragoman.documents._runs import xml_safe


class OoxmlRunWriter:
    """A :class:`~dragoman.documents._runs.RunWriter` over ``<r><rPr/><t/></r>`` runs of one paragraph."""

    run_tag: str
    rpr_tag: str
    t_tag: str

    def __init__(self, paragraph: etree._Element, handles: list[etree._Element | None]) -> None:
        self.paragraph = paragraph
        self.handles = handles

    def _t(self, slot: int) -> etree._Element:
        t = self.handles[slot]
        assert t is not None, "a text slot has a text element"
        return t

    def _write(self, t: etree._Element, text: str) -> None:
        t.text = xml_safe(text)

    def _mark(self, run: etree._Element, text: str) -> None:
        """Mark a run that now holds translated ``text`` (its language, its direction)."""

    def _container(self, first_run: etree._Element) -> etree._Element | None:
        """The element the paragraph's runs must all sit in to be rebuilt."""
        return self.paragraph

    def set_text(self, slot: int, text: str) -> None:
        t = self._t(slot)
        self._write(t, text)
        run = t.getparent()
        if run is not None:
            self._mark(run, text)

    def rebuild(self, slots: Sequence[int], runs: Sequence[tuple[int, str]]) -> bool:
        old = [self._t(s).getparent() for s in slots]
        parent = self._container(old[0]) if old[0] is not None else None
        if parent is None:
            return False
        for run in old:
            if run is None or run.getparent() is not parent:
                return False
            if [c.tag for c in run if isinstance(c.tag, str) and c.tag != self.rpr_tag] != [self.t_tag]:
                return False
        new: list[etree._Element] = []
        for slot, text in runs:
            exemplar = self._t(slot).getparent()
            assert exemplar is not None
            run = exemplar.makeelement(self.run_tag, {})
            rpr = exemplar.find(self.rpr_tag)
            if rpr is not None:
                run.append(etree.fromstring(etree.tostring(rpr)))
            t = run.makeelement(self.t_tag, {})
            run.append(t)
            self._write(t, text)
            self._mark(run, text)
            new.append(run)
        index = parent.index(old[0])
        for run in old:
            parent.remove(run)
        for offset, run in enumerate(new):
            parent.insert(index + offset, run)
        return True
