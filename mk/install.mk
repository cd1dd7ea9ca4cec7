# The daemon's default config path (-DALLOCD_SYSCONFDIR) is compiled into
# config.o: rebuild it when SYSCONFDIR changes (`make install PREFIX=/usr`
# after a plain `make` must not keep /usr/local/etc). The stamp holds the
# value and is rewritten only when it differs -- when make reads this file,
# not by a rule: a rule forced to run on every make counts as a change, and
# config.o, libdaemon.a and every binary were rebuilt by each `make`.
SYSCONF_STAMP := $(BUILD)/sysconfdir.stamp
$(shell mkdir -p $(BUILD); echo '$(SYSCONFDIR)' | cmp -s - $(SYSCONF_STAMP) || echo '$(SYSCONFDIR)' > $(SYSCONF_STAMP))
$(BUILD)/daemon/base/config.o: $(SYSCONF_STAMP)
