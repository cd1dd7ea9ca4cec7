# mk/sim.mk -- the deterministic simulator (tests/sim, issue 18).
#
# The simulator links the real worker, engine and wire code (libdaemon.a,
# libcore.a) with tests/sim/ in place of libuv's timers, the clocks, the
# random source and the Redis connections (link-time substitution: the sim
# objects come first and define those symbols, so redis_conn.o, clock.o and
# random.o are never pulled from the archive; libuv is not linked at all, so
# a libuv call the simulator does not provide fails the link).
#   $(BUILD)/tests/sim/sim            the command line: `make sim SEEDS=N`
#   $(BUILD)/tests/unit/test_sim_sweep  a short sweep, part of `make test`
#   $(BUILD)/tests/integration/test_sim_model  the model against a real
#                                     redis-server, part of `make test`

SEEDS     ?= 200
SIM_FLAGS ?=
SIM_CORE_OBJ := $(addprefix $(BUILD)/tests/sim/,sim_loop.o sim_net.o sim_redis.o sim_run.o)
SIM_LIBS   = $(shell pkg-config --libs hiredis jansson libconfig 2>/dev/null) -lm
SIM_BIN   := $(BUILD)/tests/sim/sim
SIM_TESTS := $(BUILD)/tests/unit/test_sim_sweep $(BUILD)/tests/integration/test_sim_model

.PHONY: sim sim-build

$(SIM_BIN): $(BUILD)/tests/sim/sim_main.o $(SIM_CORE_OBJ) $(LIBCTL) $(LIBS_ALL)
	$(CC) $(LDFLAGS) $^ $(SIM_LIBS) -o $@

$(BUILD)/tests/unit/test_sim_sweep: $(BUILD)/tests/sim/test_sim_sweep.o $(SIM_CORE_OBJ) $(LIBCTL) $(LIBS_ALL)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $^ $(SIM_LIBS) -lcmocka -o $@

$(BUILD)/tests/integration/test_sim_model: $(BUILD)/tests/sim/test_sim_model.o $(BUILD)/tests/sim/sim_redis.o \
    $(HARNESS_OBJ) $(ITEST_OBJ) $(LIBCTL) $(LIBS_ALL)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -lcmocka -o $@

sim-build: $(SIM_BIN)

tests-build: $(SIM_BIN) $(SIM_TESTS)

# `make sim SEEDS=N [SIM_FLAGS="--faults=aof --first 1"]`: N seeds, then
# seeds/s and the replay line of every failing seed.
sim: deps
	$(MAKE) --no-print-directory $(SIM_BIN)
	$(SIM_BIN) --seeds $(SEEDS) $(SIM_FLAGS)
