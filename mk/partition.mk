# mk/partition.mk -- allocd under real network faults (tests/partition/).
#
# Two allocd instances, each in a network namespace of its own, one Redis in
# a third; links cut both ways or one way (tc clsact + u32 + mirred to an ifb
# left down), delayed with loss through tests/partition/netrelay.c, or
# flapped, while a producer pushes and a poller checks the history
# (tests/partition/part_check.h). Needs root and iproute2.
#
#   make partition             every scenario at length (cut, oneway,
#                              delay, flap; about 3 minutes)
#   make partition PARTITION_ARGS="--scenario oneway --rounds 8 --ttl-ms 3000"
#
# test_partition (the short form, in `make test`) links the same objects;
# like the chaos tests it needs an explicit rule. netrelay is a program of
# its own and links nothing of the daemon.

PART_OBJ := $(BUILD)/tests/partition/partition.o $(BUILD)/tests/partition/part_check.o \
            $(BUILD)/tests/partition/part_net.o
PART_BIN := $(BUILD)/tests/partition/partition
NETRELAY := $(BUILD)/tests/partition/netrelay
PARTITION_ARGS ?=

.PHONY: partition

$(NETRELAY): $(BUILD)/tests/partition/netrelay.o
	$(CC) $(LDFLAGS) $^ -o $@

$(PART_BIN): $(BUILD)/tests/partition/partition_main.o $(PART_OBJ) $(HARNESS_OBJ) $(LIBS_ALL)
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -lpthread -o $@

$(BUILD)/tests/integration/test_partition: $(BUILD)/tests/integration/test_partition.o \
		$(PART_OBJ) $(HARNESS_OBJ) $(LIBS_ALL) | $(NETRELAY)
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -lcmocka -lpthread -o $@

tests-build: $(BUILD)/tests/integration/test_partition $(PART_BIN) $(NETRELAY)

partition: $(ALLOCD) $(PART_BIN) $(NETRELAY)
	BUILD=$(BUILD) $(PART_BIN) $(PARTITION_ARGS)
