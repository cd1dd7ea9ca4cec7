#!/bin/sh
# Turns a `make install PREFIX=/usr DESTDIR=ROOT` tree into a Debian
# package with dpkg-deb (mk/deb.mk): strips the binaries, compresses man
# pages and the changelog as Debian policy asks, writes the copyright file,
# DEBIAN/control (Depends from the packages owning the linked libraries),
# conffiles and md5sums.  Usage: tools/mkdeb.sh ROOT OUT.deb VERSION ARCH
set -eu
root=$1 out=$2 version=$3 arch=$4
maint=${DEB_MAINTAINER:-allocd maintainers <allocd@example.org>}
doc=$root/usr/share/doc/allocd

for b in "$root"/usr/bin/*; do
    strip --strip-unneeded --remove-section=.comment --remove-section=.note "$b"
done
find "$root/usr/share/man" -type f ! -name '*.gz' -exec gzip -9n {} +
cat > "$doc/copyright" <<COPY
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: allocd

Files: *
Copyright: 2026 the allocd authors
License: proprietary
 All rights reserved by the allocd authors.
COPY
date=$(git log -1 --format=%aD 2>/dev/null || date -R)
printf 'allocd (%s) unstable; urgency=medium\n\n  * Build of %s.\n\n -- %s  %s\n' \
    "$version" "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" "$maint" "$date" |
    gzip -9n > "$doc/changelog.Debian.gz"
chmod 0644 "$doc/copyright" "$doc/changelog.Debian.gz"

# Depends: the packages that own the libraries the binaries link directly
# (their NEEDED entries, found where ldd resolves them)
libs=$(for b in "$root"/usr/bin/*; do
           for n in $(objdump -p "$b" | awk '$1 == "NEEDED" { print $2 }'); do
               ldd "$b" | awk -v n="$n" '$1 == n { print $3 }'
           done
       done | sort -u)
deps=$(for l in $libs; do dpkg -S "$(readlink -f "$l")" 2>/dev/null || dpkg -S "$l" 2>/dev/null; done |
       cut -d: -f1 | sort -u | grep -v '^libc6$' | paste -sd, | sed 's/,/, /g')
size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
mkdir -p "$root/DEBIAN"
cat > "$root/DEBIAN/control" <<CTL
Package: allocd
Version: $version
Architecture: $arch
Maintainer: $maint
Installed-Size: $size
Depends: libc6, $deps
Recommends: redis-server
Section: net
Priority: optional
Description: fair, fast allocation of scarce things from Redis queues
 allocd serves flash-sale stock and dorm beds from per-batch Redis queues:
 producers push JSON requests, one worker per batch decides them in memory
 and writes results back atomically. Includes allocctl, systemd units
 (allocd.service, allocd@.service), a Prometheus endpoint, a read-only web
 dashboard and a monitoring pack (alert rules, Grafana dashboard).
CTL
echo /etc/allocd/allocd.conf > "$root/DEBIAN/conffiles"
(cd "$root" && find . -path ./DEBIAN -prune -o -type f -print | sed 's#^\./##' | sort |
    xargs md5sum > DEBIAN/md5sums)
chmod 0644 "$root/DEBIAN/control" "$root/DEBIAN/conffiles" "$root/DEBIAN/md5sums"
dpkg-deb --root-owner-group -Zxz --build "$root" "$out" >/dev/null
echo "deb: $out"
