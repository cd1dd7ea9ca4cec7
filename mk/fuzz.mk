# mk/fuzz.mk -- libFuzzer targets and their replay in `make test`.
#
# Targets: request (request_parse, both grammars, every op of contract v2 in
# the dict and the corpus), engine, config (base/config: the file parser,
# file:line errors, ranges), items (allocctl's CSV/JSON item loaders),
# log_entry (the P:{B}:log decoder on hostile entries), profile (profiles
# and only_X/same_X attrs, against a reference decided from the JSON) and
# admin (ctl commands, assign/unassign above all, on an engine with rooms,
# groups and profiles, its invariants and a reload checked after each).
# tests/fuzz/fuzz_request.c (request_parse, both grammars, + wire/records) and
# tests/fuzz/fuzz_engine.c (operation sequences on a small engine, with the
# invariants checked after each one) are built two ways:
#   - with clang and -fsanitize=fuzzer,address,undefined under
#     $(BUILD)/fuzz/ (its own copy of the core objects, instrumented), run by
#     `make fuzz` (FUZZ_SECONDS per target, default 600) and
#     `make fuzz-smoke` (20 s each). New inputs go to $(BUILD)/fuzz/work/,
#     crashes to $(BUILD)/fuzz/crash-*; copy a fixed crash into
#     tests/fuzz/regressions/<target>/ so it is replayed forever.
#   - with the normal compiler and flags as cmocka replay binaries
#     $(BUILD)/tests/unit/test_fuzz_replay_{request,engine} that run every
#     file of tests/fuzz/corpus/<target>/ and tests/fuzz/regressions/<target>/
#     (part of `make test` and `make asan` through tests/run.sh).

FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 600
FUZZ_DIR     := $(BUILD)/fuzz
FUZZ_TARGETS := request engine config items log_entry profile admin
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZ_CFLAGS   = -std=c11 -D_GNU_SOURCE -g -O1 $(WARN) -Iinclude -Itools -Itests \
                -DALLOCD_SYSCONFDIR='"$(SYSCONFDIR)"' $(PKG_CFLAGS) $(PQ_CFLAGS)
FUZZ_CORE_OBJ := $(CORE_SRC:%.c=$(FUZZ_DIR)/%.o) $(EDGE_SRC:%.c=$(FUZZ_DIR)/%.o) $(CTL_SRC:%.c=$(FUZZ_DIR)/%.o)
FUZZ_BINS    := $(FUZZ_TARGETS:%=$(FUZZ_DIR)/fuzz_%)
REPLAY_BINS  := $(FUZZ_TARGETS:%=$(BUILD)/tests/unit/test_fuzz_replay_%)

.PHONY: fuzz fuzz-smoke fuzz-build fuzz-clang

# clang comes from Debian; install it when missing.
fuzz-clang:
	@command -v $(FUZZ_CC) >/dev/null 2>&1 || \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clang)

$(FUZZ_DIR)/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) $(FUZZ_SAN) -fsanitize=fuzzer-no-link -MMD -MP -c $< -o $@

$(FUZZ_DIR)/libcore.a: $(FUZZ_CORE_OBJ)
	@rm -f $@
	$(AR) rcs $@ $^

$(FUZZ_DIR)/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz_replay.h $(FUZZ_DIR)/libcore.a
	$(FUZZ_CC) $(FUZZ_CFLAGS) $(FUZZ_SAN) -fsanitize=fuzzer -DFUZZ_LIBFUZZER -MMD -MP -MF $@.d \
	  $< $(FUZZ_DIR)/libcore.a $(LDLIBS) -o $@

fuzz-build: fuzz-clang
	$(MAKE) --no-print-directory $(FUZZ_BINS)

# One libFuzzer run per target, one after the other (FUZZ_TARGETS="config
# items" runs only those). Leaks inside libconfig are suppressed
# (tests/fuzz/lsan.supp says which and why).
fuzz: fuzz-build
	@for t in $(FUZZ_TARGETS); do \
	  mkdir -p $(FUZZ_DIR)/work/$$t; \
	  echo "=== fuzz_$$t for $(FUZZ_SECONDS) s"; \
	  LSAN_OPTIONS=suppressions=tests/fuzz/lsan.supp \
	  $(FUZZ_DIR)/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -max_len=8192 -timeout=10 \
	    -rss_limit_mb=2048 -print_final_stats=1 \
	    -dict=tests/fuzz/$$t.dict -artifact_prefix=$(FUZZ_DIR)/crash-$$t- \
	    $(FUZZ_DIR)/work/$$t tests/fuzz/corpus/$$t tests/fuzz/regressions/$$t || exit 1; \
	done

fuzz-smoke:
	$(MAKE) --no-print-directory fuzz FUZZ_SECONDS=20

# The replay binaries: normal compiler and flags, cmocka main().
$(BUILD)/tests/unit/test_fuzz_replay_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz_replay.h $(LIBCTL) $(LIBS_ALL)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -MMD -MP -MF $@.d $< $(LIBCTL) $(LIBS_ALL) $(LDLIBS) -lcmocka -o $@

tests-build: $(REPLAY_BINS)
