"""The Lua scripts: every multi-key step that must be atomic, each on one model's hash slot.

Each script touches only keys tagged with one model ``{m}``, so it runs on one Cluster slot.
Version keys ``v:{n}`` are numbered inside the script (from ``ARGV``'s version-key base) —
allowed for keys of the same slot. Times come from the server's ``TIME`` (scripts replicate
their effects in Redis 7, so this is deterministic on replicas), in milliseconds.

Replies are small tables whose first element names the outcome, decoded by the callers.
"""

from __future__ import annotations

_NOW = """
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
"""

# Keep the newest `keep` versions plus the pinned ones and the head.
_RETAIN = """
local function retain(versions, pins, head, base, keep)
  local n = redis.call('ZCARD', versions)
  if n <= keep then return end
  local old = redis.call('ZRANGE', versions, 0, n - keep - 1)
  local h = redis.call('GET', head)
  for _, v in ipairs(old) do
    if v ~= h and redis.call('SISMEMBER', pins, v) == 0 then
      redis.call('DEL', base .. v)
      redis.call('ZREM', versions, v)
    end
  end
end
"""

CREATE_MODEL = """
-- KEYS: spec   ARGV: canonical json, created_at (ms)[, feedback_ttl (s)]
-- The model's own feedback TTL (feedback.TTL_FIELD) is written with the spec, in one step.
local cur = redis.call('HGET', KEYS[1], 'json')
if cur then
  if cur == ARGV[1] then return 0 end
  return -1
end
redis.call('HSET', KEYS[1], 'json', ARGV[1], 'created_at', ARGV[2])
if ARGV[3] then redis.call('HSET', KEYS[1], 'feedback_ttl', ARGV[3]) end
return 1
"""

DELETE_MODEL = """
-- KEYS: epoch, versions, then every other fixed key of the model
-- ARGV: version base, events channel
-- Deletes the versions and the fixed keys; keeps and bumps the epoch so that a token of
-- the deleted incarnation can never match a lease of a re-created one. Announces it on the
-- events channel, so API processes drop the model at once (they poll no model's head).
local vs = redis.call('ZRANGE', KEYS[2], 0, -1)
for _, v in ipairs(vs) do redis.call('DEL', ARGV[1] .. v) end
local existed = 0
for i = 2, #KEYS do existed = existed + redis.call('DEL', KEYS[i]) end
redis.call('INCR', KEYS[1])
if existed > 0 and ARGV[2] then redis.call('PUBLISH', ARGV[2], '{"deleted":true}') end
return existed
"""

APPEND = (
    _NOW
    + """
-- KEYS: examples, appended, state, ids, spec, lease
-- ARGV: max_lag, window_ms, n_batches, then per batch: payload, n, n_ids, id_1 .. id_n
--       ('' = no id)
-- When something was appended and no worker holds the lease, a message on the model's
-- work channel (the lease key with 'work' for 'lease') wakes a worker: workers hold only
-- the models that have work (docs/pipeline.md, "The worker loop").
-- Appends the batches in order, each whole (one XADD); stops at the first batch it cannot
-- append and says why, so what landed is always a prefix of the request. Reply: one
-- {'ok', entry id} per batch appended, then possibly {'dup', positions...} (ids seen within
-- the window, or repeated in the batch: nothing of that batch appended), {'lag', lag} or
-- {'nomodel'}.
if redis.call('EXISTS', KEYS[5]) == 0 then return {{'nomodel'}} end
local max_lag = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local appended = tonumber(redis.call('GET', KEYS[2]) or '0')
local before = appended
-- one INCRBY per call for every batch appended (not one per batch: fewer AOF bytes), and the
-- work message when something was appended and no worker holds the lease
local function done(out)
  if appended > before then
    redis.call('INCRBY', KEYS[2], appended - before)
    if redis.call('EXISTS', KEYS[6]) == 0 then
      redis.call('PUBLISH', string.sub(KEYS[6], 1, -6) .. 'work', '1')
    end
  end
  return out
end
local applied = tonumber(redis.call('HGET', KEYS[3], 'applied') or '0')
local now = nil
local out = {}
local i = 4
for b = 1, tonumber(ARGV[3]) do
  local payload, n, nids = ARGV[i], tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2])
  local lag = appended - applied
  if lag > 0 and lag + n > max_lag then
    out[#out + 1] = {'lag', tostring(lag)}
    return done(out)
  end
  if nids > 0 then
    if not now then
      now = now_ms()
      redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', '(' .. (now - window))
    end
    local dups = {'dup'}
    local seen = {}
    for j = 1, nids do
      local id = ARGV[i + 2 + j]
      if id ~= '' then
        if seen[id] or redis.call('ZSCORE', KEYS[4], id) then
          dups[#dups + 1] = tostring(j - 1)
        end
        seen[id] = true
      end
    end
    if #dups > 1 then
      out[#out + 1] = dups
      return done(out)
    end
    for j = 1, nids do
      local id = ARGV[i + 2 + j]
      if id ~= '' then redis.call('ZADD', KEYS[4], now, id) end
    end
  end
  local eid = redis.call('XADD', KEYS[1], '*', 'b', payload, 'n', n)
  appended = appended + n
  out[#out + 1] = {'ok', eid}
  i = i + 3 + nids
end
return done(out)
"""
)

ACQUIRE = """
-- KEYS: lease, epoch, spec   ARGV: worker id, ttl ms
if redis.call('EXISTS', KEYS[3]) == 0 then return -1 end
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local e = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], ARGV[1] .. ':' .. e, 'PX', ARGV[2])
return e
"""

RENEW = """
-- KEYS: lease, epoch   ARGV: token, ttl ms, epoch
-- Extends our lease; re-takes it if it expired and nobody took it since (the epoch is
-- still ours), so a worker stalled past its TTL (a long compile, a GC pause) keeps going.
local tok = redis.call('GET', KEYS[1])
if tok == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
if not tok and redis.call('GET', KEYS[2]) == ARGV[3] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0
"""

RELEASE = """
-- KEYS: lease, epoch   ARGV: token
-- Bumps the epoch too: a released token is dead for good (see RENEW and COMMIT).
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('INCR', KEYS[2])
  return 1
end
return 0
"""

_PUBLISH = """
local function publish(versions, seq, head, head_pin, pins, base, keep, channel, now,
                       cursor, seen, mistakes, updates, source, fields)
  local ver = redis.call('INCR', seq)
  redis.call('HSET', base .. ver, 'number', ver, 'time', now, 'cursor', cursor,
    'examples_seen', seen, 'mistakes', mistakes, 'updates', updates, 'source', source,
    unpack(fields))
  redis.call('ZADD', versions, ver, ver)
  if redis.call('EXISTS', head_pin) == 0 then redis.call('SET', head, ver) end
  retain(versions, pins, head, base, keep)
  local h = redis.call('GET', head) or '0'
  redis.call('PUBLISH', channel, '{"version":' .. ver .. ',"head":' .. h .. '}')
  return ver
end
"""

# Blobs are shared: the state's chain and every retained version's chains name them (and
# their quality tracker state, 'qblob'). Remove the ones nothing names any more (after a full
# state, a publish with retention, a new quality blob, rollback).
_GC = """
local function gc(state, blobs, versions, base)
  local keep = {}
  local function mark(s)
    if s then for x in string.gmatch(s, '[^,]+') do keep[x] = true end end
  end
  local st = redis.call('HMGET', state, 'chain', 'schain', 'qblob')
  mark(st[1])
  mark(st[2])
  mark(st[3])
  for _, v in ipairs(redis.call('ZRANGE', versions, 0, -1)) do
    local c = redis.call('HMGET', base .. v, 'chain', 'schain', 'qblob')
    mark(c[1])
    mark(c[2])
    mark(c[3])
  end
  local drop = {}
  for _, f in ipairs(redis.call('HKEYS', blobs)) do
    if not keep[f] then drop[#drop + 1] = f end
  end
  for i = 1, #drop, 1000 do
    redis.call('HDEL', blobs, unpack(drop, i, math.min(i + 999, #drop)))
  end
end
"""

# Append one blob to a chain ('full' starts a new chain); returns the new chain string.
_ADD_BLOB = """
local function add_blob(state, blobs, chain, kind, blob)
  local n = redis.call('HINCRBY', state, 'bseq', 1)
  redis.call('HSET', blobs, n, blob)
  if kind == 'full' then return tostring(n) end
  return chain .. ',' .. n
end
"""

COMMIT = (
    _NOW
    + _RETAIN
    + _PUBLISH
    + _GC
    + _ADD_BLOB
    + """
-- KEYS: 1 lease, 2 state, 3 examples, 4 history, 5 dead, 6 versions, 7 head, 8 vseq,
--       9 pins, 10 headpin, 11 epoch, 12 blobs
-- ARGV: 1 token, 2 expected cursor, 3 new cursor, 4 state blob, 5 examples_seen,
--       6 mistakes, 7 updates, 8 applied delta, 9 trim min-id ('' = none),
--       10 history point ('1'/'0'), 11 publish ('1'/'0'), 12 serving blob,
--       13 keep versions, 14 events channel, 15 version base, 16 history maxlen,
--       17 dead maxlen, 18 the writer's epoch, 19 lease ttl ms,
--       20 state blob kind: 'full' (starts a chain), 'delta' (on top of the stored chain)
--          or 'same' (no new blob), 21 serving blob kind: 'full', 'delta' (on top of
--          the serving chain of the last version published from this state) or 'ref' (a
--          full blob whose weights refer to the version's state: the version gets
--          'sref' = 1), 22 quality figures (JSON, '' = none), 23 quality tracker state
--       blob (full, or a delta on the stored 'qblob' chain: its format-2 delta flag),
--       24 the history point's quality figures (JSON, a subset of 22), 25 n dead, then (entry id, reason, payload) per dead entry
-- The writer is fenced by the epoch: the lease must hold its token, or have expired with
-- nobody taking it since (epoch unchanged) — then the commit re-takes it.
local tok = redis.call('GET', KEYS[1])
if tok ~= ARGV[1] then
  if tok or redis.call('GET', KEYS[11]) ~= ARGV[18] then
    return {'lease', tok or ''}
  end
end
local cur = redis.call('HGET', KEYS[2], 'cursor') or '0-0'
if cur ~= ARGV[2] then return {'conflict', cur} end
local chain = redis.call('HGET', KEYS[2], 'chain')
if ARGV[20] ~= 'full' and not chain then return {'nochain', 'state'} end
local publishing = ARGV[11] == '1'
-- a quality delta (format 2, delta flag) goes on the stored quality chain ('qblob')
local qdelta = ARGV[22] ~= '' and string.byte(ARGV[23], 2) == 1
local qchain = redis.call('HGET', KEYS[2], 'qblob')
if qdelta and not qchain then return {'nochain', 'quality'} end
local schain = redis.call('HGET', KEYS[2], 'schain')
if publishing and ARGV[21] == 'delta' and not schain then return {'nochain', 'serving'} end
if tok ~= ARGV[1] then redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[19]) end
local now = now_ms()
local collect = false
if ARGV[20] ~= 'same' then
  collect = ARGV[20] == 'full' and chain ~= false
  chain = add_blob(KEYS[2], KEYS[12], chain, ARGV[20], ARGV[4])
end
redis.call('HSET', KEYS[2], 'chain', chain, 'cursor', ARGV[3], 'examples_seen', ARGV[5],
  'mistakes', ARGV[6], 'updates', ARGV[7], 'updated_at', now)
redis.call('HDEL', KEYS[2], 'blob')
redis.call('HINCRBY', KEYS[2], 'applied', ARGV[8])
local quality = ARGV[22] ~= ''
local qblob = nil
if quality then
  -- the tracker state is written once, as a blob the state (and the version) name: a
  -- full one starts a chain, a delta extends it
  local q = tostring(redis.call('HINCRBY', KEYS[2], 'bseq', 1))
  redis.call('HSET', KEYS[12], q, ARGV[23])
  if qdelta then
    qblob = qchain .. ',' .. q
  else
    qblob = q
    if qchain then collect = true end
  end
  redis.call('HSET', KEYS[2], 'quality', ARGV[22], 'qblob', qblob)
  redis.call('HDEL', KEYS[2], 'quality_state')
end
local nd = tonumber(ARGV[25])
for i = 0, nd - 1 do
  local b = 26 + 3 * i
  redis.call('XADD', KEYS[5], 'MAXLEN', '~', ARGV[17], '*', 'entry', ARGV[b],
    'reason', ARGV[b + 1], 'payload', ARGV[b + 2])
end
if ARGV[9] ~= '' then redis.call('XTRIM', KEYS[3], 'MINID', ARGV[9]) end
if ARGV[10] == '1' then
  local point = {'examples_seen', ARGV[5], 'mistakes', ARGV[6], 'updates', ARGV[7], 'time', now}
  if quality then point[#point + 1] = 'quality'; point[#point + 1] = ARGV[24] end
  redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[16], '*', unpack(point))
end
local ver = 0
if publishing then
  local skind = ARGV[21]
  schain = add_blob(KEYS[2], KEYS[12], schain, skind == 'delta' and 'delta' or 'full', ARGV[12])
  redis.call('HSET', KEYS[2], 'schain', schain)
  local fields = {'chain', chain, 'schain', schain}
  if skind == 'ref' then fields[#fields + 1] = 'sref'; fields[#fields + 1] = '1' end
  if quality then
    for _, x in ipairs({'quality', ARGV[22], 'qblob', qblob}) do
      fields[#fields + 1] = x
    end
  end
  ver = publish(KEYS[6], KEYS[8], KEYS[7], KEYS[10], KEYS[9], ARGV[15], tonumber(ARGV[13]),
    ARGV[14], now, ARGV[3], ARGV[5], ARGV[6], ARGV[7], 'worker', fields)
  collect = true
end
if collect then gc(KEYS[2], KEYS[12], KEYS[6], ARGV[15]) end
return {'ok', tostring(ver), tostring(now)}
"""
)

# Read-only: a consistent snapshot of the state hash and the blobs its chain names.
LOAD_STATE = """
-- KEYS: state, blobs
-- Reply: cursor, examples_seen, mistakes, updates, applied, updated_at, format-1 blob,
--        the quality tracker state's blobs (its 'qblob' chain, or the older inline
--        'quality_state'; false if none), chain, then the chain's blobs in order (false
--        where one is missing)
local f = redis.call('HMGET', KEYS[1], 'cursor', 'examples_seen', 'mistakes', 'updates',
  'applied', 'updated_at', 'blob', 'quality_state', 'chain', 'qblob')
local q = false
if f[10] then
  q = {}
  for x in string.gmatch(f[10], '[^,]+') do q[#q + 1] = redis.call('HGET', KEYS[2], x) end
elseif f[8] then
  q = {f[8]}
end
local out = {f[1], f[2], f[3], f[4], f[5], f[6], f[7], q, f[9]}
if f[9] then
  for x in string.gmatch(f[9], '[^,]+') do out[#out + 1] = redis.call('HGET', KEYS[2], x) end
end
return out
"""

# Read-only: a version's metadata and the blobs of its serving (and, asked, state) chains.
GET_VERSION = """
-- KEYS: version, blobs, head, pins   ARGV: number, with state ('1'/'0')
-- Reply: {} if absent, else number, time, cursor, examples_seen, mistakes, updates, source,
--        head, pinned, n serving blobs, the serving blobs, n state blobs, the state blobs
--        (sent when asked, and when the serving weights refer to the state: 'sref')
local v = redis.call('HMGET', KEYS[1], 'number', 'time', 'cursor', 'examples_seen',
  'mistakes', 'updates', 'source', 'chain', 'schain', 'sref')
if not v[1] then return {} end
local out = {v[1], v[2], v[3], v[4], v[5], v[6], v[7], redis.call('GET', KEYS[3]) or '',
  redis.call('SISMEMBER', KEYS[4], ARGV[1])}
local function blobs(chain, legacy)
  if not chain then
    out[#out + 1] = 1
    out[#out + 1] = redis.call('HGET', KEYS[1], legacy)
    return
  end
  local got = {}
  for x in string.gmatch(chain, '[^,]+') do got[#got + 1] = redis.call('HGET', KEYS[2], x) end
  out[#out + 1] = #got
  for _, b in ipairs(got) do out[#out + 1] = b end
end
blobs(v[9], 'serving')
if ARGV[2] == '1' or v[10] then blobs(v[8], 'state') else out[#out + 1] = 0 end
return out
"""

ROLLBACK = (
    _NOW
    + _RETAIN
    + _PUBLISH
    + _GC
    + """
-- KEYS: 1 lease, 2 state, 3 epoch, 4 versions, 5 head, 6 vseq, 7 pins, 8 headpin, 9 history,
--       10 blobs
-- ARGV: 1 target version, 2 version base, 3 keep, 4 events channel, 5 history maxlen
-- A new version equal to the target; the learner state reset to it (the cursor stays:
-- later updates are discarded, not replayed); the lease holder is fenced (lease deleted,
-- epoch bumped) so its in-flight commit is refused and it reloads. Blobs are immutable, so
-- the state and the new version simply name the target's chains (a format-1 target's
-- blobs are copied, as before). The quality tracker goes back with the learner (none in the
-- version: none in the state).
local src = ARGV[2] .. ARGV[1]
if redis.call('EXISTS', src) == 0 then return {'noversion'} end
local f = redis.call('HMGET', src, 'state', 'serving', 'examples_seen', 'mistakes', 'updates',
  'chain', 'schain', 'sref', 'quality', 'quality_state', 'qblob')
redis.call('DEL', KEYS[1])
redis.call('INCR', KEYS[3])
redis.call('DEL', KEYS[8])
local cur = redis.call('HGET', KEYS[2], 'cursor') or '0-0'
local now = now_ms()
local fields
if f[6] then
  fields = {'chain', f[6], 'schain', f[7]}
  if f[8] then fields = {'chain', f[6], 'schain', f[7], 'sref', f[8]} end
  redis.call('HDEL', KEYS[2], 'blob')
else
  fields = {'state', f[1], 'serving', f[2]}
  redis.call('HDEL', KEYS[2], 'chain', 'schain')
  redis.call('HSET', KEYS[2], 'blob', f[1])
end
if f[6] then redis.call('HSET', KEYS[2], 'chain', f[6], 'schain', f[7]) end
redis.call('HSET', KEYS[2], 'cursor', cur, 'examples_seen', f[3],
  'mistakes', f[4], 'updates', f[5], 'updated_at', now)
local point = {'examples_seen', f[3], 'mistakes', f[4], 'updates', f[5], 'time', now,
  'event', 'rollback:' .. ARGV[1]}
if f[9] then
  local qf, qv = 'quality_state', f[10]
  if f[11] then qf, qv = 'qblob', f[11] end  -- the blob stays: the state names it now
  redis.call('HDEL', KEYS[2], 'quality_state', 'qblob')
  redis.call('HSET', KEYS[2], 'quality', f[9], qf, qv)
  for _, x in ipairs({'quality', f[9], qf, qv}) do fields[#fields + 1] = x end
  point[#point + 1] = 'quality'
  point[#point + 1] = f[9]
else
  redis.call('HDEL', KEYS[2], 'quality', 'quality_state', 'qblob')
end
redis.call('XADD', KEYS[9], 'MAXLEN', '~', ARGV[5], '*', unpack(point))
local ver = publish(KEYS[4], KEYS[6], KEYS[5], KEYS[8], KEYS[7], ARGV[2], tonumber(ARGV[3]),
  ARGV[4], now, cur, f[3], f[4], f[5], 'rollback:' .. ARGV[1], fields)
gc(KEYS[2], KEYS[10], KEYS[4], ARGV[2])
return {'ok', tostring(ver)}
"""
)

PIN = """
-- KEYS: versions, pins, head, headpin   ARGV: version, version base, events channel
if redis.call('EXISTS', ARGV[2] .. ARGV[1]) == 0 then return 0 end
redis.call('SADD', KEYS[2], ARGV[1])
redis.call('SET', KEYS[4], ARGV[1])
redis.call('SET', KEYS[3], ARGV[1])
redis.call('PUBLISH', ARGV[3], '{"version":' .. ARGV[1] .. ',"head":' .. ARGV[1] .. '}')
return 1
"""

UNPIN = """
-- KEYS: versions, pins, head, headpin   ARGV: events channel
-- Releases the head (it follows the newest version again) and unpins the held version.
local held = redis.call('GET', KEYS[4])
if held then redis.call('SREM', KEYS[2], held) end
redis.call('DEL', KEYS[4])
local last = redis.call('ZRANGE', KEYS[1], -1, -1)
if #last > 0 then
  redis.call('SET', KEYS[3], last[1])
  redis.call('PUBLISH', ARGV[1], '{"version":' .. last[1] .. ',"head":' .. last[1] .. '}')
end
if held then return 1 end
return 0
"""

METRICS = """
-- ARGV: key prefix, then model names   (standalone Redis only: the keys are built here, not
-- declared, so one call reads many models' keys — a Cluster pipelines per model instead)
-- Reply per model: exists, {examples_seen, mistakes, updates, applied, updated_at,
-- quality}, head, appended — the reads of Store._queue_metrics in one reply, which the
-- client sends and parses in one go (2,000 models: packing 8,000 keys and parsing 8,000
-- replies in Python cost several times the read itself).
local out = {}
for i = 2, #ARGV do
  local base = ARGV[1] .. ':{' .. ARGV[i] .. '}:'
  out[#out + 1] = redis.call('EXISTS', base .. 'spec')
  out[#out + 1] = redis.call('HMGET', base .. 'state', 'examples_seen', 'mistakes', 'updates',
    'applied', 'updated_at', 'quality')
  out[#out + 1] = redis.call('GET', base .. 'head')
  out[#out + 1] = redis.call('GET', base .. 'appended')
end
return out
"""
