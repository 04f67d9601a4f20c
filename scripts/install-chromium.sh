#!/bin/sh
# Installs Debian's chromium package, which report/html_chromium_test.go
# uses to render `truce check --format html` headless and screenshot it.
#
# Non-interactive and idempotent: does nothing when chromium is already on
# PATH. Needs root, or sudo. Written for Debian (bookworm and later); on
# Ubuntu the chromium package is a snap wrapper and will not work in CI.
#
#   scripts/install-chromium.sh
#   go test -run Chromium ./report/
set -eu

if command -v chromium >/dev/null 2>&1; then
	echo "chromium is already installed: $(chromium --version 2>/dev/null || echo unknown version)"
	exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
	echo "install-chromium.sh: apt-get not found; install Debian's chromium package by other means" >&2
	exit 1
fi

SUDO=
if [ "$(id -u)" -ne 0 ]; then
	if command -v sudo >/dev/null 2>&1; then
		SUDO="sudo"
	else
		echo "install-chromium.sh: needs root or sudo to run apt-get" >&2
		exit 1
	fi
fi

apt() {
	$SUDO env DEBIAN_FRONTEND=noninteractive apt-get \
		-q -y -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold "$@"
}

apt update
# fonts-dejavu-core: minimal images have no fonts, and the page's text
# would render as boxes. chromium-sandbox (a recommendation) is not needed:
# the test runs chromium with --no-sandbox.
apt install --no-install-recommends chromium fonts-dejavu-core

echo "installed: $(chromium --version)"
