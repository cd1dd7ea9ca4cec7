/* web_assets.c -- the dashboard's files (daemon/service/web/), embedded in
 * the binary with the assembler's .incbin, so allocd serves them with no
 * file to install, no CDN and no JavaScript build step. Each is followed by
 * a NUL and its length without it. mk/web.mk makes this object depend on
 * the files (the compiler's dependency list does not see .incbin). */

#define WEB_ASSET(sym, path)                                              \
    __asm__(".pushsection .rodata\n"                                      \
            ".global " #sym "\n.type " #sym ", @object\n.balign 16\n"     \
            #sym ":\n.incbin \"" path "\"\n" #sym "_end:\n.byte 0\n"       \
            ".global " #sym "_len\n.type " #sym "_len, @object\n.balign 4\n" \
            #sym "_len:\n.int " #sym "_end - " #sym "\n"                  \
            ".popsection\n")

WEB_ASSET(web_index_html, "daemon/service/web/index.html");
WEB_ASSET(web_app_js, "daemon/service/web/app.js");
WEB_ASSET(web_app_css, "daemon/service/web/app.css");
