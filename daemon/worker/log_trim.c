/* log_trim.c -- see log_trim.h. */
#include "worker/log_trim.h"

const char log_trim_src[] =
"local excess = redis.call('XLEN', KEYS[1]) - tonumber(ARGV[2])\n"
"if excess <= 0 then return 0 end\n"
"local ok, groups = pcall(redis.call, 'XINFO', 'GROUPS', KEYS[1])\n"
"if not ok then return 0 end\n"
"local safe\n"
"for _, g in ipairs(groups) do\n"
"  local name, delivered\n"
"  for i = 1, #g, 2 do\n"
"    if g[i] == 'name' then name = g[i + 1]\n"
"    elseif g[i] == 'last-delivered-id' then delivered = g[i + 1] end\n"
"  end\n"
"  if name == ARGV[1] then safe = delivered end\n"
"end\n"
"if not safe then return 0 end\n"
"local p = redis.call('XPENDING', KEYS[1], ARGV[1])\n"
"if p[1] > 0 then safe = p[2] end\n"
"return redis.call('XTRIM', KEYS[1], 'MINID', '~', safe, 'LIMIT', excess)\n";

void log_trim_encode(argbuf *a, const char *log_key, const char *group, int64_t maxlen)
{
    argbuf_cmd_begin(a);
    argbuf_str(a, "EVAL");
    argbuf_str(a, log_trim_src);
    argbuf_str(a, "1");
    argbuf_str(a, log_key);
    argbuf_str(a, group);
    argbuf_int(a, maxlen);
    argbuf_cmd_end(a);
}
