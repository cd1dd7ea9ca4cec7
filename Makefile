# allocd build.
#
# The folders under daemon/ are layers, and the build keeps them apart:
#   daemon/core     pure code: the engine and its data structures. Built
#                   alone into libcore.a; the engine's unit tests link it
#                   with libc and nothing else, and tools/check-layers.sh
#                   fails the build if a core file includes, or libcore.a
#                   calls, anything outside the core and libc (no I/O, no
#                   clock, no Redis, no JSON library).
#   daemon/wire, base, redis, worker, service
#                   the edges, built into libdaemon.a; docs/DESIGN.md has
#                   the map of what each may include.
# The daemon, the tools and every test link these same libraries, so a test
# exercises exactly the code the daemon runs. allocctl's own modules live in
# tools/allocctl/. Objects live under $(BUILD) with -MMD -MP dependency
# files; `make asan` builds a second tree under build/asan with ASan+UBSan
# and runs the same tests there.

PREFIX  ?= /usr/local
DESTDIR ?=
BUILD   ?= build
# /usr installs (distribution packages) keep their config in /etc, as the FHS
# says; any other prefix keeps it beside the binaries.
SYSCONFDIR ?= $(if $(filter /usr,$(PREFIX)),/etc,$(PREFIX)/etc)

CC      ?= cc
PKGS    := libuv hiredis jansson libconfig libmicrohttpd
# The tests' tools are here too, as a missing one fails its test: redis-tools
# (redis-cli), prometheus (promtool), tmux (allocctl top), stunnel4 (TLS).
DEBS    := build-essential pkg-config libuv1-dev libhiredis-dev libjansson-dev \
           libconfig-dev libcmocka-dev redis-server redis-tools libpq-dev postgresql libmicrohttpd-dev \
           prometheus tmux stunnel4

WARN    := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
           -Wno-unused-parameter
ifeq ($(WERROR),1)
WARN    += -Werror
endif
# A build tree remembers the flags it was made with (make asan writes them),
# so a later `make ... BUILD=build/asan` (install, a single test) links with
# the same sanitizers instead of mixing instrumented and plain objects.
-include $(BUILD)/build.mk
OPT     ?= -O2
SAN     ?=
ASAN_FLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined \
              -DALLOCD_DEBUG=1
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   = $(shell pkg-config --libs $(PKGS) 2>/dev/null)
CFLAGS  += -std=c11 -D_GNU_SOURCE -g $(OPT) $(WARN) $(SAN) -Iinclude -Itools -Itests \
           -DALLOCD_SYSCONFDIR='"$(SYSCONFDIR)"' $(PKG_CFLAGS)
LDLIBS  += $(PKG_LIBS) -lm
LDFLAGS += $(SAN)

CORE_SRC  := $(wildcard daemon/core/*.c)
CORE_OBJ  := $(CORE_SRC:%.c=$(BUILD)/%.o)
LIBCORE   := $(BUILD)/libcore.a
EDGE_DIRS := wire base redis worker service
EDGE_SRC  := $(filter-out daemon/service/main.c,$(foreach d,$(EDGE_DIRS),$(wildcard daemon/$(d)/*.c)))
EDGE_OBJ  := $(EDGE_SRC:%.c=$(BUILD)/%.o)
LIBDAEMON := $(BUILD)/libdaemon.a
LIBS_ALL  := $(LIBDAEMON) $(LIBCORE)
CTL_SRC   := $(filter-out tools/allocctl/main.c,$(wildcard tools/allocctl/*.c))
CTL_OBJ   := $(CTL_SRC:%.c=$(BUILD)/%.o)
LIBCTL    := $(BUILD)/libctl.a

# Unit tests of the core link libcore.a and libc only: the link itself
# proves the engine needs no I/O library.
CORE_UNIT := test_engine test_engine_prop test_engine_scenarios test_engine_invariants test_strmap test_lottery \
             test_idfilter test_order_id test_numtext test_sha1
UNIT_SRC  := $(wildcard tests/unit/test_*.c)
UNIT_BIN  := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/unit/%)
CORE_UNIT_BIN := $(filter $(CORE_UNIT:%=$(BUILD)/tests/unit/%),$(UNIT_BIN))
EDGE_UNIT_BIN := $(filter-out $(CORE_UNIT_BIN),$(UNIT_BIN))
ITEST_SRC := $(wildcard tests/integration/test_*.c)
ITEST_BIN := $(ITEST_SRC:tests/integration/%.c=$(BUILD)/tests/integration/%)
# tools/proc: the processes tests and allocbench start (redis-server, allocd),
# their temp dirs and the cleanup at exit -- one copy for both, never linked
# into the daemon. Every binary that links the harness links it too.
PROC_OBJ    := $(BUILD)/tools/proc/proc.o
HARNESS_OBJ := $(BUILD)/tests/harness.o $(PROC_OBJ)
ITEST_OBJ   := $(BUILD)/tests/itest.o
TOOL_SRC  := $(wildcard tools/*.c)
TOOL_BIN  := $(TOOL_SRC:tools/%.c=$(BUILD)/%) $(BUILD)/allocctl

ALLOCD    := $(BUILD)/allocd
LAYERS_OK := $(BUILD)/check-layers.ok

.DELETE_ON_ERROR:

.PHONY: all check-layers test test-repeat unit integration asan install uninstall clean deps run check-deps bench
all: $(LAYERS_OK) $(ALLOCD) $(TOOL_BIN)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(LIBCORE): $(CORE_OBJ)
	@rm -f $@
	$(AR) rcs $@ $^
	@sh tools/check-layers.sh --lib $@

$(LIBDAEMON): $(EDGE_OBJ)
	@rm -f $@
	$(AR) rcs $@ $^

$(LIBCTL): $(CTL_OBJ)
	@rm -f $@
	$(AR) rcs $@ $^

$(ALLOCD): $(BUILD)/daemon/service/main.o $(LIBS_ALL)
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@

$(BUILD)/allocctl: $(BUILD)/tools/allocctl/main.o $(LIBCTL) $(LIBS_ALL)
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@

# A static pattern rule: the tool's object is named, so make keeps it. From a
# plain pattern rule it was an intermediate file, deleted after the link, and
# the next `make` (which then knew it from its .d file) built it again.
$(filter-out $(BUILD)/allocctl,$(TOOL_BIN)): $(BUILD)/%: $(BUILD)/tools/%.o $(LIBS_ALL)
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@

$(CORE_UNIT_BIN): $(BUILD)/tests/unit/%: $(BUILD)/tests/unit/%.o $(LIBCORE)
	$(CC) $(LDFLAGS) $^ -lcmocka -lm -o $@

$(EDGE_UNIT_BIN): $(BUILD)/tests/unit/%: $(BUILD)/tests/unit/%.o $(LIBCTL) $(LIBS_ALL)
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -lcmocka -o $@

$(BUILD)/tests/%.o: tests/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/tests/integration/%: $(BUILD)/tests/integration/%.o $(HARNESS_OBJ) $(ITEST_OBJ) $(LIBCTL) $(LIBS_ALL)
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -lcmocka -o $@

# The include rules of every layer (tools/check-layers.sh): `make check-layers`
# always, and every build once a source or header changed (the stamp: a
# check on each `make` made the tests that call make wait for it); the core
# library is checked each time it is built.
check-layers:
	@sh tools/check-layers.sh

$(LAYERS_OK): $(wildcard daemon/*/*.c daemon/*/*.h include/*/*.h) tools/check-layers.sh
	@mkdir -p $(dir $@)
	@sh tools/check-layers.sh
	@touch $@

tests-build: $(LAYERS_OK) all $(UNIT_BIN) $(ITEST_BIN)

# The sub-makes below build on every core unless the command line chose
# (make -jN): a fresh `make test` spends a minute and a half compiling on
# one core of two, and the suite has ten minutes (`make JOBS=1` for one).
JOBS     ?= $(shell nproc 2>/dev/null || echo 1)
SUB_JOBS  = $(if $(filter -j%,$(MAKEFLAGS)),,-j$(JOBS))

# `make test` is what CI runs: it installs missing packages first, then builds
# in a sub-make so pkg-config sees the freshly installed libraries.
test: deps
	$(MAKE) --no-print-directory $(SUB_JOBS) tests-build
	BUILD=$(BUILD) sh tests/run.sh

# `make test-repeat N=10`: the whole suite N times on a fresh build (in
# REPEAT_BUILD, default build/repeat), with a table of every test that ever
# failed (tests/repeat.sh).
N ?= 10
test-repeat: deps
	sh tests/repeat.sh $(N)

unit: tests-build
	BUILD=$(BUILD) sh tests/run.sh unit

integration: tests-build
	BUILD=$(BUILD) sh tests/run.sh integration

asan: deps
	@mkdir -p build/asan
	@printf 'SAN := %s\nOPT := -O1\n' '$(ASAN_FLAGS)' > build/asan/build.mk
	$(MAKE) --no-print-directory $(SUB_JOBS) BUILD=build/asan tests-build
	BUILD=build/asan ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 sh tests/run.sh

deps:
	@sh tools/deps.sh $(DEBS)

# `make run` builds quietly: the compiler's lines go to $(BUILD)/run-build.log,
# shown whole only when the build fails; the demo's own lines come first.
run: deps
	@mkdir -p $(BUILD); \
	if $(MAKE) --no-print-directory $(SUB_JOBS) all > $(BUILD)/run-build.log 2>&1; then \
	  n=$$(grep -c -- ' -c .* -o ' $(BUILD)/run-build.log); \
	  if [ "$$n" -eq 0 ]; then echo "make run: build up to date ($(BUILD)/)"; \
	  else echo "make run: built $$n files into $(BUILD)/ (compiler output: $(BUILD)/run-build.log)"; fi; \
	else cat $(BUILD)/run-build.log; echo "make run: the build failed (above; also in $(BUILD)/run-build.log)"; exit 1; fi
	@BUILD=$(BUILD) sh tools/run-demo.sh

MANDIR  ?= $(PREFIX)/share/man
DOCDIR  ?= $(PREFIX)/share/doc/allocd
UNITDIR ?= $(PREFIX)/lib/systemd/system
MANS    := $(wildcard man/*.[0-9])
DOCS    := README.md $(wildcard docs/*.md)

# The units name /usr/local paths; install rewrites them for PREFIX and
# SYSCONFDIR. An existing config is kept (installed as allocd.conf.new). The
# config is 0640 (it can hold the Redis password and the metrics token):
# the units hand it to their dynamic user with LoadCredential.
UNITS   := allocd.service allocd@.service allocd-archive.service
install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(SYSCONFDIR)/allocd $(DESTDIR)$(UNITDIR) $(DESTDIR)$(DOCDIR)
	install -m 0755 $(ALLOCD) $(TOOL_BIN) $(DESTDIR)$(PREFIX)/bin/
	if [ -e $(DESTDIR)$(SYSCONFDIR)/allocd/allocd.conf ]; then \
	  install -m 0640 conf/allocd.conf $(DESTDIR)$(SYSCONFDIR)/allocd/allocd.conf.new; \
	else install -m 0640 conf/allocd.conf $(DESTDIR)$(SYSCONFDIR)/allocd/allocd.conf; fi
	for u in $(UNITS); do \
	  sed -e 's#/usr/local/etc#$(SYSCONFDIR)#g' -e 's#/usr/local/bin#$(PREFIX)/bin#g' \
	    systemd/$$u > $(DESTDIR)$(UNITDIR)/$$u && chmod 0644 $(DESTDIR)$(UNITDIR)/$$u || exit 1; done
	install -d $(DESTDIR)$(DOCDIR)/examples
	install -m 0644 conf/prometheus/allocd-alerts.yml conf/grafana/allocd-dashboard.json $(DESTDIR)$(DOCDIR)/examples/
	install -m 0644 systemd/realtime.conf $(DESTDIR)$(DOCDIR)/examples/allocd-realtime.conf
	for m in $(MANS); do s=$${m##*.}; install -d $(DESTDIR)$(MANDIR)/man$$s; \
	  install -m 0644 $$m $(DESTDIR)$(MANDIR)/man$$s/; done
	install -m 0644 $(DOCS) $(DESTDIR)$(DOCDIR)/

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/allocd $(addprefix $(DESTDIR)$(PREFIX)/bin/,$(notdir $(TOOL_BIN)))
	rm -f $(addprefix $(DESTDIR)$(UNITDIR)/,$(UNITS)) $(DESTDIR)$(SYSCONFDIR)/allocd/allocd.conf.new
	for m in $(MANS); do s=$${m##*.}; rm -f $(DESTDIR)$(MANDIR)/man$$s/$$(basename $$m); done
	rm -rf $(DESTDIR)$(DOCDIR)
	@echo "kept $(DESTDIR)$(SYSCONFDIR)/allocd/allocd.conf (remove it by hand if unwanted)"

clean:
	rm -rf build

# Test and tool areas add their own targets (chaos, fuzz, bench) in mk/*.mk.
-include $(wildcard mk/*.mk)

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
