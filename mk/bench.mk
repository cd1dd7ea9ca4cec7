# mk/bench.mk -- allocbench, the side-by-side benchmark (tools/allocbench.c).
#
# The Makefile builds every tools/NAME.c into $(BUILD)/NAME; allocbench also
# needs the tool-agnostic pieces in tools/bench/, added here as extra
# prerequisites (the Makefile's pattern rule links all of them) so that
# tools/bench/*.c never become binaries of their own.
#
#   make bench            build, then the standard comparison (every TARGET line
#                         except memory); BENCH_ARGS replaces its arguments
#   make bench-memory     RSS per participant at one million participants
#   make bench-scaling    stock at chunk 64/256/1024/4096

BENCH_SRC := $(wildcard tools/bench/*.c)
BENCH_OBJ := $(BENCH_SRC:%.c=$(BUILD)/%.o)

$(BUILD)/allocbench: $(BENCH_OBJ)
$(BUILD)/allocbench: LDLIBS += -lpthread

BENCH_ARGS ?= --targets
BENCH_MEMORY_ARGS ?= --scenario stock --users 1000000 --requests 1000000 --memory
BENCH_SCALING_ARGS ?= --scenario stock --chunk-sweep 64,256,1024,4096

.PHONY: bench bench-memory bench-scaling
bench: $(ALLOCD) $(BUILD)/allocbench
	$(BUILD)/allocbench --allocd $(ALLOCD) $(BENCH_ARGS)

bench-memory: $(ALLOCD) $(BUILD)/allocbench
	$(BUILD)/allocbench --allocd $(ALLOCD) $(BENCH_MEMORY_ARGS)

bench-scaling: $(ALLOCD) $(BUILD)/allocbench
	$(BUILD)/allocbench --allocd $(ALLOCD) $(BENCH_SCALING_ARGS)
