"""``dragoman hosted …``: the hosted service's admin commands (issue 12; HOSTED.md "Keys").

``migrate``; ``accounts create|list|credit``; ``keys create|list|revoke|rotate``; ``serve``;
``webhooks log KEY_ID`` (a key's delivery log). Each takes ``--json``.
They work on the database of ``DRAGOMAN_DB_URL`` (default SQLite under ``DRAGOMAN_HOSTED_DIR``) and bring
its schema up to date first, so a fresh data directory needs no separate ``migrate``. ``keys create`` and
``keys rotate`` print the key and its webhook signing secret once: only a hash of the key is stored.

:func:`register` adds the ``hosted`` command to the top-level parser; each group of subcommands is one
``_add_<group>(groups)`` function in :data:`GROUPS`, so a new group (``serve``, ``webhooks``) is one function
and one entry there. A command is ``cmd(args, settings) -> exit status``, like every other in
:mod:`dragoman.cli.main`. Service modules are imported inside the commands: ``dragoman --help`` stays quick.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from dragoman.limits import DAILY_CHARS_DEFAULT

_SubParsers = argparse._SubParsersAction  # the type of add_subparsers()' answer

if TYPE_CHECKING:
    from dragoman.service.db import Database
    from dragoman.service.procrastinate_schema import SchemaChange
    from dragoman.settings import Settings

log = logging.getLogger("dragoman.hosted")


def _print_json(data: Any) -> None:
    print(json.dumps(data, ensure_ascii=False, indent=2))


def _whole(minimum: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = minimum - 1
        if value < minimum:
            raise argparse.ArgumentTypeError(f"give a whole number of at least {minimum}, not {text!r}")
        return value

    return parse


def _common(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("--json", action="store_true", help="answer in JSON")
    parser.add_argument(
        "-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help="log more (to stderr)"
    )
    return parser


def open_database(settings: Settings) -> Database:
    """The service's database, migrated to the newest schema."""
    from dragoman.service import migrate
    from dragoman.service.db import Database

    db = Database.from_settings(settings.hosted)
    migrate.upgrade(db)
    return db


# ----- migrate ---------------------------------------------------------------------------------------------
def cmd_migrate(args: argparse.Namespace, settings: Settings) -> int:
    from dragoman.service import migrate
    from dragoman.service.db import Database

    db = Database.from_settings(settings.hosted)
    procrastinate: SchemaChange | None = None  # None: dispatch is in-process
    try:
        before = migrate.current(db)
        after = migrate.upgrade(db)
        if settings.hosted.dispatch == "procrastinate":
            from dragoman.service import dispatch

            procrastinate = dispatch.migrate_schema(db)
    finally:
        db.dispose()
    # Procrastinate's schema: created now ("applied"), brought to the installed version by the migration
    # scripts it lacked ("upgraded"), or already at it ("present").
    state = None
    if procrastinate is not None:
        state = "applied" if procrastinate.created else "upgraded" if procrastinate.applied else "present"
    if args.json:
        answer: dict[str, Any] = {"from": before, "to": after, "database": _shown_url(settings)}
        if procrastinate is not None:
            answer["procrastinate_schema"] = state
            answer["procrastinate_migrations_applied"] = list(procrastinate.applied)
        _print_json(answer)
    else:
        change = "unchanged" if before == after else f"was {before or 'empty'}"
        print(f"schema at {after} ({change})")
        if procrastinate is not None:
            print(f"Procrastinate's schema {state}")
            for name in procrastinate.applied:
                print(f"  applied {name}")
    return 0


def _shown_url(settings: Settings) -> str:
    """The database URL without a password."""
    from sqlalchemy.engine import make_url

    return make_url(settings.hosted.database_url).render_as_string(hide_password=True)


def _add_migrate(groups: _SubParsers[argparse.ArgumentParser]) -> None:
    p = _common(
        groups.add_parser(
            "migrate",
            help="create or upgrade the hosted database schema (and Procrastinate's, when "
            "DRAGOMAN_DISPATCH=procrastinate)",
        )
    )
    p.set_defaults(func=cmd_migrate)


# ----- accounts --------------------------------------------------------------------------------------------
def cmd_accounts_create(args: argparse.Namespace, settings: Settings) -> int:
    from dragoman.service import accounts

    db = open_database(settings)
    try:
        account = accounts.create_account(
            db, name=args.name, plan=args.plan, credits=args.credits, test_credits=args.test_credits
        )
    finally:
        db.dispose()
    if args.json:
        _print_json(account.to_dict())
    else:
        print(
            f"{account.id}  plan {account.plan}  {account.balance:,} credits  "
            f"{account.test_balance:,} test credits"
        )
    return 0


def cmd_accounts_list(args: argparse.Namespace, settings: Settings) -> int:
    from dragoman.service import accounts

    db = open_database(settings)
    try:
        found = accounts.list_accounts(db)
    finally:
        db.dispose()
    if args.json:
        _print_json([account.to_dict() for account in found])
    else:
        for account in found:
            print(
                f"{account.id}  {account.plan:<10}  {account.balance:>12,}  {account.test_balance:>10,} test"
                f"  {account.name}"
            )
    return 0


def cmd_accounts_credit(args: argparse.Namespace, settings: Settings) -> int:
    from dragoman.service import accounts

    mode: Literal["live", "test"] = "test" if args.test else "live"
    db = open_database(settings)
    try:
        balance = accounts.credit_account(db, args.account, args.amount, mode=mode)
    finally:
        db.dispose()
    if args.json:
        _print_json({"account_id": args.account, "mode": mode, "credited": args.amount, "balance": balance})
    else:
        print(f"{args.account}: {balance:,} {'test credits' if args.test else 'credits'}")
    return 0


def _add_accounts(groups: _SubParsers[argparse.ArgumentParser]) -> None:
    group = groups.add_parser("accounts", help="create, list and credit accounts")
    sub = group.add_subparsers(dest="accounts_command", required=True)
    p = _common(sub.add_parser("create", help="create an account"))
    p.add_argument("--name", default="", help="a name to recognise it by")
    p.add_argument(
        "--plan", default="pro", help="free, pro (default), business or enterprise (API access: all but free)"
    )
    p.add_argument("--credits", type=_whole(0), default=0, help="live credits to start with (default 0)")
    p.add_argument(
        "--test-credits", type=_whole(0), default=10_000, help="test credits to start with (default 10,000)"
    )
    p.set_defaults(func=cmd_accounts_create)
    p = _common(sub.add_parser("list", help="list accounts and their balances"))
    p.set_defaults(func=cmd_accounts_list)
    p = _common(sub.add_parser("credit", help="add credits to an account"))
    p.add_argument("account", help="account id (acct_…)")
    p.add_argument("amount", type=_whole(1), help="credits to add")
    p.add_argument("--test", action="store_true", help="add test credits (spent by test keys)")
    p.set_defaults(func=cmd_accounts_credit)


# ----- keys ------------------------------------------------------------------------------------------------
def _print_created(args: argparse.Namespace, created: Any, **extra: Any) -> None:
    if args.json:
        _print_json({**created.to_dict(), **extra})
        return
    print(f"key:            {created.key}")
    print(f"key id:         {created.key_id}")
    print(f"webhook secret: {created.webhook_secret}")
    for name, value in extra.items():
        print(f"{name.replace('_', ' ') + ':':<16}{value}")
    print("store the key and the webhook secret now: they are not shown again", file=sys.stderr)


def cmd_keys_create(args: argparse.Namespace, settings: Settings) -> int:
    from dragoman.service import accounts

    db = open_database(settings)
    try:
        created = accounts.create_key(
            db,
            args.account,
            mode="test" if args.test else "live",
            name=args.name,
            webhook_url=args.webhook,
            monthly_cap=args.cap,
            daily_quota=args.daily_quota,
        )
    finally:
        db.dispose()
    _print_created(args, created, account_id=args.account, mode="test" if args.test else "live")
    return 0


def cmd_keys_list(args: argparse.Namespace, settings: Settings) -> int:
    from dragoman.service import accounts

    db = open_database(settings)
    try:
        found = accounts.list_keys(db, args.account)
    finally:
        db.dispose()
    if args.json:
        _print_json([key.to_dict() for key in found])
    else:
        for key in found:
            state = "active" if key.active else f"revoked{' -> ' + key.rotated_to if key.rotated_to else ''}"
            cap = "no cap" if key.monthly_cap is None else f"cap {key.monthly_cap:,}"
            print(
                f"{key.key_id}  {key.mode}  {key.account_id}  {state}  {cap}  "
                f"quota {key.daily_quota:,}/day  {key.webhook_url or '-'}  {key.name}"
            )
    return 0


def cmd_keys_revoke(args: argparse.Namespace, settings: Settings) -> int:
    from dragoman.service import accounts

    db = open_database(settings)
    try:
        record = accounts.revoke_key(db, args.key_id)
    finally:
        db.dispose()
    if args.json:
        _print_json(record.to_dict())
    else:
        print(f"{record.key_id} revoked")
    return 0


def cmd_keys_rotate(args: argparse.Namespace, settings: Settings) -> int:
    from dragoman.service import accounts

    db = open_database(settings)
    try:
        created = accounts.rotate_key(db, args.key_id)
    finally:
        db.dispose()
    _print_created(args, created, replaces=args.key_id)
    return 0


def _add_keys(groups: _SubParsers[argparse.ArgumentParser]) -> None:
    group = groups.add_parser("keys", help="create, list, revoke and rotate API keys")
    sub = group.add_subparsers(dest="keys_command", required=True)
    p = _common(sub.add_parser("create", help="create a key (printed once with its webhook secret)"))
    p.add_argument("--account", required=True, help="account id (acct_…)")
    p.add_argument("--name", default="", help="a name to recognise it by")
    p.add_argument("--webhook", help="URL that receives this key's job events")
    p.add_argument("--cap", type=_whole(0), help="monthly credit spend cap (default none)")
    p.add_argument(
        "--daily-quota",
        type=_whole(0),
        default=DAILY_CHARS_DEFAULT,
        help=f"hosted v2 characters per UTC day (default {DAILY_CHARS_DEFAULT:,})",
    )
    p.add_argument("--test", action="store_true", help="a test key (svc_test_…, spends test credits)")
    p.set_defaults(func=cmd_keys_create)
    p = _common(sub.add_parser("list", help="list keys (never their secrets)"))
    p.add_argument("--account", help="only this account's keys")
    p.set_defaults(func=cmd_keys_list)
    p = _common(sub.add_parser("revoke", help="revoke a key (401 from then on)"))
    p.add_argument("key_id", help="the key's id (the 12 hex digits after svc_live_)")
    p.set_defaults(func=cmd_keys_revoke)
    p = _common(sub.add_parser("rotate", help="replace a key by a new one and revoke it"))
    p.add_argument("key_id", help="the key's id (the 12 hex digits after svc_live_)")
    p.set_defaults(func=cmd_keys_rotate)


# ----- serve -----------------------------------------------------------------------------------------------
def cmd_serve(args: argparse.Namespace, settings: Settings) -> int:
    from dragoman.server.hosted.serve import serve

    return serve(settings, host=args.host, port=args.port)


def _add_serve(groups: _SubParsers[argparse.ArgumentParser]) -> None:
    p = groups.add_parser(
        "serve",
        help="run the hosted service (migrates, starts the job runner and webhook dispatcher, serves HTTP)",
    )
    p.add_argument(
        "--host", default=None, help="address to listen on (default DRAGOMAN_HOSTED_HOST, 127.0.0.1)"
    )
    p.add_argument(
        "--port",
        type=_whole(0),
        default=None,
        help="port (default DRAGOMAN_HOSTED_PORT, 8788; 0: any free one)",
    )
    p.add_argument(
        "-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help="log more (to stderr)"
    )
    p.set_defaults(func=cmd_serve)


# ----- worker ---------------------------------------------------------------------------------------------
def cmd_worker(args: argparse.Namespace, settings: Settings) -> int:
    from dragoman.errors import ConfigError
    from dragoman.service import dispatch, worker

    if settings.hosted.dispatch != dispatch.PROCRASTINATE:
        raise ConfigError("dragoman hosted worker needs DRAGOMAN_DISPATCH=procrastinate (and PostgreSQL)")
    queues = dispatch.parse_queues(args.queues)
    dispatch.conninfo(settings.hosted.database_url)  # a ConfigError on SQLite
    logging.getLogger("dragoman.service").setLevel(logging.INFO)  # the worker's own lines (stderr)
    db = open_database(settings)
    try:
        dispatch.apply_schema(db)  # idempotent: a worker on a fresh database needs no separate migrate
    finally:
        db.dispose()
    return worker.run_worker(
        settings,
        queues,
        concurrency=args.concurrency,
        maintenance_s=args.maintenance_every,
        purge_s=args.purge_every,
        stalled_s=args.stalled_after,
        heartbeat_s=args.heartbeat_every,
        graceful_s=args.graceful_timeout,
    )


def _add_worker(groups: _SubParsers[argparse.ArgumentParser]) -> None:
    p = groups.add_parser(
        "worker",
        help="run a job worker (DRAGOMAN_DISPATCH=procrastinate, PostgreSQL) until SIGTERM/SIGINT",
    )
    p.add_argument(
        "--queues",
        default=None,
        help="comma-separated queues: translate, tts, subtitle, dub, webhooks, maintenance (default all)",
    )
    p.add_argument("--concurrency", type=_whole(1), default=1, help="jobs run at once (default 1)")
    p.add_argument(
        "--maintenance-every",
        type=_whole(1),
        default=10,
        help="seconds between maintenance rounds: expired leases, stalled jobs (default 10)",
    )
    p.add_argument(
        "--purge-every", type=_whole(1), default=3600, help="seconds between retention purges (default 3600)"
    )
    p.add_argument(
        "--stalled-after",
        type=_whole(1),
        default=30,
        help="seconds without a heartbeat before a worker's jobs are stalled (default 30)",
    )
    p.add_argument(
        "--heartbeat-every", type=_whole(1), default=10, help="seconds between worker heartbeats (default 10)"
    )
    p.add_argument(
        "--graceful-timeout",
        type=_whole(0),
        default=30,
        help="seconds a stopping worker waits for running jobs before putting them back (default 30)",
    )
    p.add_argument(
        "-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help="log more (to stderr)"
    )
    p.set_defaults(func=cmd_worker)


# ----- webhooks ---------------------------------------------------------------------------------------------
def cmd_webhooks_log(args: argparse.Namespace, settings: Settings) -> int:
    from datetime import UTC, datetime

    from dragoman.service import accounts, webhooks

    db = open_database(settings)
    try:
        accounts.get_key(db, args.key_id)  # an unknown key is an error, not an empty log
        attempts = webhooks.delivery_log(db, args.key_id, limit=args.limit)
    finally:
        db.dispose()
    if args.json:
        _print_json([attempt.to_dict() for attempt in attempts])
        return 0
    if not attempts:
        print(f"no webhook deliveries for {args.key_id}")
    for a in attempts:
        at = datetime.fromtimestamp(a.at_ms / 1000, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
        answer = str(a.status_code) if a.status_code is not None else (a.error or "no answer")
        print(
            f"{at}  {a.event_id}  {a.event}  attempt {a.attempt}  {answer}  {a.duration_ms} ms  "
            f"{a.state}  {a.url}"
        )
    return 0


def _add_webhooks(groups: _SubParsers[argparse.ArgumentParser]) -> None:
    group = groups.add_parser("webhooks", help="webhook deliveries")
    sub = group.add_subparsers(dest="webhooks_command", required=True)
    p = _common(sub.add_parser("log", help="a key's delivery log: one line per attempt, newest first"))
    p.add_argument("key_id", help="the key's id (the 12 hex digits after svc_live_)")
    p.add_argument("--limit", type=_whole(1), default=100, help="attempts shown (default 100)")
    p.set_defaults(func=cmd_webhooks_log)


#: The groups of ``dragoman hosted``; a new group is a function taking the subparsers, added here.
GROUPS: tuple[Callable[[_SubParsers[argparse.ArgumentParser]], None], ...] = (
    _add_migrate,
    _add_accounts,
    _add_keys,
    _add_serve,
    _add_webhooks,
    _add_worker,
)


def register(subparsers: _SubParsers[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    """Adds ``dragoman hosted`` and its groups (:data:`GROUPS`) to the top-level subparsers."""
    hosted = subparsers.add_parser("hosted", help="the hosted service: database, accounts, API keys")
    hosted.add_argument(
        "-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help="log more (to stderr)"
    )
    groups = hosted.add_subparsers(dest="hosted_command", required=True)
    for add_group in GROUPS:
        add_group(groups)
    return hosted
