# mk/housing.mk -- a university housing round end to end (issue 35, item 3):
# alloccampus (tools/campus/) generates a campus from a seed and plays its
# round on a real allocd (docs/HOUSING.md).
#
#   make run-housing    the full round (3,000 students, 1,200 rooms) on a
#                       private Redis and allocd, explained step by step;
#                       HOUSING_STUDENTS=300 for the short form, HOUSING_SEED
#                       for another campus
#
# tests/integration/test_housing_round.c runs the short form in `make test`.

CAMPUS_SRC := $(wildcard tools/campus/*.c)
CAMPUS_OBJ := $(CAMPUS_SRC:%.c=$(BUILD)/%.o)
CAMPUS_BIN := $(BUILD)/alloccampus

HOUSING_STUDENTS ?= 3000
HOUSING_SEED     ?= 1
HOUSING_DIR      ?= run/housing

$(CAMPUS_BIN): $(CAMPUS_OBJ) $(PROC_OBJ) $(LIBS_ALL)
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@

tests-build: $(CAMPUS_BIN)

.PHONY: run-housing
# Built quietly, as `make run` is (the compiler's lines go to a log), and
# only the three programs it runs.
run-housing: deps
	@mkdir -p $(BUILD) $(HOUSING_DIR); \
	if $(MAKE) --no-print-directory $(ALLOCD) $(BUILD)/allocctl $(CAMPUS_BIN) > $(BUILD)/run-housing-build.log 2>&1; then \
	  n=$$(grep -c -- ' -c .* -o ' $(BUILD)/run-housing-build.log); \
	  if [ "$$n" -gt 0 ]; then echo "make run-housing: built $$n files into $(BUILD)/ (compiler output: $(BUILD)/run-housing-build.log)"; fi; \
	else cat $(BUILD)/run-housing-build.log; echo "make run-housing: the build failed (above)"; exit 1; fi
	@$(CAMPUS_BIN) gen --out $(HOUSING_DIR) --seed $(HOUSING_SEED) --students $(HOUSING_STUDENTS)
	@$(CAMPUS_BIN) round --dir $(HOUSING_DIR) --allocd $(ALLOCD) --allocctl $(BUILD)/allocctl
