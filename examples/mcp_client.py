"""An agent's side of ``dragoman mcp``: launch the server over stdio with the MCP SDK and call every tool.

Run it from the repository (``make demo``)::

    python examples/mcp_client.py              # your installed packs (and Apertium, if installed)
    python examples/mcp_client.py --tiny-pack  # a tiny built-in en->es pack: works offline, gibberish output

The glossary and the files it writes live in a temporary directory, so your own glossary is untouched.
The script offers that directory to the server as the client's root, as an editor host would.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession
from mcp.client.session import ClientRequestContext
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_types import CallToolResult, ListRootsResult, Root
from pydantic import FileUrl


def show(name: str, result: CallToolResult) -> None:
    """Print what a model would read (the text block) and what a program would use (structured content)."""
    text = " ".join(getattr(block, "text", "") for block in result.content)
    status = "ERROR" if result.is_error else "ok"
    print(f"\n== {name} [{status}]")
    print(f"   text: {text[:300]}{'...' if len(text) > 300 else ''}")
    if result.structured_content is not None:
        shown = json.dumps(result.structured_content, ensure_ascii=False)
        print(f"   structured: {shown[:500]}{'...' if len(shown) > 500 else ''}")


async def demo(env: dict[str, str], workdir: Path) -> None:
    server = StdioServerParameters(
        command=sys.executable, args=["-m", "dragoman.cli", "mcp"], env=env, cwd=workdir
    )

    async def list_roots(context: ClientRequestContext) -> ListRootsResult:
        return ListRootsResult(roots=[Root(uri=FileUrl(workdir.as_uri()), name="demo workspace")])

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        print(f"   progress: {progress:g}/{total if total is not None else '?'} {message or ''}")

    async with (
        stdio_client(server) as (read, write),
        ClientSession(read, write, list_roots_callback=list_roots) as s,
    ):
        info = await s.initialize()
        print(f"connected to {info.server_info.name} {info.server_info.version} ({info.protocol_version})")
        tools = (await s.list_tools()).tools
        print("tools: " + ", ".join(tool.name for tool in tools))

        calls: list[tuple[str, dict[str, Any]]] = [
            ("engine_status", {}),
            ("list_languages", {}),
            ("detect_language", {"text": "Bonjour tout le monde, comment allez-vous aujourd'hui ?"}),
            ("glossary_add", {"entries": [{"term": "dragoman", "translation": "dragomán"}], "target": "es"}),
            ("glossary_list", {}),
            (
                "translate",
                {"text": "The dragoman translates on this device.", "target": "es", "source": "en"},
            ),
            ("translate", {"text": "Hello.", "target": "klingonese"}),  # an error the model can act on
            ("glossary_remove", {"terms": ["dragoman"], "target": "es"}),
            ("translate_file", {"path": "notes.txt", "target": "es", "source": "en"}),
            ("translate_file", {"path": "report.docx", "target": "es", "source": "en"}),
            ("ocr_translate", {"path": "sign.png", "target": "es", "source": "en", "render": True}),
        ]
        for name, arguments in calls:
            show(name, await s.call_tool(name, arguments))

        texts = [f"This is sentence number {i}." for i in range(1, 9)]
        batch = await s.call_tool(
            "translate_batch", {"texts": texts, "target": "es", "source": "en"}, progress_callback=on_progress
        )
        show("translate_batch", batch)
        written = workdir / "notes.es.txt"
        if written.exists():
            print(f"\n{written} holds:\n{written.read_text(encoding='utf-8')}")
        report = workdir / "report.es.docx"
        if report.exists():
            import docx

            print(f"{report} holds (bold runs in **):")
            for paragraph in docx.Document(str(report)).paragraphs:
                print("  " + "".join(f"**{r.text}**" if r.bold else r.text for r in paragraph.runs))


def make_documents(workdir: Path) -> None:
    """A small DOCX with a bold word and a table, and a PNG sign, for the file tools."""
    import docx
    from PIL import Image, ImageDraw, ImageFont

    document = docx.Document()
    document.add_heading("Quarterly report", level=1)
    paragraph = document.add_paragraph("The house is ")
    paragraph.add_run("red").bold = True
    paragraph.add_run(" and the garden is big.")
    document.add_table(rows=1, cols=2).rows[0].cells[0].text = "The dog is small."
    document.save(str(workdir / "report.docx"))
    image = Image.new("RGB", (900, 160), "white")
    font_path = Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")
    font = ImageFont.truetype(str(font_path), 48) if font_path.is_file() else ImageFont.load_default()
    ImageDraw.Draw(image).text((30, 50), "The house is red.", fill="black", font=font)
    image.save(workdir / "sign.png")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tiny-pack", action="store_true", help="use a tiny generated en->es pack")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="dragoman-demo-") as tmp:
        workdir = Path(tmp) / "workspace"
        workdir.mkdir()
        (workdir / "notes.txt").write_text(
            "Meeting notes.\n\nThe train leaves at nine. Bring the tickets.\n", encoding="utf-8"
        )
        make_documents(workdir)
        env = dict(os.environ)
        env["DRAGOMAN_GLOSSARY"] = str(Path(tmp) / "glossary.json")
        if args.tiny_pack:
            from dragoman.testing.tinypack import build_argos_pack

            packs = Path(tmp) / "packs"
            build_argos_pack(packs / "translate-en_es", "en", "es")
            env.update(DRAGOMAN_PACKS_DIR=str(packs), DRAGOMAN_APERTIUM="0")
        anyio.run(demo, env, workdir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
