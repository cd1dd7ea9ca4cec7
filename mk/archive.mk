# mk/archive.mk -- the archive into PostgreSQL (docs/ARCHIVE.md).
#
# allocctl's archive, reconcile, export and purge commands (tools/allocctl/
# archive_*.c, cmd_archive.c, ...) use libpq (Debian's libpq-dev, installed by
# `make deps`). Only the binaries that call it link it: allocctl and the
# archive tests; the daemon never does. Their tests start a private
# PostgreSQL (tools/proc: proc_pg_start) beside the private redis-server.
#
#   make archive-long     the long forms: kill -9 of the archiver at random
#                         moments for 60 s with PostgreSQL restarts during
#                         --follow, the export of 1,000,000 results with its
#                         peak RSS, and the archive's rate (ARCHIVE_LONG_ARGS)
#   make bench-archive    the archive's rate alone (events/s into PostgreSQL), a
#                         log in each format; `make bench` runs it first,
#                         beside allocd's rates
#   make bench-archive-sale  one run: a 200,000-grant sale decided by allocd,
#                         then archived: archive events/s beside grants/s

PQ_CFLAGS := $(shell pkg-config --cflags libpq 2>/dev/null)
PQ_LIBS   := $(shell pkg-config --libs libpq 2>/dev/null || echo -lpq)
CFLAGS    += $(PQ_CFLAGS)

ARCHIVE_TESTS := $(BUILD)/tests/integration/test_archive $(BUILD)/tests/integration/test_archive_formats
ARCHIVE_LONG  := $(BUILD)/tests/archive/archive_long
ARCHIVE_LONG_ARGS ?= --seconds 60 --results 1000000

# test_report reads the archive it made (the report from a purged batch)
$(BUILD)/allocctl $(ARCHIVE_TESTS) $(BUILD)/tests/integration/test_report: LDLIBS += $(PQ_LIBS)

$(ARCHIVE_LONG): $(BUILD)/tests/archive/archive_long.o $(BUILD)/tests/archive_fixture.o $(HARNESS_OBJ) $(ITEST_OBJ) $(LIBCTL) $(LIBS_ALL)
	$(CC) $(LDFLAGS) $^ $(LDLIBS) $(PQ_LIBS) -lcmocka -o $@

tests-build: $(ARCHIVE_LONG)

.PHONY: archive-long
archive-long: all $(ARCHIVE_LONG)
	BUILD=$(BUILD) $(ARCHIVE_LONG) $(ARCHIVE_LONG_ARGS)

# the archive tests share tests/archive_fixture.c (an explicit rule wins
# over the Makefile's pattern rule for integration tests)
ARCHIVE_FIX_OBJ := $(BUILD)/tests/archive_fixture.o
$(ARCHIVE_TESTS): $(BUILD)/tests/integration/%: $(BUILD)/tests/integration/%.o $(ARCHIVE_FIX_OBJ) $(HARNESS_OBJ) $(ITEST_OBJ) $(LIBCTL) $(LIBS_ALL)
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -lcmocka -o $@

.PHONY: bench-archive bench-archive-sale
bench-archive: all $(ARCHIVE_LONG)
	BUILD=$(BUILD) $(ARCHIVE_LONG) --only rate --events 200000 2>&1 | grep -E '^rate:|FAIL|ERROR'

# one run: allocd decides a 200,000-grant sale, then the archive copies its
# log; the target is archive events/s >= allocd's grants/s
bench-archive-sale: all $(ARCHIVE_LONG)
	BUILD=$(BUILD) $(ARCHIVE_LONG) --only sale --events 200000 2>&1 | grep -E '^sale:|FAIL|ERROR'

bench: bench-archive bench-archive-sale
