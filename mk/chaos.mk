# mk/chaos.mk -- chaos and fault-injection runs, and the valgrind cycle.
#
# The chaos core (tests/chaos/chaos_core.c) is linked into the command-line
# driver (make chaos) and into the cmocka tests that run it briefly in
# `make test` (test_chaos_short, test_outage). Those tests need one more
# object than the Makefile's generic integration rule links, so they get
# explicit rules here (an explicit rule wins over the pattern rule).
#
#   make chaos                 long run: 200k requests, 20 kills, 3 Redis
#                              restarts, a 60 s Redis outage, DEBUG SLEEPs, and
#                              an archiver into PostgreSQL killed with allocd,
#                              checked by reconcile (--archive); contract 11 in
#                              its room batches (rules and profiles, staff
#                              placements, exact fill, a draw by points:
#                              tests/chaos/chaos_rules.c)
#   make chaos CHAOS_ARGS="--requests 50000 --kills 5 --seed 7"
#   make chaos-cluster         the same checks over a 3-master Redis Cluster:
#                              3 allocd instances, 60k requests, 10 kills,
#                              2 SIGSTOPs past the lease (needs redis-cli)
#   make chaos-cluster CHAOS_CLUSTER_ARGS="--requests 20000 --kills 4 --instances 2"
#   make valgrind              allocd under valgrind, full serve-drain cycle

CHAOS_CORE_OBJ := $(patsubst %.c,$(BUILD)/%.o,$(filter-out tests/chaos/chaos.c,$(wildcard tests/chaos/chaos_*.c)))
CHAOS_BIN      := $(BUILD)/tests/chaos/chaos
CHAOS_ARGS     ?= --requests 200000 --kills 20 --redis-restarts 3 \
                  --outage-seconds 60 --slow 4 --seconds 90 --seed 1 --archive
CHAOS_CLUSTER_ARGS ?= --cluster --instances 3 --requests 60000 --kills 10 \
                  --pauses 2 --seconds 40 --seed 1

.PHONY: chaos chaos-cluster valgrind

# libcore for the cluster slot map (CRC16, CLUSTER SLOTS, MOVED parsing)
$(CHAOS_BIN): $(BUILD)/tests/chaos/chaos.o $(CHAOS_CORE_OBJ) $(HARNESS_OBJ) $(LIBCTL) $(LIBS_ALL)
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -lpthread -o $@

$(BUILD)/tests/integration/test_chaos_short: $(BUILD)/tests/integration/test_chaos_short.o \
		$(CHAOS_CORE_OBJ) $(HARNESS_OBJ) $(LIBCTL) $(LIBS_ALL)
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -lcmocka -lpthread -o $@

$(BUILD)/tests/integration/test_outage: $(BUILD)/tests/integration/test_outage.o \
		$(CHAOS_CORE_OBJ) $(HARNESS_OBJ) $(LIBCTL) $(LIBS_ALL)
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -lcmocka -lpthread -o $@

$(BUILD)/tests/integration/test_chaos_cluster: $(BUILD)/tests/integration/test_chaos_cluster.o \
		$(CHAOS_CORE_OBJ) $(HARNESS_OBJ) $(LIBCTL) $(LIBS_ALL)
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -lcmocka -lpthread -o $@

tests-build: $(BUILD)/tests/integration/test_chaos_short $(BUILD)/tests/integration/test_outage \
	$(BUILD)/tests/integration/test_chaos_cluster $(CHAOS_BIN)

chaos: $(ALLOCD) $(BUILD)/allocctl $(CHAOS_BIN)
	BUILD=$(BUILD) $(CHAOS_BIN) $(CHAOS_ARGS)

chaos-cluster: $(ALLOCD) $(CHAOS_BIN)
	BUILD=$(BUILD) $(CHAOS_BIN) $(CHAOS_CLUSTER_ARGS)

valgrind: $(ALLOCD)
	BUILD=$(BUILD) sh tests/chaos/valgrind.sh
