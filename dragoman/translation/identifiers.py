"""Find code in running text: identifiers, command-line options, paths and commands (issue 11, item 1).

:func:`identifier_spans` lists the spans of a sentence that are code rather than words and must come
through translation unchanged: ``snake_case`` and ``UPPER_CASE`` names (an inner underscore), dunders
(``__init__``), ``a::b`` names, ``--flags`` and short options (``-x``, ``-rf``), Unix paths
(``/usr/share/doc/``, ``~/.bashrc``, ``src/main.c``), Windows paths (``C:\\Windows``, ``\\\\host\\share``),
dotted names of three parts or more (``os.path.join``), two-part names whose last part is a file
extension or a web domain nobody reads as a word (``config.yaml``, ``setup.py``, ``crates.io``,
``example.com``: :data:`_NAME_ENDINGS`; ``e.g.``, ``it.is`` or ``go.to`` stay words), handles and decorators
(``@rust-lang``, ``@property``),
calls (``c.setFillColor(blue)``, ``print()``, ``f(x)``; not ``file(s)``), camelCase and PascalCase names
with an inner capital (``setFillColor``, ``iPhone``) and a few unambiguous command lines (``make install``,
``dpkg --get-selections > file``, ``sudo apt-get install -y``).

The rules are chosen not to take ordinary words: an all-caps word without an underscore (``NASA``, shouted
English) stays text, as do ``and/or``, ``e-mail``, ``U.S.A.`` and sentence ends. Every pattern is linear in
its input (``tests/translation/test_scanners_linear.py`` times each on adversarial text), and a pattern
runs only when the text holds its trigger.
"""

from __future__ import annotations

import re
from collections.abc import Callable

#: Words after ``make`` that make it a command line, not the verb ("make install"; not "make clean water").
_MAKE_TARGETS = r"(?:install|uninstall|distclean|check)"
#: Programs whose names are not English words; one option, path, redirection or subcommand after the
#: name makes a command line of it.
PROGRAMS = frozenset(
    """apt-get apt-cache aptitude apt dpkg dpkg-query dpkg-reconfigure dnf yum zypper pacman brew snap
    flatpak pip pip3 pipx npm npx yarn pnpm cargo rustup gem bundle composer conda git svn hg docker podman
    kubectl helm systemctl journalctl cmake ninja meson gcc g++ clang javac mvn gradle python python3 node
    deno ls cd cp mv rm mkdir rmdir chmod chown chgrp grep egrep sed awk tar gzip gunzip unzip curl wget ssh
    scp rsync sudo ln df du ps umount useradd usermod update-alternatives ifconfig iptables msgfmt xgettext
    msgmerge dragoman""".split()
)
_PROGRAMS = "(?:" + "|".join(re.escape(p) for p in sorted(PROGRAMS, key=len, reverse=True)) + ")"
_SUBCOMMANDS = (
    r"(?:install|uninstall|remove|purge|update|upgrade|clone|commit|push|pull|fetch|checkout|status|init|"
    r"build|run|start|stop|restart|enable|disable|reload|exec|list|search|show|config|add|test|publish)"
)
_OPTION = r"--?[A-Za-z0-9][\w-]*(?:=[^\s,;]*[^\s,;.])?"
_PATHLIKE = r"(?:[~.]{0,2}/[\w.+@%~/-]+|[\w.-]+/[\w.+@%/-]+)"
_REDIRECT = r"(?:2>&1|(?:>>|[|<>]|&&)[ \t]*[\w./~-]+)"
_ARGUMENT = rf"(?:{_OPTION}|{_PATHLIKE}|{_REDIRECT})"

#: Endings that make a two-part dotted name code (pattern 12): file extensions and web domains that are not
#: words of the languages translated here (``.is``, ``.it``, ``.to``, ``.go``, ``.me``, ``.in`` are).
_NAME_ENDINGS = (
    "yaml yml json jsonl toml ini cfg conf md rst txt py pyi ipynb js mjs ts tsx jsx rs java kt cpp "
    "hpp cc cxx cs rb php pl lua swift scala html htm css scss xml xsd xsl csv tsv sql sh bash zsh "
    "ps1 bat cmd exe dll dylib zip tar gz tgz bz2 xz 7z whl deb rpm apk dmg iso png jpg jpeg gif svg "
    "webp ico pdf docx xlsx pptx odt ods odp epub log lock env srt vtt po pot mo xlf xliff mp3 mp4 "
    "wav flac ogg mkv webm mov onnx gguf com org net io dev app ai edu gov info xyz"
).split()
_PATTERNS: tuple[re.Pattern[str], ...] = tuple(
    re.compile(p)
    for p in (
        # 0 snake_case and UPPER_CASE: an underscore between two letters or digits (not _emphasis_)
        r"(?<!\w)_*[^\W_]+(?:_+[^\W_]+)+_*",
        # 1 dunders: __init__, __name__
        r"(?<!\w)__[^\W_]\w*__(?!\w)",
        # 2 a::b, ::global, std::vector
        r"(?<![\w:])(?:::[A-Za-z_~]\w*|[A-Za-z_~]\w*::[A-Za-z_~]\w*)(?:::[A-Za-z_~]\w*)*",
        # 3 long options: --get-selections, --output=file.txt
        r"(?<![\w-])--[A-Za-z0-9][\w-]*(?:=[^\s,;)\]]*[^\s,;)\].])?",
        # 4 short options: -x, -rf, -xvf (lower case, after a space or an opener; "-I know" stays text)
        r"-(?<=[\s(\[\"'`]-)[a-z][a-z0-9]{0,3}(?![\w\-'’])",
        # 5 Unix paths: /usr/share/doc/, ~/.bashrc, ../x, /etc/ (two parts, or a trailing slash)
        r"(?<![\w/.~:@\\-])(?:(?:~|\.\.?)(?:/\.{0,2}[\w+@%-]+(?:\.[\w+@%-]+)*)+/?"
        r"|(?:/\.{0,2}[\w+@%-]+(?:\.[\w+@%-]+)*){2,}/?|/\.{0,2}[\w+@%-]+(?:\.[\w+@%-]+)*/)",
        # 6 relative paths whose last part has an extension: src/main.c, docs/index.md
        r"(?<![\w/.~:@\\-])[\w-]+(?:/[\w-]+)*/\.?[\w-]+\.[A-Za-z0-9]{1,8}(?![\w/])",
        # 7 Windows paths: C:\Windows\System32, \\host\share, C:\, folder\file.txt (not a\nb)
        r"(?<![\w\\.$~-])(?:[A-Za-z]:\\(?:[\w.$~-]+(?:\\[\w.$~-]+)*\\?)?|\\\\[\w.$-]+(?:\\[\w.$~-]+)+\\?"
        r"|[\w.$~-]+(?:\\[\w.$~-]+)*\\[\w$~-]+\.[A-Za-z0-9]{1,8}(?![\w\\]))",
        # 8 dotted names of three parts or more: os.path.join, docs.python.org (checked: not U.S.A)
        r"(?<![\w.@/-])[A-Za-z_]\w*(?:\.[A-Za-z_]\w*){2,}(?![\w@])",
        # 9 calls: f(x), print(), c.setFillColor(blue), obj->run(1, 2) (checked: not file(s))
        r"(?<![\w.>:-])[A-Za-z_]\w*(?:(?:\.|::|->)[A-Za-z_]\w*)*"
        r"\((?:[^()<>\n]|\([^()<>\n]{0,80}\)){0,80}\)",
        # 10 camelCase, PascalCase with an inner capital: setFillColor, iPhone, JavaScript (not URLs)
        r"(?<![\w\\-])(?=[A-Za-z]*[a-z][A-Z])[A-Za-z][A-Za-z0-9]*(?![\w-])",
        # 11 command lines: make install, dpkg --get-selections > file, sudo apt-get install -y x
        rf"(?<![\w./-])(?:sudo[ \t]+)?(?:make(?:[ \t]+{_MAKE_TARGETS}(?![\w-]))+(?:[ \t]+{_ARGUMENT})*"
        rf"|{_PROGRAMS}(?:[ \t]+(?:{_ARGUMENT}|{_SUBCOMMANDS}(?![\w-])))+)",
        # 12 two-part names with a file extension or a web domain: config.yaml, setup.py, crates.io
        rf"(?<![\w.@/\\-])[A-Za-z0-9_][\w-]*\.(?:{'|'.join(_NAME_ENDINGS)})(?![\w@/-]|\.\w)",
        # 13 handles and decorators: @rust-lang, @property (an e-mail address is found before: word@host)
        r"(?<![\w@.])@[A-Za-z_][\w-]*[\w]",
    )
)
#: Words that may start a command line (pattern 11), for a cheap check before the pattern runs.
_COMMAND_WORDS = PROGRAMS | {"make"}
_OPENER_CHARS = "(\"'`[«“‘"
_OPENERS = frozenset(_OPENER_CHARS)
_HAS_INNER_CAPITAL = re.compile(r"[a-z][A-Z]")


def _command_possible(text: str) -> bool:
    """Whether a word of ``text`` (after an opening bracket or quote) names a program or is ``make``."""
    words = text.split()
    if not _COMMAND_WORDS.isdisjoint(words):
        return True
    return not _OPENERS.isdisjoint(text) and not _COMMAND_WORDS.isdisjoint(
        w.lstrip(_OPENER_CHARS) for w in words
    )


def _call_possible(text: str) -> bool:
    """Whether some ``(`` follows a letter, digit or underscore (a call's name)."""
    i = text.find("(", 1)
    while i != -1:
        before = text[i - 1]
        if before.isalnum() or before == "_":
            return True
        i = text.find("(", i + 1)
    return False


#: For each pattern, a cheap test a text must pass for the pattern to run at all: most sentences hold
#: no code, so most patterns are skipped without running (protection is a hot path).
_PRECHECKS: tuple[Callable[[str], bool], ...] = (
    lambda t: "_" in t,
    lambda t: "__" in t,
    lambda t: "::" in t,
    lambda t: "--" in t,
    lambda t: "-" in t,
    lambda t: "/" in t,
    lambda t: "/" in t,
    lambda t: "\\" in t,
    lambda t: t.count(".") >= 2,
    _call_possible,
    lambda t: not (t.islower() or t.isupper()) and _HAS_INNER_CAPITAL.search(t) is not None,
    _command_possible,
    lambda t: "." in t,
    lambda t: "@" in t,
)
_CAMEL = 10
_DOTTED = 8
_CALL = 9
_COMMAND = 11
#: What parenthesised after a word is a plural or an ending, not an argument: file(s), user(in), colo(u)r.
_NOT_ARGUMENTS = frozenset(
    {"s", "es", "ies", "e", "n", "en", "in", "innen", "r", "er", "d", "ed", "ing", "u"}
)


def _dotted_ok(text: str) -> bool:
    # U.S.A, e.g.x: one-letter parts everywhere are abbreviations
    return any(len(part) > 1 for part in text.split("."))


def _call_ok(text: str) -> bool:
    name, _, args = text.partition("(")
    args = args[:-1]
    if args.lower() in _NOT_ARGUMENTS and not any(s in name for s in (".", "::", "->", "_")):
        return bool(_HAS_INNER_CAPITAL.search(name))
    return True


_CHECKS: dict[int, Callable[[str], bool]] = {_DOTTED: _dotted_ok, _CALL: _call_ok}


def identifier_spans(text: str) -> list[tuple[int, int]]:
    """The spans of ``text`` that are code (see the module's docstring), possibly overlapping, in no
    particular order: the caller keeps the leftmost-longest of overlapping spans."""
    found: list[tuple[int, int]] = []
    for index, (pattern, possible) in enumerate(zip(_PATTERNS, _PRECHECKS, strict=True)):
        if not possible(text):
            continue
        check = _CHECKS.get(index)
        found.extend(
            (m.start(), m.end()) for m in pattern.finditer(text) if check is None or check(m.group())
        )
    return found
