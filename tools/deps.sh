#!/bin/sh
# Installs the Debian packages named on the command line that are missing.
# As root it runs apt-get itself; otherwise it prints the exact command.
# Prints nothing and does nothing when every package is already present.
missing=""
for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
        missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" -eq 0 ]; then
    echo "deps: installing$missing"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq --no-install-recommends $missing >/dev/null ||
        { echo "deps: apt-get install failed for:$missing" >&2; exit 1; }
else
    echo "deps: missing packages:$missing" >&2
    echo "deps: run: sudo apt-get update && sudo apt-get install -y$missing" >&2
    exit 1
fi
