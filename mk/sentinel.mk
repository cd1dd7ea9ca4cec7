# mk/sentinel.mk -- allocd under Redis Sentinel, the long form.
#
# tests/integration/test_sentinel.c starts 1 master, 2 replicas and 3
# sentinels on loopback and fails the master over under load (kill -9 with
# the replicas 400 ms behind, then SENTINEL FAILOVER), with wait_replicas 0
# and 1, and reports how many results a poller saw that a failover took
# back. `make test` runs it with 2 failovers per setting (about 30 s);
#   make sentinel          6 failovers per setting (kill -9 and SENTINEL
#                          FAILOVER alternately, 4 s apart)
.PHONY: sentinel
sentinel: tests-build
	SENTINEL_LONG=1 $(BUILD)/tests/integration/test_sentinel
