"""The generic model store, shared by every capability.

:mod:`~dragoman.models.kind` (what a kind of model supplies), :mod:`~dragoman.models.store` (installed
models, install records, verify, remove, the store lock), :mod:`~dragoman.models.install` (install from a
directory, an archive, a URL or an index, through staging and an atomic move),
:mod:`~dragoman.models.extract` (safe extraction), :mod:`~dragoman.models.cache` (load once, memory budget,
idle unloading, forget). MT packs are the first kind: :mod:`~dragoman.models.packs`, with their manifests
(:mod:`~dragoman.models.manifest`) and the Argos index (:mod:`~dragoman.models.index`).
"""
