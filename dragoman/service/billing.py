"""Credits: the translation price (quote), and the ledger of every balance movement (HOSTED.md "Credits").

**The translation formula** (the spec leaves it open; HOSTED.md fixes it): 1 credit per 100 characters,
rounded up, times the language tier of the pair, at least 1::

    credits = max(1, ceil(chars / 100)) * lang_tier(src, tgt)

A language's tier is 1 for the :data:`TIER_1` high-resource languages (about the 20 most used on the web),
2 for the :data:`TIER_2` mid-resource ones (the next ~45), 3 for every other FLORES-200 language
(low-resource); a pair costs the tier of its dearer side. ``src`` ``auto`` (detected) costs the tier of the
target alone. A quote without a file estimates characters from the file's size and type
(:data:`CHARS_PER_BYTE`, :func:`estimate_chars`).

**The ledger.** Balances live on the account (``balance`` live, ``test_balance`` for test keys) and never go
below zero (a CHECK constraint, and every debit is a conditional ``UPDATE … WHERE balance >= :amount``).
Every movement is a ``ledger`` row written in the caller's transaction — the one that changes the job's
state — so money and state never disagree. ``amount`` is the change of the balance; ``spent`` what a charge
spends. Per job:

- :func:`reserve` takes the job's price out of the balance at once (``reserve``, amount < 0), after checking
  the key's monthly cap (charges this UTC month plus reservations still open, over the key and the keys it
  replaced by rotation). 402 :class:`InsufficientCredits` / :class:`MonthlyCapReached` otherwise.
- :func:`charge` settles a job: ``charge`` (spent = the price; from the reservation, and from the balance for
  any excess while it lasts) and ``release`` of what was reserved and not spent.
- :func:`refund` settles a failed or canceled job: gives back what is still reserved (``refund``).
- :func:`release` gives back part of a reservation without settling the job.

A job's open reservation is ``-SUM(amount + spent)`` over its rows. :func:`charge` and :func:`refund` settle
it once: called again they move nothing (idempotent). They are exactly-once under concurrency: a job's
settlements hold a lock on it (:func:`dragoman.service.db.lock`; on SQLite one writer runs at a time), and
:mod:`dragoman.service.jobs` calls them in the transaction that wins the job's compare-and-set on ``status``.
"""

from __future__ import annotations

import calendar
import math
import time
from dataclasses import dataclass
from typing import Any, Final

from sqlalchemy import Connection, case, func, insert, select, update

from dragoman.errors import (
    DocumentFormatError,
    FileTooLarge,
    InsufficientCredits,
    InvalidRequest,
    MonthlyCapReached,
)
from dragoman.languages import catalogue
from dragoman.limits import MAX_FILE_BYTES
from dragoman.service.accounts import KeyInfo, lineage
from dragoman.service.db import accounts, api_keys, ledger, lock, now_ms

#: High-resource languages (tier 1): the ~20 most used languages of the web and of MT training data.
TIER_1: Final = frozenset(
    {
        "eng_Latn", "spa_Latn", "fra_Latn", "deu_Latn", "ita_Latn", "por_Latn", "nld_Latn", "rus_Cyrl",
        "pol_Latn", "ukr_Cyrl", "tur_Latn", "arb_Arab", "zho_Hans", "zho_Hant", "jpn_Jpan", "kor_Hang",
        "hin_Deva", "ind_Latn", "vie_Latn", "swe_Latn",
    }
)  # fmt: skip
#: Mid-resource languages (tier 2): the next ~45, with large parallel corpora and national press.
TIER_2: Final = frozenset(
    {
        "ces_Latn", "dan_Latn", "fin_Latn", "nob_Latn", "ron_Latn", "hun_Latn", "ell_Grek", "bul_Cyrl",
        "hrv_Latn", "srp_Cyrl", "slk_Latn", "slv_Latn", "lit_Latn", "lvs_Latn", "est_Latn", "cat_Latn",
        "glg_Latn", "eus_Latn", "heb_Hebr", "pes_Arab", "urd_Arab", "ben_Beng", "tha_Thai", "zsm_Latn",
        "tgl_Latn", "swh_Latn", "tam_Taml", "tel_Telu", "mar_Deva", "guj_Gujr", "kan_Knda", "mal_Mlym",
        "pan_Guru", "npi_Deva", "afr_Latn", "bel_Cyrl", "mkd_Cyrl", "bos_Latn", "als_Latn", "kaz_Cyrl",
        "azj_Latn", "kat_Geor", "hye_Armn", "isl_Latn", "uzn_Latn",
    }
)  # fmt: skip
#: Characters per credit before the tier multiplier.
CHARS_PER_CREDIT: Final = 100

#: Characters per byte of a file, to quote a file by its size (spec 4.1 ``fileBytes`` + ``mime``): a text
#: PDF holds ~3,000 characters a page in ~12 KB (fonts and images make many larger); a DOCX is zipped XML,
#: ~2 characters of text per byte of archive for prose; a scanned page is ~300 KB of image for ~2,000
#: characters of OCR. Estimates err on the high side for text documents; a quote with the file counts exactly.
CHARS_PER_BYTE: Final[dict[str, float]] = {
    "application/pdf": 0.25,
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": 0.5,
    "image/png": 0.01,
    "image/jpeg": 0.01,
    "image/tiff": 0.01,
}
_MIME_ALIASES: Final = {"image/jpg": "image/jpeg", "image/pjpeg": "image/jpeg", "image/tif": "image/tiff"}


def lang_tier(code: str) -> int:
    """1, 2 or 3 for a language (any code :func:`catalogue.resolve` takes; 400 for an unknown one)."""
    flores = catalogue.resolve(code)
    if flores in TIER_1:
        return 1
    if flores in TIER_2:
        return 2
    return 3


def pair_tier(src: str, tgt: str) -> int:
    """The tier of a pair: its dearer side; ``auto`` as the source counts the target alone."""
    target = lang_tier(tgt)
    if src.strip().lower() in ("", "auto"):
        return target
    return max(lang_tier(src), target)


@dataclass(frozen=True)
class Quote:
    """What a translation of ``chars`` characters costs: exactly what its job reserves (spec 2.3)."""

    credits: int
    chars: int
    src: str
    tgt: str
    lang_tier: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "credits": self.credits,
            "breakdown": {"chars": self.chars, "src": self.src, "tgt": self.tgt, "langTier": self.lang_tier},
        }


def translation_credits(chars: int, tier: int) -> int:
    return max(1, -(-chars // CHARS_PER_CREDIT)) * tier


def translation_quote(chars: int, src: str, tgt: str) -> Quote:
    """The quote of translating ``chars`` characters from ``src`` to ``tgt`` (codes echoed as given)."""
    if isinstance(chars, bool) or not isinstance(chars, int) or chars < 0:
        raise InvalidRequest(f"chars must be a whole number of at least 0, not {chars!r}")
    tier = pair_tier(src, tgt)
    return Quote(translation_credits(chars, tier), chars, src, tgt, tier)


# ----- speech (issue 14) ------------------------------------------------------------------------------------
#: Spec 8, TTS credits per 1000 characters: standard; studio or a cloned voice; studio with a cloned voice.
TTS_CREDITS_PER_1000: Final = {"standard": 5, "studio": 15, "clone": 15, "studio+clone": 30}
#: Spec 8: the least a render costs.
TTS_MIN_CREDITS: Final = 50


@dataclass(frozen=True)
class TtsQuote:
    """What a render of ``chars`` characters costs: ``max(50, ceil(chars * rate / 1000))`` credits, where
    ``rate`` is 5 (standard), 15 (studio, or a cloned voice) or 30 (studio with a cloned voice)."""

    credits: int
    chars: int
    tier: str
    per_1000: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "credits": self.credits,
            "breakdown": {"chars": self.chars, "mode": self.tier, "per1000": self.per_1000},
        }


def tts_quote(chars: int, *, studio: bool = False, clone: bool = False) -> TtsQuote:
    """The credits of a TTS render (spec 8): exactly what its job reserves and charges."""
    if isinstance(chars, bool) or not isinstance(chars, int) or chars < 0:
        raise InvalidRequest(f"chars must be a whole number of at least 0, not {chars!r}")
    tier = "studio+clone" if studio and clone else "studio" if studio else "clone" if clone else "standard"
    rate = TTS_CREDITS_PER_1000[tier]
    return TtsQuote(max(TTS_MIN_CREDITS, math.ceil(chars * rate / 1000)), chars, tier, rate)


def normalise_mime(mime: str) -> str:
    """The MIME type without parameters, lower-cased, aliases folded (``image/jpg`` -> ``image/jpeg``)."""
    base = mime.split(";", 1)[0].strip().lower()
    return _MIME_ALIASES.get(base, base)


def estimate_chars(file_bytes: int, mime: str) -> int:
    """Characters a file of ``file_bytes`` bytes of type ``mime`` is estimated to hold (rounded up).

    413 past the 200 MB limit, 415 for a type the service does not translate, 400 for a negative size.
    """
    if isinstance(file_bytes, bool) or not isinstance(file_bytes, int) or file_bytes < 0:
        raise InvalidRequest(f"fileBytes must be a whole number of at least 0, not {file_bytes!r}")
    if file_bytes > MAX_FILE_BYTES:
        raise FileTooLarge(f"a file of {file_bytes:,} bytes is over the {MAX_FILE_BYTES:,}-byte limit")
    ratio = CHARS_PER_BYTE.get(normalise_mime(mime))
    if ratio is None:
        raise DocumentFormatError(
            f"files of type {mime[:100]!r} are not translated; send PDF, DOCX, PNG, JPEG or TIFF "
            f"({', '.join(CHARS_PER_BYTE)})"
        )
    return math.ceil(file_bytes * ratio)


# ----- months (UTC) ----------------------------------------------------------------------------------------
def month_bounds_ms(at_ms: int) -> tuple[int, int]:
    """The start of the UTC month holding ``at_ms`` and the start of the next one (ms)."""
    t = time.gmtime(at_ms // 1000)
    start = calendar.timegm((t.tm_year, t.tm_mon, 1, 0, 0, 0)) * 1000
    year, month = (t.tm_year + 1, 1) if t.tm_mon == 12 else (t.tm_year, t.tm_mon + 1)
    return start, calendar.timegm((year, month, 1, 0, 0, 0)) * 1000


# ----- the ledger ------------------------------------------------------------------------------------------
def _balance_column(mode: str) -> Any:
    return accounts.c.balance if mode == "live" else accounts.c.test_balance


def _balance(conn: Connection, account_id: str, mode: str) -> int:
    value = conn.execute(select(_balance_column(mode)).where(accounts.c.id == account_id)).scalar()
    return int(value or 0)


def balance_of(conn: Connection, account_id: str, mode: str) -> int:
    """The account's balance (``live`` or ``test``) as this transaction sees it."""
    return _balance(conn, account_id, mode)


#: Reservations older than this are not looked at by the monthly cap: no job stays open that long (a lease
#: expires in seconds, attempts are bounded, results are kept 30 days), and the cap's query stays bounded by
#: recent rows instead of growing with a key's whole history.
OPEN_RESERVATION_HORIZON_MS: Final = 35 * 86_400_000


def month_committed(conn: Connection, key_id: str, at_ms: int | None = None) -> int:
    """Credits the key (with the keys it replaced) spent this UTC month plus its reservations still open
    (those made within :data:`OPEN_RESERVATION_HORIZON_MS`): one range scan of the key's recent rows."""
    at = now_ms() if at_ms is None else at_ms
    start, _ = month_bounds_ms(at)
    ids = lineage(conn, key_id)
    per_job = (
        select(
            func.sum(ledger.c.amount + ledger.c.spent).label("held"),
            func.sum(case((ledger.c.at_ms >= start, ledger.c.spent), else_=0)).label("spent"),
        )
        .where(
            ledger.c.key_id.in_(ids),
            ledger.c.job_id.is_not(None),
            ledger.c.at_ms >= min(start, at - OPEN_RESERVATION_HORIZON_MS),
        )
        .group_by(ledger.c.job_id)
        .subquery()
    )
    # A job reserved before the window shows only its settlement here (held >= 0): not open.
    row = conn.execute(
        select(
            func.coalesce(func.sum(case((per_job.c.held < 0, -per_job.c.held), else_=0)), 0),
            func.coalesce(func.sum(per_job.c.spent), 0),
        )
    ).one()
    return int(row[0]) + int(row[1])


def _entry(
    conn: Connection,
    *,
    account_id: str,
    key_id: str | None,
    job_id: str | None,
    mode: str,
    entry: str,
    amount: int,
    spent: int = 0,
    product: str,
    at: int,
) -> None:
    conn.execute(
        insert(ledger).values(
            account_id=account_id,
            key_id=key_id,
            job_id=job_id,
            mode=mode,
            entry=entry,
            amount=amount,
            spent=spent,
            product=product,
            at_ms=at,
        )
    )


def reserve(conn: Connection, key: KeyInfo, job_id: str, amount: int, product: str = "translate") -> None:
    """Takes ``amount`` credits out of the key's balance for ``job_id`` (inside the caller's transaction).

    Raises :class:`MonthlyCapReached` when the key's cap would be passed, :class:`InsufficientCredits` when
    the balance holds less; the caller's transaction then rolls back whatever it wrote.
    """
    if isinstance(amount, bool) or not isinstance(amount, int) or amount < 0:
        raise InvalidRequest(f"a reservation must be a whole number of credits of at least 0, not {amount!r}")
    at = now_ms()
    if key.monthly_cap is not None:
        # Lock the key's row (PostgreSQL; SQLite's BEGIN IMMEDIATE already serialises writers) so two
        # reservations of one key cannot both pass the cap.
        conn.execute(select(api_keys.c.id).where(api_keys.c.id == key.key_id).with_for_update()).first()
        committed = month_committed(conn, key.key_id, at)
        if committed + amount > key.monthly_cap:
            _, resets = month_bounds_ms(at)
            raise MonthlyCapReached(
                f"this key's monthly cap of {key.monthly_cap:,} credits is reached ({committed:,} spent or "
                f"reserved this month, {amount:,} more needed); it resets at the start of the next UTC month",
                cap=key.monthly_cap,
                spent=committed,
                resets_at_ms=resets,
            )
    column = _balance_column(key.mode)
    taken = conn.execute(
        update(accounts)
        .where(accounts.c.id == key.account_id, column >= amount)
        .values({column: column - amount})
    ).rowcount
    if not taken:
        balance = _balance(conn, key.account_id, key.mode)
        which = "test credits" if key.mode == "test" else "credits"
        raise InsufficientCredits(
            f"insufficient {which}: {amount:,} needed, {balance:,} left; add credits to the account",
            balance=balance,
            required=amount,
        )
    _entry(
        conn,
        account_id=key.account_id,
        key_id=key.key_id,
        job_id=job_id,
        mode=key.mode,
        entry="reserve",
        amount=-amount,
        product=product,
        at=at,
    )


def open_reservation(conn: Connection, job_id: str) -> int:
    """Credits still reserved for ``job_id`` (0 once settled or when none was made)."""
    total = conn.execute(
        select(func.coalesce(func.sum(ledger.c.amount + ledger.c.spent), 0)).where(ledger.c.job_id == job_id)
    ).scalar()
    return max(0, -int(total or 0))


def _settled(conn: Connection, job_id: str) -> Any:
    """The job's charge or refund row, if it was settled."""
    return conn.execute(
        select(ledger.c.entry, ledger.c.spent)
        .where(ledger.c.job_id == job_id, ledger.c.entry.in_(("charge", "refund")))
        .limit(1)
    ).first()


def _give_back(conn: Connection, account_id: str, mode: str, amount: int) -> None:
    column = _balance_column(mode)
    conn.execute(update(accounts).where(accounts.c.id == account_id).values({column: column + amount}))


def _reservation_product(conn: Connection, job_id: str) -> str | None:
    return conn.execute(
        select(ledger.c.product).where(ledger.c.job_id == job_id, ledger.c.entry == "reserve").limit(1)
    ).scalar()


def charge(
    conn: Connection,
    key_id: str,
    account_id: str,
    mode: str,
    job_id: str,
    amount: int,
    reserved: int | None = None,
    product: str | None = None,
) -> int:
    """Settles a finished job: records ``amount`` as spent and releases the rest of its reservation.

    The job's open reservation in the ledger is the truth (``reserved``, what the caller believes it
    reserved, is accepted for the callers' convenience and not used). An ``amount`` above the reservation
    takes the excess from the balance as far as it goes (never below zero). Returns the credits spent;
    called again for a settled job, it moves nothing and returns what was spent (0 after a refund).
    """
    if isinstance(amount, bool) or not isinstance(amount, int) or amount < 0:
        raise InvalidRequest(f"a charge must be a whole number of credits of at least 0, not {amount!r}")
    lock(conn, "settle", job_id)  # concurrent settlements of one job run one after the other (PostgreSQL)
    done = _settled(conn, job_id)
    if done is not None:
        return int(done.spent) if done.entry == "charge" else 0
    held = open_reservation(conn, job_id)
    product = product or _reservation_product(conn, job_id) or "translate"
    at = now_ms()
    extra = 0
    if amount > held:
        column = _balance_column(mode)
        want = amount - held
        available = _balance(conn, account_id, mode)
        extra = min(want, available)
        if extra:
            taken = conn.execute(
                update(accounts)
                .where(accounts.c.id == account_id, column >= extra)
                .values({column: column - extra})
            ).rowcount
            extra = extra if taken else 0  # the balance moved meanwhile (another writer): nothing extra
    spent = min(amount, held) + extra
    _entry(
        conn,
        account_id=account_id,
        key_id=key_id,
        job_id=job_id,
        mode=mode,
        entry="charge",
        amount=-extra,
        spent=spent,
        product=product,
        at=at,
    )
    leftover = held - min(amount, held)
    if leftover:
        _give_back(conn, account_id, mode, leftover)
        _entry(
            conn,
            account_id=account_id,
            key_id=key_id,
            job_id=job_id,
            mode=mode,
            entry="release",
            amount=leftover,
            product=product,
            at=at,
        )
    return spent


def refund(conn: Connection, key_id: str, account_id: str, mode: str, job_id: str) -> int:
    """Settles a failed or canceled job: gives back what is still reserved for it; the credits refunded
    (0 when nothing was reserved or the job is already settled: idempotent)."""
    lock(conn, "settle", job_id)
    if _settled(conn, job_id) is not None:
        return 0
    held = open_reservation(conn, job_id)
    if not held:
        return 0
    _return_reserved(conn, key_id, account_id, mode, job_id, "refund", held)
    return held


def release(
    conn: Connection, key_id: str, account_id: str, mode: str, job_id: str, amount: int | None = None
) -> int:
    """Gives back ``amount`` (default: all) of a job's open reservation without settling the job; the
    credits released (never more than is open)."""
    lock(conn, "settle", job_id)
    held = open_reservation(conn, job_id)
    give = held if amount is None else max(0, min(amount, held))
    if not give:
        return 0
    _return_reserved(conn, key_id, account_id, mode, job_id, "release", give)
    return give


def _return_reserved(
    conn: Connection, key_id: str, account_id: str, mode: str, job_id: str, entry: str, amount: int
) -> None:
    """Puts ``amount`` of a job's reservation back in the balance and writes the ledger ``entry`` for it
    (refund or release), under the product the reservation was made for."""
    _give_back(conn, account_id, mode, amount)
    _entry(
        conn,
        account_id=account_id,
        key_id=key_id,
        job_id=job_id,
        mode=mode,
        entry=entry,
        amount=amount,
        product=_reservation_product(conn, job_id) or "translate",
        at=now_ms(),
    )
