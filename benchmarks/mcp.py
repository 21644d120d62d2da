"""Protocol overhead of ``dragoman mcp``: a short translate over stdio next to the same call in-process.

    python benchmarks/mcp.py                 # a tiny generated en->es pack (no download, Apertium off)
    python benchmarks/mcp.py --packs-dir DIR --source en --target es --apertium

Both sides translate the same text with the same settings, after a warm-up that loads the pack, in one
run; the difference of the medians is the cost of the MCP layer (JSON-RPC over pipes, validation,
the hop to a worker thread). Target: under 3 ms at the median.
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


async def measure(
    env: dict[str, str], args: argparse.Namespace
) -> tuple[list[float], list[float], list[float]]:
    """Round trips over stdio, the same call in-process, and the engine's own time inside the server.

    The two sides alternate call by call, so both see the same machine load."""
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    from dragoman.settings import Settings
    from dragoman.translation.engine import Engine
    from dragoman.translation.types import TranslateOptions

    server = StdioServerParameters(command=sys.executable, args=["-m", "dragoman.cli", "mcp"], env=env)
    arguments = {"text": args.text, "target": args.target, "source": args.source}
    local: list[float] = []
    remote: list[float] = []
    inside: list[float] = []
    with Engine(Settings.from_env(env)) as engine:
        async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            for i in range(args.warmup + args.n):
                started = time.perf_counter()
                engine.translate(args.text, TranslateOptions(args.target, source=args.source))
                local_seconds = time.perf_counter() - started
                started = time.perf_counter()
                result = await session.call_tool("translate", arguments)
                remote_seconds = time.perf_counter() - started
                if result.is_error or result.structured_content is None:
                    raise SystemExit(f"translate failed over stdio: {result.content}")
                if i >= args.warmup:
                    local.append(local_seconds)
                    remote.append(remote_seconds)
                    inside.append(float(result.structured_content["seconds"]))
    return local, remote, inside


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
        local, remote, inside = anyio.run(measure, env, args)
    print(f"translate {args.text!r} {args.source}->{args.target}, {args.n} calls after {args.warmup} warm-up")
    print(summary("in-process", local))
    print(summary("mcp stdio", remote))
    print(summary("(in server)", inside) + "  engine time of the stdio calls, measured by the engine")
    overhead = (statistics.median(remote) - statistics.median(local)) * 1000
    p99 = (percentile(remote, 99) - percentile(local, 99)) * 1000
    verdict = "OK" if overhead < 3 else "ABOVE TARGET"
    print(f"protocol overhead: median {overhead:.3f} ms ({verdict}: target < 3 ms), p99 {p99:.3f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
