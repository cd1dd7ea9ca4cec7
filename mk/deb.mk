# `make deb`: a Debian package of allocd built with dpkg-deb from
# `make install PREFIX=/usr` (binaries, /etc/allocd/allocd.conf as a
# conffile, mode 0640, the units, man pages, docs, the monitoring pack),
# then checked with lintian when it is installed (`make deb-deps`).
# Depends are the packages that hold the shared libraries the binaries link.
DEB_VERSION := $(shell sed -n 's/^\#define ALLOCD_VERSION "\(.*\)"/\1/p' include/base/config.h)-1
DEB_ARCH    := $(shell dpkg --print-architecture 2>/dev/null || echo amd64)
DEB_DIR     := $(BUILD)/deb
DEB_ROOT    := $(DEB_DIR)/root
DEB_FILE    := $(DEB_DIR)/allocd_$(DEB_VERSION)_$(DEB_ARCH).deb

.PHONY: deb deb-deps
deb-deps:
	@sh tools/deps.sh lintian dpkg-dev

deb:
	rm -rf $(DEB_ROOT)
	$(MAKE) --no-print-directory install PREFIX=/usr SYSCONFDIR=/etc UNITDIR=/lib/systemd/system \
	  DESTDIR=$(abspath $(DEB_ROOT))
	sh tools/mkdeb.sh $(DEB_ROOT) $(DEB_FILE) $(DEB_VERSION) $(DEB_ARCH)
	@if command -v lintian >/dev/null; then lintian --fail-on error $(DEB_FILE); \
	  else echo "deb: lintian not installed (make deb-deps): not checked"; fi

# make test lints the package it builds (tests/integration/test_install.c)
DEBS += dpkg-dev lintian
