/* scripts.c -- the Lua sources (see scripts.h for what each guarantees).
 *
 * FENCE is sent with EVAL, never EVALSHA: a NOSCRIPT answer would let the
 * transaction behind it run unchecked.
 */
#include "worker/scripts.h"

/* Fencing: the caller's lease token must still be the lease's value and
 * its epoch the batch's epoch, or the script writes nothing. %s = the
 * lease key index, %s = the internal key index, then ARGV indexes. */
#define FENCE(LEASE, INTERNAL, TOKEN, EPOCH) \
"if redis.call('GET', KEYS[" LEASE "]) ~= ARGV[" TOKEN "] or\n" \
"   redis.call('HGET', KEYS[" INTERNAL "], 'epoch') ~= ARGV[" EPOCH "] then\n" \
"  return redis.error_reply('FENCED this instance no longer holds the batch lease')\n" \
"end\n"

/* allow-oom: the trip must be written even when Redis is out of memory
 * (the commands queued after it are then refused anyway, EXECABORT). Every
 * check runs under pcall: a check that fails with an error (a key of the
 * wrong type) trips too, instead of leaving the EXEC unguarded. */
const char script_fence_src[] =
"#!lua flags=allow-oom\n"
"local function trip(msg)\n"
"  redis.call('SET', KEYS[3], '1', 'PX', 60000)\n"
"  return redis.error_reply(msg)\n"
"end\n"
"local types = {'string','hash','string','hash','hash','hash','hash','stream','list','hash','list','hash','list','list','list','hash','hash'}\n"
"local function check()\n"
"  local written = ARGV[5]\n"
"  for k = 1, #written do\n"
"    if string.byte(written, k) == 49 then\n"
"      local t = redis.call('TYPE', KEYS[k]).ok\n"
"      if t ~= 'none' and t ~= types[k] then\n"
"        return 'WRONGTYPE ' .. KEYS[k] .. ' is a ' .. t .. ', allocd needs a ' .. types[k]\n"
"      end\n"
"    end\n"
"  end\n"
"  if redis.call('TYPE', KEYS[1]).ok ~= 'string' or redis.call('GET', KEYS[1]) ~= ARGV[1] then\n"
"    return 'FENCED this instance no longer holds the batch lease'\n"
"  end\n"
"  local internal = redis.call('HMGET', KEYS[2], 'epoch', 'chunks_applied')\n"
"  if internal[1] ~= ARGV[2] then\n"
"    return 'FENCED this instance no longer holds the batch lease'\n"
"  end\n"
"  if (internal[2] or '0') ~= ARGV[3] then\n"
"    return 'STALE an earlier chunk was not applied'\n"
"  end\n"
"  if ARGV[4] == '1' then return 'FAULT injected by ALLOCD_FAULT_APPLY_ID' end\n"
"end\n"
"local ok, why = pcall(check)\n"
"if not ok then\n"
"  return trip('ERR fence: ' .. (type(why) == 'table' and tostring(why.err) or tostring(why)))\n"
"end\n"
"if why then return trip(why) end\n"
"return 'OK'\n";

/* Reads the early=shuffle pool back (worker/lottery_pool.h) after a load.
 * A pool left by a version 1 allocd (its queue renamed at the opening,
 * internal.early_base set) is refused by name: its entries carry no seq
 * and its draw was over requests. */
const char script_lottery_src[] =
FENCE("3", "2", "1", "2")
"local st = redis.call('HMGET', KEYS[2], 'lottery_done', 'early_served', 'lottery_seed', 'early_base')\n"
"if st[1] == '1' then return {'done'} end\n"
"if st[4] then\n"
"  return redis.error_reply('ERR ' .. KEYS[1] .. ' holds a lottery pool of allocd version 1: finish it with that version')\n"
"end\n"
"return {'pool', tonumber(st[2] or '0'), st[3] or '', redis.call('LRANGE', KEYS[1], 0, -1)}\n";

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

const char script_load_prepare_src[] =
"local converted = 0\n"
"if redis.call('TYPE', KEYS[1]).ok == 'set' then\n"
"  local m = redis.call('SMEMBERS', KEYS[1])\n"
"  redis.call('DEL', KEYS[1])\n"
"  for i = 1, #m, 1000 do\n"
"    redis.call('RPUSH', KEYS[1], unpack(m, i, math.min(i + 999, #m)))\n"
"  end\n"
"  converted = 1\n"
"end\n"
"local function give_back(from, to)\n"
"  if redis.call('TYPE', from).ok ~= 'list' then return 0 end\n"
"  local items = redis.call('LRANGE', from, 0, -1)\n"
"  for i = #items, 1, -1 do redis.call('LPUSH', to, items[i]) end\n"
"  redis.call('DEL', from)\n"
"  return #items\n"
"end\n"
"local q = give_back(KEYS[2], KEYS[3])\n"
"if q > 0 then redis.call('HINCRBY', KEYS[4], 'dequeued', -q) end\n"
"local c = give_back(KEYS[5], KEYS[6])\n"
"redis.call('DEL', KEYS[7])\n"
"return {converted, q, c}\n";

void scripts_init(allocd_scripts *s)
{
    redis_script_init(&s->fence, script_fence_src);
    redis_script_init(&s->lottery, script_lottery_src);
    redis_script_init(&s->lease_acquire, script_lease_acquire_src);
    redis_script_init(&s->lease_renew, script_lease_renew_src);
    redis_script_init(&s->lease_release, script_lease_release_src);
    redis_script_init(&s->order_block, script_order_block_src);
    redis_script_init(&s->load_prepare, script_load_prepare_src);
}
