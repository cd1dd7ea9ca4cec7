# The dashboard's files are embedded into web_assets.o with .incbin
# (daemon/service/web_assets.c): rebuild it when they change.
WEB_ASSETS := $(wildcard daemon/service/web/*)
$(BUILD)/daemon/service/web_assets.o: $(WEB_ASSETS)
