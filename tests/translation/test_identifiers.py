"""Code in running text comes through translation unchanged (issue 11, item 1)."""

from __future__ import annotations

import pytest

from dragoman.translation.identifiers import identifier_spans
from dragoman.translation.protection import protect
from dragoman.translation.types import GlossaryEntry, Pieces, Protected


def spans(pieces: Pieces) -> list[str]:
    return [p.source for p in pieces if isinstance(p, Protected)]


@pytest.mark.parametrize(
    ("sentence", "expected"),
    [
        # the issue's own examples
        ("Call c.setFillColor(blue) to paint it.", ["c.setFillColor(blue)"]),
        ("Run dpkg --get-selections > file to save the list.", ["dpkg --get-selections > file"]),
        ("The docs live in /usr/share/doc/.", ["/usr/share/doc/"]),
        ("The call returns ASN1_SUCCESS.", ["ASN1_SUCCESS"]),
        ("make install", ["make install"]),
        ("Then run make install as root.", ["make install"]),
        # snake_case, UPPER_CASE, dunders
        ("Set max_retries and MAX_SIZE, then _private_thing.", ["max_retries", "MAX_SIZE", "_private_thing"]),
        ("Define __init__ and __name__ there.", ["__init__", "__name__"]),
        # a::b
        ("Use std::vector or ::global and a::b::c.", ["std::vector", "::global", "a::b::c"]),
        # options
        ("Pass --verbose, --output=out.txt. Or -v and -rf.", ["--verbose", "--output=out.txt", "-v", "-rf"]),
        # paths
        ("Edit ~/.bashrc, ../lib/x and /etc/ today.", ["~/.bashrc", "../lib/x", "/etc/"]),
        ("Open src/main.c and docs/index.md.", ["src/main.c", "docs/index.md"]),
        (r"See C:\Windows\System32 and \\server\share and dir\file.txt.", [
            r"C:\Windows\System32", r"\\server\share", r"dir\file.txt"
        ]),
        # dotted names, calls
        ("Call os.path.join and docs.python.org.", ["os.path.join", "docs.python.org"]),
        ("Use print() and f(x) and obj->run(1, 2) and Foo::bar().", [
            "print()", "f(x)", "obj->run(1, 2)", "Foo::bar()"
        ]),
        # two-part names with a file extension or a web domain; handles and decorators
        ("The file config.yaml, setup.py and example.com, see crates.io.", [
            "config.yaml", "setup.py", "example.com", "crates.io"
        ]),
        ("crates.io by @rust-lang uses @property.", ["crates.io", "@rust-lang", "@property"]),
        # camelCase, PascalCase with an inner capital
        ("The setFillColor method of the iPhone and JavaScript.", ["setFillColor", "iPhone", "JavaScript"]),
        # command lines
        ("Type sudo apt-get install -y to go on.", ["sudo apt-get install -y"]),
        ("Use git clone https://x.org/r.git here.", ["git clone", "https://x.org/r.git"]),
        ("See (make install) and “make install” and 'dpkg -l'.", ["make install", "make install", "dpkg -l"]),
    ],
)  # fmt: skip
def test_code_is_protected(sentence: str, expected: list[str]) -> None:
    pieces = protect(sentence)
    assert "".join(p.source if isinstance(p, Protected) else p for p in pieces) == sentence
    assert spans(pieces) == expected
    assert all(p.output == p.source and p.kind == "placeholder" for p in pieces if isinstance(p, Protected))


@pytest.mark.parametrize(
    "sentence",
    [
        "NASA and the FBI SHOUT in CAPITALS.",
        "Use and/or, e-mail, U.S.A. and e.g. here.",
        "The file(s) you chose; colo(u)r; Benutzer(in).",
        "URLs, APIs and IDs are plural acronyms.",
        "-I know. -No way! It is 5-10 or -5 degrees.",
        "Make sure to make the bed and make clean water.",
        "It is.Go to it, it.is and go.to stay text.",
        "Sentence one.Sentence two is sloppy.",
        "A slash / between words, km/h, 1/2 and 12/05/2024.",
        "It is _emphasised_ here.",
        "Hello (world) and a lone - dash -- and an em—dash.",
        "Installing the apt to start.",
    ],
)
def test_ordinary_words_stay_text(sentence: str) -> None:
    assert protect(sentence) == (sentence,)


def test_code_inside_other_placeholders_stays_one_span() -> None:
    assert spans(protect("Run `os.path.join(a, b)` or <a href='/usr/x/y'>x</a>.")) == [
        "`os.path.join(a, b)`",
        "<a href='/usr/x/y'>",
        "</a>",
    ]
    assert spans(protect("See https://x.org/usr/share/doc/a_b.")) == ["https://x.org/usr/share/doc/a_b"]
    assert spans(protect("Mail john.doe.x@mail.example.com now.")) == ["john.doe.x@mail.example.com"]


def test_a_glossary_term_matching_the_same_text_wins() -> None:
    glossary = [GlossaryEntry("JavaScript", "JS"), GlossaryEntry("path", "Pfad")]
    pieces = protect("JavaScript and os.path.join and a path.", glossary)
    assert [(p.source, p.output, p.kind) for p in pieces if isinstance(p, Protected)] == [
        ("JavaScript", "JS", "glossary"),
        ("os.path.join", "os.path.join", "placeholder"),  # a term inside code does not break it
        ("path", "Pfad", "glossary"),
    ]


def test_identifier_spans_of_a_text_without_code_is_empty() -> None:
    assert identifier_spans("") == []
    assert identifier_spans("A plain sentence, with nothing special in it.") == []
