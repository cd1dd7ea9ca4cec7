# mk/bench.mk -- allocbench, the side-by-side benchmark (tools/allocbench.c).
#
# The Makefile builds every tools/NAME.c into $(BUILD)/NAME; allocbench also
# needs the tool-agnostic pieces in tools/bench/, added here as extra
# prerequisites (the Makefile's pattern rule links all of them) so that
# tools/bench/*.c never become binaries of their own.
#
#   make bench            build, then the standard comparison (every TARGET line
#                         except memory); BENCH_ARGS replaces its arguments
#   make bench-memory     RSS per participant at one million participants, then
#                         profile bytes per user: 100,000 users without and with
#                         a five-attribute profile (issue 35, <= 100 B/user)
#   make bench-housing    issue 35's housing round, eligibility off and on (the
#                         same rooms, users and requests; profiles for all and
#                         only_X/same_X rules on 9 rooms in 10), 5 pairs, the
#                         order alternating: decisions/s of the batch loaded
#                         before the window and its ratio (<= 10%); the load's
#                         time beside it; then the engine alone, off and on
#   make bench-scaling    stock at chunk 64/256/1024/4096
#   make bench-groups     issue 13's housing round: 20,000 students in groups of
#                         1-4 formed by invitation (groups-formed) for 5,000
#                         rooms, beside the listed `groups` scenario, 26,000
#                         requests each, prepushed and live
#   make bench-tickets    a ticket sale with expiring reservations: allocd's
#                         waitlist (wait:true) against Lua with polling losers
#                         (also the last part of `make bench`)
#   make bench-cluster    stock over Redis Cluster: (1 Redis, 1 instance),
#                         (3 masters, 3 instances), (3 masters, 1 instance),
#                         6 batches, 200,000 requests, 2 rounds
#   make bench-e2e        the headline: live end to end, 15 rounds of allocd
#                         (plain RPUSH), allocd (position transaction) and Lua,
#                         every result read once (a round is ~1.5 s: 15
#                         steady the median); BENCH_E2E_ARGS adds e.g.
#                         --log-format chunk, or --rt (Redis and allocd
#                         SCHED_FIFO, reset on fork: DEPLOYMENT.md)
#   make bench-openloop   offered vs accepted load and p50/p99/p100 at 25, 50,
#                         75, 90% of each design's e2e saturation (median of 3
#                         rounds), allocd and Lua, each row the median of 9
#                         runs (enough for a 95% interval of the median p99),
#                         on a Redis without persistence and then with
#                         appendfsync everysec

BENCH_SRC := $(wildcard tools/bench/*.c)
BENCH_OBJ := $(BENCH_SRC:%.c=$(BUILD)/%.o)

# tools/proc (PROC_OBJ, the Makefile): the processes, temp dirs and cleanup
# at exit that the tests' harness uses too.
$(BUILD)/allocbench: $(BENCH_OBJ) $(PROC_OBJ)
# libcore.a comes before the bench objects in $^; tools/bench/cluster.c uses
# its cluster_slots, so it is named again after them.
$(BUILD)/allocbench: LDLIBS += -lpthread $(LIBS_ALL) $(PKG_LIBS)

BENCH_ARGS ?= --targets
BENCH_MEMORY_ARGS ?= --scenario stock --users 1000000 --requests 1000000 --memory --profile-memory 100000
BENCH_HOUSING_ARGS ?= --scenario housing-elig --housing-pairs 5 --requests 200000
BENCH_SCALING_ARGS ?= --scenario stock --chunk-sweep 64,256,1024,4096
BENCH_CLUSTER_ARGS ?= --cluster-sweep 1x1,3x3,3x1 --batches 6 --requests 200000 --runs 2

BENCH_TICKETS_ARGS ?= --tickets --users 100000 --hold-ms 2000
BENCH_GROUPS_ARGS ?= --scenario groups,groups-formed --requests 26000 --mode both
BENCH_E2E_ARGS ?=
BENCH_OPENLOOP_ARGS ?= --e2e-pairs 3 --open-loop-runs 9

.PHONY: bench bench-memory bench-scaling bench-cluster bench-tickets bench-e2e bench-openloop bench-groups bench-housing
bench: $(ALLOCD) $(BUILD)/allocbench
	$(BUILD)/allocbench --allocd $(ALLOCD) $(BENCH_ARGS)
	$(BUILD)/allocbench --allocd $(ALLOCD) $(BENCH_TICKETS_ARGS)

bench-groups: $(ALLOCD) $(BUILD)/allocbench
	$(BUILD)/allocbench --allocd $(ALLOCD) $(BENCH_GROUPS_ARGS)

bench-tickets: $(ALLOCD) $(BUILD)/allocbench
	$(BUILD)/allocbench --allocd $(ALLOCD) $(BENCH_TICKETS_ARGS)

bench-memory: $(ALLOCD) $(BUILD)/allocbench
	$(BUILD)/allocbench --allocd $(ALLOCD) $(BENCH_MEMORY_ARGS)

bench-housing: $(ALLOCD) $(BUILD)/allocbench
	$(BUILD)/allocbench --allocd $(ALLOCD) $(BENCH_HOUSING_ARGS)

bench-scaling: $(ALLOCD) $(BUILD)/allocbench
	$(BUILD)/allocbench --allocd $(ALLOCD) $(BENCH_SCALING_ARGS)

bench-cluster: $(ALLOCD) $(BUILD)/allocbench
	$(BUILD)/allocbench --allocd $(ALLOCD) $(BENCH_CLUSTER_ARGS)

bench-e2e: $(ALLOCD) $(BUILD)/allocbench
	$(BUILD)/allocbench --allocd $(ALLOCD) --e2e-pairs 15 --targets-e2e $(BENCH_E2E_ARGS)

bench-openloop: $(ALLOCD) $(BUILD)/allocbench
	$(BUILD)/allocbench --allocd $(ALLOCD) --open-loop --targets-e2e $(BENCH_OPENLOOP_ARGS)
	$(BUILD)/allocbench --allocd $(ALLOCD) --open-loop --targets-e2e --aof $(BENCH_OPENLOOP_ARGS)

# tests/unit/test_timeline checks allocbench's timeline (tools/bench/timeline.c)
$(BUILD)/tests/unit/test_timeline: $(BUILD)/tools/bench/timeline.o

# tests/unit/test_median_ci checks the interval of a median of paired
# ratios printed beside the TARGET lines (tools/bench/median_ci.c)
$(BUILD)/tests/unit/test_median_ci: $(BUILD)/tools/bench/median_ci.o
