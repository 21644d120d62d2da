"""Protocol overhead of ``dragoman mcp``: a short translate over stdio next to the same call in-process.

    python benchmarks/mcp.py                 # a tiny generated en->es pack (no download, Apertium off)
    python benchmarks/mcp.py --packs-dir DIR --source en --target es --apertium

All sides translate the same text with the same settings, after a warm-up that loads the pack, in one
run; the difference of the medians is the cost of the MCP layer (JSON-RPC over pipes, validation,
the hop to a worker thread). Target: under 3 ms at the median. A third side calls the same server built
in this process through the SDK's in-memory transport: what is left between it and stdio is the transport
(JSON encoding, pipes, the other process), the rest is the SDK's dispatch and the tool itself.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio

HERE = Path(__file__).resolve().parent


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def summary(name: str, seconds: list[float]) -> str:
    ms = [s * 1000 for s in seconds]
    return (
        f"{name:<12} median {statistics.median(ms):8.3f} ms   p99 {percentile(ms, 99):8.3f} ms   "
        f"min {min(ms):7.3f} ms   (n={len(ms)})"
    )


async def measure(env: dict[str, str], args: argparse.Namespace) -> dict[str, list[float]]:
    """Round trips over stdio and over the in-memory transport, the same call in-process, and the engine's
    own time inside the stdio server.

    The sides alternate call by call, so all see the same machine load."""
    from mcp import Client, ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    from dragoman.server.mcp.server import build_server
    from dragoman.settings import Settings
    from dragoman.translation.engine import Engine
    from dragoman.translation.types import TranslateOptions

    settings = Settings.from_env(env)
    server = StdioServerParameters(command=sys.executable, args=["-m", "dragoman.cli", "mcp"], env=env)
    arguments = {"text": args.text, "target": args.target, "source": args.source}
    times: dict[str, list[float]] = {"local": [], "memory": [], "remote": [], "inside": []}
    with Engine(settings) as engine:
        async with (
            stdio_client(server) as (read, write),
            ClientSession(read, write) as session,
            Client(build_server(settings), mode="legacy") as memory,
        ):
            await session.initialize()
            for i in range(args.warmup + args.n):
                started = time.perf_counter()
                engine.translate(args.text, TranslateOptions(args.target, source=args.source))
                local_seconds = time.perf_counter() - started
                started = time.perf_counter()
                in_memory = await memory.call_tool("translate", arguments)
                memory_seconds = time.perf_counter() - started
                started = time.perf_counter()
                result = await session.call_tool("translate", arguments)
                remote_seconds = time.perf_counter() - started
                for name, answer in (("in memory", in_memory), ("over stdio", result)):
                    if answer.is_error or answer.structured_content is None:
                        raise SystemExit(f"translate failed {name}: {answer.content}")
                if i >= args.warmup:
                    times["local"].append(local_seconds)
                    times["memory"].append(memory_seconds)
                    times["remote"].append(remote_seconds)
                    times["inside"].append(float((result.structured_content or {})["seconds"]))
    return times


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--packs-dir", help="use these packs instead of a tiny generated one")
    parser.add_argument("--apertium", action="store_true", help="leave Apertium enabled")
    parser.add_argument("--text", default="The house is red.")
    parser.add_argument("--source", default="en")
    parser.add_argument("--target", default="es")
    parser.add_argument("-n", type=int, default=300, help="timed calls per side")
    parser.add_argument("--warmup", type=int, default=30)
    args = parser.parse_args()
    # This file is named mcp.py: run as a script, its directory would shadow the SDK's ``mcp`` package.
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
    with tempfile.TemporaryDirectory(prefix="dragoman-bench-") as tmp:
        env = dict(os.environ)
        env["DRAGOMAN_GLOSSARY"] = str(Path(tmp) / "glossary.json")  # the same (empty) glossary on both sides
        env["DRAGOMAN_APERTIUM"] = "1" if args.apertium else "0"
        if args.packs_dir:
            env["DRAGOMAN_PACKS_DIR"] = args.packs_dir
        else:
            from dragoman.testing.tinypack import build_argos_pack

            build_argos_pack(Path(tmp) / "packs" / "translate-en_es", "en", "es")
            env["DRAGOMAN_PACKS_DIR"] = str(Path(tmp) / "packs")
        times = anyio.run(measure, env, args)
    local, memory, remote = times["local"], times["memory"], times["remote"]
    print(f"translate {args.text!r} {args.source}->{args.target}, {args.n} calls after {args.warmup} warm-up")
    print(summary("in-process", local))
    print(summary("mcp memory", memory) + "  the same server in this process, the SDK's in-memory transport")
    print(summary("mcp stdio", remote))
    print(
        summary("(in server)", times["inside"]) + "  engine time of the stdio calls, measured by the engine"
    )
    overhead = (statistics.median(remote) - statistics.median(local)) * 1000
    p99 = (percentile(remote, 99) - percentile(local, 99)) * 1000
    verdict = "OK" if overhead < 3 else "ABOVE TARGET"
    print(f"protocol overhead: median {overhead:.3f} ms ({verdict}: target < 3 ms), p99 {p99:.3f} ms")
    dispatch = (statistics.median(memory) - statistics.median(local)) * 1000
    print(
        f"  of which SDK dispatch and tool: {dispatch:.3f} ms, stdio transport: {overhead - dispatch:.3f} ms"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
