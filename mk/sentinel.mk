# mk/sentinel.mk -- allocd under Redis Sentinel, the long form.
#
# tests/integration/test_sentinel.c starts 1 master, 2 replicas and 3
# sentinels on loopback and fails the master over under load (kill -9 with
# the replicas 400 ms behind, and SENTINEL FAILOVER, alternately), with
# wait_replicas 0 and 1. It asserts that with wait_replicas 1 no result a
# poller saw is taken back, reports how many are with 0, and measures each
# takeover (the sentinels name the new master -> a request answered there).
# `make test` runs it with 2 failovers (wait_replicas 0) and 4
# (wait_replicas 1), and no timing assertion;
#   make sentinel          6 failovers with wait_replicas 0 and 20 with 1,
#                          4 s apart; every takeover within 5 s, asserted
.PHONY: sentinel
sentinel: tests-build
	SENTINEL_LONG=1 $(BUILD)/tests/integration/test_sentinel
