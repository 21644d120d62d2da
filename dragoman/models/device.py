"""Where CTranslate2 models run (translation packs and speech recognition models alike): the CPU or a CUDA
GPU, from ``settings.engine.device`` (``DRAGOMAN_DEVICE`` auto|cpu|cuda)."""

from __future__ import annotations

from dragoman.errors import ConfigError


def compute_device(wanted: str) -> str:
    """The device CTranslate2 models load on: ``wanted`` ('cpu' or 'cuda'), or for 'auto' a CUDA GPU when
    CTranslate2 sees one (its CUDA build, a driver, a device), else the CPU. 'cuda' without a GPU is a
    ConfigError."""
    if wanted == "cpu":
        return "cpu"
    import ctranslate2

    gpus = ctranslate2.get_cuda_device_count()
    if wanted == "cuda" and gpus == 0:
        raise ConfigError(
            "DRAGOMAN_DEVICE=cuda but CTranslate2 sees no CUDA device (no GPU, no driver, or a CPU-only "
            "build); use DRAGOMAN_DEVICE=auto or cpu"
        )
    return "cuda" if gpus > 0 else "cpu"
