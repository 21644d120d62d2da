"""The hosted service's domain, with no HTTP (ARCHITECTURE.md): keys, credits, jobs, webhooks, usage, limits.

The routes that expose it live in :mod:`dragoman.server.hosted`; this package never imports ``server``.
"""
