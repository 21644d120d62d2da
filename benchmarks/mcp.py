"""Protocol overhead of ``dragoman mcp``: a short translate over stdio next to the same call in-process.

    python benchmarks/mcp.py                 # a tiny generated en->es pack (no download, Apertium off)
    python benchmarks/mcp.py --packs-dir DIR --source en --target es --apertium
    python benchmarks/mcp.py --quick         # a smoke run: 30 rounds

All sides translate the same text with the same settings, after a warm-up that loads the pack, in one
run, alternating call by call (in-process, in memory, over stdio, in-process, ...: one round each); the
median of the rounds' own differences is the cost of the MCP layer (JSON-RPC over pipes, validation,
the hop to a worker thread). Target: under 3 ms at the median. A third side calls the same server built
in this process through the SDK's in-memory transport: what is left between it and stdio is the transport
(JSON encoding, pipes, the other process), the rest is the SDK's dispatch and the tool itself.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import _harness as harness
import anyio

HERE = Path(__file__).resolve().parent


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def summary(name: str, seconds: list[float]) -> str:
    ms = [s * 1000 for s in seconds]
    spread = harness.Spread.of(ms)
    return (
        f"{name:<12} median {spread.median:8.3f} ms   p99 {percentile(ms, 99):8.3f} ms   "
        f"min {spread.low:7.3f} ms   max {spread.high:8.3f} ms   (n={len(ms)})"
    )


async def measure(
    env: dict[str, str], args: argparse.Namespace, rounds: int
) -> tuple[harness.Rounds, list[float]]:
    """Round trips over stdio and over the in-memory transport, the same call in-process, and the engine's
    own time inside the stdio server.

    The sides alternate call by call (one round each), so all see the same machine load."""
    from mcp import Client, ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    from dragoman.server.mcp.server import build_server
    from dragoman.settings import Settings
    from dragoman.translation.engine import Engine
    from dragoman.translation.types import TranslateOptions

    settings = Settings.from_env(env)
    server = StdioServerParameters(command=sys.executable, args=["-m", "dragoman.cli", "mcp"], env=env)
    arguments = {"text": args.text, "target": args.target, "source": args.source}
    inside: list[float] = []
    with Engine(settings) as engine:
        async with (
            stdio_client(server) as (read, write),
            ClientSession(read, write) as session,
            Client(build_server(settings), mode="legacy") as memory,
        ):
            await session.initialize()

            async def local() -> None:
                engine.translate(args.text, TranslateOptions(args.target, source=args.source))

            async def in_memory() -> None:
                answer = await memory.call_tool("translate", arguments)
                if answer.is_error or answer.structured_content is None:
                    raise SystemExit(f"translate failed in memory: {answer.content}")

            async def over_stdio() -> None:
                answer = await session.call_tool("translate", arguments)
                if answer.is_error or answer.structured_content is None:
                    raise SystemExit(f"translate failed over stdio: {answer.content}")
                inside.append(float(answer.structured_content["seconds"]))

            times = await harness.alternate_async(
                {"local": local, "memory": in_memory, "remote": over_stdio}, rounds, warmup=args.warmup
            )
    return times, inside[args.warmup :]


def main(argv: list[str] | None = None) -> int:
    parser = harness.parser(__doc__, rounds=300, quick_rounds=30)
    parser.add_argument("--packs-dir", help="use these packs instead of a tiny generated one")
    parser.add_argument("--apertium", action="store_true", help="leave Apertium enabled")
    parser.add_argument("--text", default="The house is red.")
    parser.add_argument("--source", default="en")
    parser.add_argument("--target", default="es")
    parser.add_argument("-n", type=int, dest="rounds", help="the same as --rounds (the old spelling)")
    parser.add_argument("--warmup", type=int, default=None, help="untimed rounds first (30; 5 with --quick)")
    args = parser.parse_args(argv)
    rounds = harness.rounds_of(args)
    if args.warmup is None:
        args.warmup = 5 if args.quick else 30
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
        times, inside = anyio.run(measure, env, args, rounds)
    local, memory, remote = times.of("local"), times.of("memory"), times.of("remote")
    print(
        f"translate {args.text!r} {args.source}->{args.target}, {rounds} alternated rounds (in-process, "
        f"in memory, over stdio) after {args.warmup} warm-up"
    )
    print(summary("in-process", local))
    print(summary("mcp memory", memory) + "  the same server in this process, the SDK's in-memory transport")
    print(summary("mcp stdio", remote))
    print(summary("(in server)", inside) + "  engine time of the stdio calls, measured by the engine")
    overhead = times.difference("remote", "local").scaled(1000)
    p99 = (percentile(remote, 99) - percentile(local, 99)) * 1000
    verdict = "OK" if overhead.median < 3 else "ABOVE TARGET"
    print(
        f"protocol overhead, median of the rounds' own differences: {overhead.text('.3f', ' ms')} "
        f"({verdict}: target < 3 ms); p99 {p99:.3f} ms"
    )
    dispatch = times.difference("memory", "local").scaled(1000)
    transport = times.difference("remote", "memory").scaled(1000)
    print(
        f"  of which SDK dispatch and tool: {dispatch.text('.3f', ' ms')}, stdio transport: "
        f"{transport.text('.3f', ' ms')}"
    )
    print(f"  stdio / in-process time: {harness.ratio_text(times.ratio('remote', 'local'))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
