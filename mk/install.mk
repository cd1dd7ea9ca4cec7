# The daemon's default config path (-DALLOCD_SYSCONFDIR) is compiled into
# config.o: rebuild it when SYSCONFDIR changes (`make install PREFIX=/usr`
# after a plain `make` must not keep /usr/local/etc). The stamp holds the
# value and is rewritten only when it differs.
SYSCONF_STAMP := $(BUILD)/sysconfdir.stamp
$(SYSCONF_STAMP): FORCE
	@mkdir -p $(BUILD); echo '$(SYSCONFDIR)' | cmp -s - $@ || echo '$(SYSCONFDIR)' > $@
$(BUILD)/daemon/base/config.o: $(SYSCONF_STAMP)
.PHONY: FORCE
FORCE:
