# mk/sim.mk -- the deterministic simulator (tests/sim, issue 18).
#
# The simulator links the real worker, engine and wire code (libdaemon.a,
# libcore.a) with tests/sim/ in place of libuv's timers, the clocks, the
# random source and the Redis connections (link-time substitution: the sim
# objects come first and define those symbols, so redis_conn.o, clock.o and
# random.o are never pulled from the archive, and the libuv calls the
# simulated code makes resolve to tests/sim/sim_loop.c). libuv itself is
# linked only for the metrics HTTP server, which registry.o pulls in and the
# simulator never starts; sim-uv-check fails the build when the worker or
# the registry call a libuv function the simulator does not provide.
# clock_gettime is wrapped (--wrap) so the log's timestamps are simulated.
#   $(BUILD)/tests/sim/sim            the command line: `make sim SEEDS=N`,
#                                     `make sim-long HOURS=H`
#   $(BUILD)/tests/unit/test_sim_sweep  a short sweep, part of `make test`
#   $(BUILD)/tests/integration/test_sim_model  the model against a real
#                                     redis-server, part of `make test`

SEEDS     ?= 200
HOURS     ?= 1
SIM_FLAGS ?=
SIM_CORE_OBJ := $(addprefix $(BUILD)/tests/sim/,sim_loop.o sim_net.o sim_router.o sim_cluster.o sim_redis.o \
    sim_stream.o sim_run.o sim_reshard.o sim_c11.o sim_archive.o real_router.o)
SIM_LIBS   = $(PKG_LIBS) -lm
SIM_UV    := uv_timer_init uv_timer_start uv_timer_stop uv_close uv_hrtime uv_is_active
SIM_SIMULATED_OBJ = $(filter $(BUILD)/daemon/worker/%.o $(BUILD)/daemon/service/registry.o $(BUILD)/daemon/service/giveups.o,$(EDGE_OBJ)) \
    $(BUILD)/tests/sim/real_router.o
SIM_ROUTER_SYMS := init ready is_cluster target refresh on_moved command eval close

# The real redis_router.c, for the cluster runs: the same object under
# other names, since sim_router.c defines redis_router_* and calls these.
$(BUILD)/tests/sim/real_router.o: $(BUILD)/daemon/redis/redis_router.o
	@mkdir -p $(dir $@)
	objcopy $(foreach s,$(SIM_ROUTER_SYMS),--redefine-sym redis_router_$(s)=sim_real_redis_router_$(s)) $< $@
SIM_BIN   := $(BUILD)/tests/sim/sim
SIM_TESTS := $(BUILD)/tests/unit/test_sim_sweep $(BUILD)/tests/integration/test_sim_model

.PHONY: sim sim-build sim-long

$(SIM_BIN): $(BUILD)/tests/sim/sim_main.o $(SIM_CORE_OBJ) $(LIBCTL) $(LIBS_ALL)
	@bad=$$(nm -u $(SIM_SIMULATED_OBJ) | awk '$$2 ~ /^uv_/ {print $$2}' | sort -u | grep -vxF "$$(printf '%s\n' $(SIM_UV))"); \
	  if [ -n "$$bad" ]; then echo "sim: the worker calls libuv functions tests/sim does not simulate: $$bad"; exit 1; fi
	$(CC) $(LDFLAGS) $^ $(SIM_LIBS) -Wl,--wrap=clock_gettime -o $@

$(BUILD)/tests/unit/test_sim_sweep: $(BUILD)/tests/sim/test_sim_sweep.o $(SIM_CORE_OBJ) $(LIBCTL) $(LIBS_ALL)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $^ $(SIM_LIBS) -lcmocka -Wl,--wrap=clock_gettime -o $@

$(BUILD)/tests/integration/test_sim_model: $(BUILD)/tests/sim/test_sim_model.o $(BUILD)/tests/sim/sim_redis.o $(BUILD)/tests/sim/sim_stream.o \
    $(BUILD)/tests/sim/sim_cluster.o \
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

# `make sim-long HOURS=H [SIM_FLAGS=...]`: seeds from the clock until H
# hours (0.01 is 36 s) have passed, then seeds per hour and the replay line
# of every failing seed. allocd's own log (its ERROR lines) goes to
# $(BUILD)/sim-long.log, so the report stays readable.
sim-long: deps
	$(MAKE) --no-print-directory $(SIM_BIN)
	@echo "sim-long: allocd's log in $(BUILD)/sim-long.log"
	$(SIM_BIN) --hours $(HOURS) $(SIM_FLAGS) 2>$(BUILD)/sim-long.log
