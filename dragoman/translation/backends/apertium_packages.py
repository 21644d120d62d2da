"""The Apertium pairs Debian packages (bookworm), which of them are installed, and the command for the rest.

``dragoman packs available`` lists them; the Makefile installs ``DEFAULT_PAIRS`` with ``make demo`` and every
pair with ``make apertium-all`` (a test keeps its lists and these equal). A package's name is its pair
(``apertium-eng-spa``); most give both directions, as ``.mode`` files the backend discovers on its own.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from dragoman.errors import InvalidRequest
from dragoman.languages.catalogue import resolve
from dragoman.probes import run_program

log = logging.getLogger("dragoman.translation.apertium")

#: Every real Apertium pair in Debian bookworm (``apt-cache search apertium``, transitional ones left out).
DEBIAN_PAIRS: tuple[str, ...] = (
    "afr-nld", "arg-cat", "bel-rus", "br-fr", "cat-ita", "cat-srd", "dan-nor", "en-gl", "eng-cat", "eng-spa",
    "eo-ca", "eo-en", "eo-es", "eo-fr", "es-gl", "es-pt", "es-ro", "eu-en", "eu-es", "fr-es", "fra-cat",
    "fra-frp", "hbs-eng", "hbs-mkd", "hbs-slv", "ind-zlm", "isl-eng", "isl-swe", "mkd-bul", "mkd-eng",
    "nno-nob", "oc-ca", "oc-es", "oci-fra", "pol-szl", "por-cat", "pt-gl", "rus-ukr", "spa-arg", "spa-ast",
    "spa-cat", "spa-ita", "srd-ita", "swe-dan", "swe-nor", "urd-hin",
)  # fmt: skip
#: What ``make demo`` installs (the Makefile's APERTIUM_DEFAULT): the six first pairs, then the Romance,
#: Nordic and other pairs that work both ways in Debian.
DEFAULT_PAIRS: tuple[str, ...] = (
    "eng-spa", "eng-cat", "spa-cat", "es-pt", "fr-es", "spa-ita",
    "fra-cat", "cat-ita", "por-cat", "es-gl", "pt-gl", "en-gl", "es-ro", "eo-en", "eo-es", "eo-fr", "oc-ca",
    "oc-es", "oci-fra", "spa-ast", "spa-arg", "arg-cat", "eu-es", "eu-en", "afr-nld", "swe-dan", "swe-nor",
    "dan-nor", "nno-nob", "isl-eng", "mkd-eng", "mkd-bul", "ind-zlm", "urd-hin", "br-fr",
)  # fmt: skip
#: Package codes that stand for more than one FLORES language.
_MANY: dict[str, tuple[str, ...]] = {
    "hbs": ("hrv_Latn", "bos_Latn", "srp_Cyrl"),  # Serbo-Croatian: Croatian, Bosnian, Serbian
    "nor": ("nob_Latn", "nno_Latn"),  # Norwegian: Bokmål and Nynorsk
}


@dataclass(frozen=True)
class AptPair:
    """One Debian Apertium package: its languages (FLORES), whether it is installed, how to install it."""

    package: str  # "apertium-eng-spa"
    pair: str  # "eng-spa"
    languages: tuple[str, ...]
    installed: bool | None  # None: no dpkg here to ask
    default: bool  # installed by `make demo`
    command: str


def package_languages(pair: str) -> tuple[str, ...]:
    """The FLORES languages a package's pair names: ``"hbs-eng"`` -> Croatian, Bosnian, Serbian, English."""
    found: list[str] = []
    for code in pair.split("-"):
        if code in _MANY:
            found.extend(_MANY[code])
            continue
        try:
            found.append(resolve(code))
        except InvalidRequest:
            log.debug("Apertium package code %r names no language we know", code)
    return tuple(dict.fromkeys(found))


def installed_packages(packages: tuple[str, ...]) -> set[str] | None:
    """Which of ``packages`` dpkg has installed; None when dpkg cannot be asked."""
    done = run_program("dpkg-query", "-W", "-f=${Package}\t${Status}\n", *packages)
    if done is None:
        return None
    found: set[str] = set()
    for line in done.stdout.splitlines():
        name, _, status = line.partition("\t")
        if status.endswith(" installed") and " not-installed" not in status:
            found.add(name)
    return found


def apt_pairs() -> list[AptPair]:
    """Every Debian Apertium pair, installed or not, with the exact command that installs it."""
    packages = tuple(f"apertium-{pair}" for pair in DEBIAN_PAIRS)
    installed = installed_packages(packages)
    return [
        AptPair(
            package=package,
            pair=pair,
            languages=package_languages(pair),
            installed=None if installed is None else package in installed,
            default=pair in DEFAULT_PAIRS,
            command=f"sudo apt-get install apertium {package}",
        )
        for pair, package in zip(DEBIAN_PAIRS, packages, strict=True)
    ]
