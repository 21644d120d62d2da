#!/usr/bin/env bash
# Installs the Debian packages named on the command line that are not installed yet.
# Never fails the build: where apt-get is missing, or we are not root and have no sudo, it says what to
# install by hand, and the tests that need those packages skip saying why.
set -u
missing=()
for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
[ ${#missing[@]} -eq 0 ] && { echo "system packages: all present" >&2; exit 0; }
if ! command -v apt-get >/dev/null 2>&1; then
    echo "system packages: no apt-get here; install by hand: ${missing[*]}" >&2; exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then SUDO="sudo -n"; else
        echo "system packages: not root and no sudo; install by hand: ${missing[*]}" >&2; exit 0
    fi
fi
echo "system packages: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >&2 || echo "system packages: apt-get update failed" >&2
# Install one by one so that a package this Debian release lacks does not stop the others.
for pkg in "${missing[@]}"; do
    $SUDO apt-get install -y -qq --no-install-recommends "$pkg" >/dev/null 2>&1 \
        || echo "system packages: could not install $pkg" >&2
done
exit 0
