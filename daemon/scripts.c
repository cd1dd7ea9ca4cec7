/* scripts.c -- the Lua sources (see scripts.h for what each guarantees).
 *
 * Lua's unpack() is limited to a few thousand values, so bulk commands are
 * issued in slices of at most 1000 arguments.
 */
#include "scripts.h"

/* Fencing: the caller's lease token must still be the lease's value and
 * its epoch the batch's epoch, or the script writes nothing. %s = the
 * lease key index, %s = the internal key index, then ARGV indexes. */
#define FENCE(LEASE, INTERNAL, TOKEN, EPOCH) \
"if redis.call('GET', KEYS[" LEASE "]) ~= ARGV[" TOKEN "] or\n" \
"   redis.call('HGET', KEYS[" INTERNAL "], 'epoch') ~= ARGV[" EPOCH "] then\n" \
"  return redis.error_reply('FENCED this instance no longer holds the batch lease')\n" \
"end\n"

const char script_take_src[] =
FENCE("6", "7", "3", "4")
"local function want(key, typ)\n"
"  local t = redis.call('TYPE', key).ok\n"
"  if t ~= 'none' and t ~= typ then\n"
"    return 'WRONGTYPE ' .. key .. ' is a ' .. t .. ', allocd needs a ' .. typ\n"
"  end\n"
"end\n"
"for _, kt in ipairs({{1,'list'},{2,'list'},{3,'list'},{4,'list'},{5,'hash'}}) do\n"
"  local e = want(KEYS[kt[1]], kt[2])\n"
"  if e then return redis.error_reply(e) end\n"
"end\n"
"local function push_all(key, items)\n"
"  for i = 1, #items, 1000 do\n"
"    redis.call('RPUSH', key, unpack(items, i, math.min(i + 999, #items)))\n"
"  end\n"
"end\n"
"local dequeued = tonumber(redis.call('HGET', KEYS[5], 'dequeued') or '0')\n"
"local cp = redis.call('LRANGE', KEYS[3], 0, -1)\n"
"local pp = redis.call('LRANGE', KEYS[4], 0, -1)\n"
"local function qlen() return redis.call('LLEN', KEYS[2]) end\n"
"if #cp > 0 or #pp > 0 then return {'leftover', cp, pp, dequeued, qlen()} end\n"
"local n = tonumber(ARGV[1])\n"
"local ctl = redis.call('LPOP', KEYS[1], n)\n"
"if ctl then\n"
"  push_all(KEYS[3], ctl)\n"
"  return {'new', ctl, {}, dequeued, qlen()}\n"
"end\n"
"if ARGV[2] == '1' then\n"
"  local q = redis.call('LPOP', KEYS[2], n)\n"
"  if q then\n"
"    push_all(KEYS[4], q)\n"
"    dequeued = redis.call('HINCRBY', KEYS[5], 'dequeued', #q)\n"
"    return {'new', {}, q, dequeued, qlen()}\n"
"  end\n"
"end\n"
"return {'new', {}, {}, dequeued, qlen()}\n";

const char script_apply_src[] =
FENCE("14", "12", "7", "8")
"local types = {'hash','hash','hash','hash','stream','list','list','list','set','hash','hash','hash','list'}\n"
"for k = 1, #types do\n"
"  local t = redis.call('TYPE', KEYS[k]).ok\n"
"  if t ~= 'none' and t ~= types[k] then\n"
"    return redis.error_reply('WRONGTYPE ' .. KEYS[k] .. ' is a ' .. t .. ', allocd needs a ' .. types[k])\n"
"  end\n"
"end\n"
"local pl, cl = tonumber(ARGV[1]), tonumber(ARGV[2])\n"
"if pl >= 0 and redis.call('LLEN', KEYS[7]) ~= pl then\n"
"  return redis.error_reply('STALE processing list changed under the worker')\n"
"end\n"
"if cl >= 0 and redis.call('LLEN', KEYS[8]) ~= cl then\n"
"  return redis.error_reply('STALE ctl processing list changed under the worker')\n"
"end\n"
"local es = tonumber(ARGV[4])\n"
"if es >= 0 and tonumber(redis.call('HGET', KEYS[12], 'early_served') or '-1') ~= es then\n"
"  return redis.error_reply('STALE lottery progress changed under the worker')\n"
"end\n"
"local consume = tonumber(ARGV[6])\n"
"if not consume then return redis.error_reply('ARGS consume must be a number') end\n"
"local i = 9\n"
"local function bulk(cmd, key, width)\n"
"  local n = tonumber(ARGV[i]) * width\n"
"  i = i + 1\n"
"  local j = 0\n"
"  while j < n do\n"
"    local m = math.min(n - j, 1000)\n"
"    redis.call(cmd, key, unpack(ARGV, i + j, i + j + m - 1))\n"
"    j = j + m\n"
"  end\n"
"  i = i + n\n"
"end\n"
"bulk('HSET', KEYS[1], 2)\n"
"bulk('HSET', KEYS[2], 2)\n"
"bulk('HDEL', KEYS[2], 1)\n"
"bulk('HSET', KEYS[3], 2)\n"
"bulk('HSET', KEYS[10], 2)\n"
"bulk('HSET', KEYS[11], 2)\n"
"bulk('HSET', KEYS[12], 2)\n"
"bulk('SADD', KEYS[9], 1)\n"
"bulk('RPUSH', KEYS[6], 1)\n"
"local nlog = tonumber(ARGV[i])\n"
"i = i + 1\n"
"local maxlen = ARGV[3]\n"
"for e = 1, nlog do\n"
"  local k = tonumber(ARGV[i]) * 2\n"
"  if maxlen ~= '0' then\n"
"    redis.call('XADD', KEYS[5], 'MAXLEN', '~', maxlen, '*', unpack(ARGV, i + 1, i + k))\n"
"  else\n"
"    redis.call('XADD', KEYS[5], '*', unpack(ARGV, i + 1, i + k))\n"
"  end\n"
"  i = i + 1 + k\n"
"end\n"
"bulk('HSET', KEYS[4], 2)\n"
"local function consume_head(key, len)\n"
"  if consume >= len then redis.call('DEL', key) else redis.call('LTRIM', key, consume, -1) end\n"
"end\n"
"if pl >= 0 then consume_head(KEYS[7], pl) end\n"
"if cl >= 0 then consume_head(KEYS[8], cl) end\n"
"if ARGV[5] == '1' then redis.call('DEL', KEYS[13]) end\n"
"return 'OK'\n";

const char script_lottery_src[] =
FENCE("5", "4", "2", "3")
"local st = redis.call('HMGET', KEYS[4], 'lottery_done', 'early_base', 'early_served', 'shuffle_seed')\n"
"if st[1] == '1' then return {'done'} end\n"
"if st[2] then\n"
"  return {'pool', tonumber(st[2]), tonumber(st[3] or '0'), st[4], redis.call('LRANGE', KEYS[2], 0, -1)}\n"
"end\n"
"local t = redis.call('TYPE', KEYS[2]).ok\n"
"if t ~= 'none' then return redis.error_reply('WRONGTYPE ' .. KEYS[2] .. ' exists before the lottery') end\n"
"local d = tonumber(redis.call('HGET', KEYS[3], 'dequeued') or '0')\n"
"if redis.call('EXISTS', KEYS[1]) == 1 then\n"
"  redis.call('RENAME', KEYS[1], KEYS[2])\n"
"  redis.call('HINCRBY', KEYS[3], 'dequeued', redis.call('LLEN', KEYS[2]))\n"
"end\n"
"redis.call('HSET', KEYS[4], 'early_base', d, 'early_served', 0, 'shuffle_seed', ARGV[1])\n"
"return {'pool', d, 0, ARGV[1], redis.call('LRANGE', KEYS[2], 0, -1)}\n";

const char script_lease_acquire_src[] =
"local cur = redis.call('GET', KEYS[1])\n"
"if cur == ARGV[1] then\n"
"  redis.call('PEXPIRE', KEYS[1], ARGV[2])\n"
"  return {1, redis.call('HGET', KEYS[2], 'epoch') or '0'}\n"
"end\n"
"if cur and cur ~= ARGV[3] then return {0, redis.call('PTTL', KEYS[1]), cur} end\n"
"redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])\n"
"return {1, tostring(redis.call('HINCRBY', KEYS[2], 'epoch', 1))}\n";

const char script_lease_renew_src[] =
"if redis.call('GET', KEYS[1]) == ARGV[1] then\n"
"  return redis.call('PEXPIRE', KEYS[1], ARGV[2])\n"
"end\n"
"return 0\n";

const char script_lease_release_src[] =
"if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end\n"
"return 0\n";

const char script_order_block_src[] =
"redis.call('SET', KEYS[2], ARGV[1], 'NX')\n"
"return {redis.call('GET', KEYS[2]), redis.call('INCRBY', KEYS[1], ARGV[2])}\n";

void scripts_init(allocd_scripts *s)
{
    redis_script_init(&s->take, script_take_src);
    redis_script_init(&s->apply, script_apply_src);
    redis_script_init(&s->lottery, script_lottery_src);
    redis_script_init(&s->lease_acquire, script_lease_acquire_src);
    redis_script_init(&s->lease_renew, script_lease_renew_src);
    redis_script_init(&s->lease_release, script_lease_release_src);
    redis_script_init(&s->order_block, script_order_block_src);
}
