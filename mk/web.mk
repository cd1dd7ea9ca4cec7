# The dashboard's files are embedded into web_assets.o with .incbin
# (daemon/service/web_assets.c): rebuild it when they change.
WEB_ASSETS := $(wildcard daemon/service/web/*)
$(BUILD)/daemon/service/web_assets.o: $(WEB_ASSETS)

# The dashboard's browser test runs Debian's chromium headless; the alert
# rules and the scrape are checked with promtool (package prometheus).
DEBS += chromium prometheus
