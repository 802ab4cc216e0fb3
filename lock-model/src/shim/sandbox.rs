//! The sandbox a script runs in, written in Lua: Redis 7's globals for `FUNCTION LOAD` and
//! for calls (src/function_lua.c, src/script_lua.c, src/eval.c), `redis.call` and its
//! conversions' Lua half, the error handler, and the helpers that carry a library's locals
//! (which need the debug library, kept here and out of every script's reach, as Redis keeps
//! its error handler's `dbg`).
//!
//! Where Redis marks a table read-only (a patch to its Lua), the sandbox hands scripts
//! read-only views (`view`): writing raises Redis' error, at the same place. Names Redis
//! offers but the model does not (`cjson`, `bit`, `redis.log`, `math.random`…) fail the run
//! through `loud`; names Redis does not offer raise Redis' own error.

/// The sandbox's Lua source. Run once per Lua state with `(debug, raw_call, loud)`; it
/// returns the table of helpers [`super::engine::Engine`] calls.
pub(crate) const SANDBOX: &str = r#"
local dbg, redis_call, redis_pcall_command, take_pending, loud = ...
local type, tostring, error, setmetatable, rawget, rawequal, pairs, ipairs, select, xpcall,
  pcall, next, unpack = type, tostring, error, setmetatable, rawget, rawequal, pairs, ipairs,
  select, xpcall, pcall, next, unpack
local sfind, ssub, smatch, slower, sort = string.find, string.sub, string.match, string.lower,
  table.sort
local SHIM = dbg.getinfo(1, 'S').source

-- Redis' read-only tables (lua_enablereadonlytable) and error metatable
-- (luaProtectedTableError, raised from C: no position).
local function readonly() error('Attempt to modify a readonly table', 2) end
local function nonexistent(k)
  error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 0)
end
local function view(t, absent)
  return setmetatable({}, {
    __index = function(_, k)
      local v = t[k]
      if v == nil and absent then return absent(k) end
      return v
    end,
    __newindex = readonly,
  })
end
local function loud_under(prefix)
  return function(k) return loud(prefix .. tostring(k)) end
end

-- luaPushErrorBuff: '-CODE msg' keeps its code, anything else gets ERR; \r\n trimmed.
local function error_table(s)
  local code, msg = 'ERR', s
  if ssub(s, 1, 1) == '-' then
    local space = sfind(s, ' ', 1, true)
    if space then code, msg = ssub(s, 2, space - 1), ssub(s, space + 1) else msg = ssub(s, 2) end
  end
  return {err = code .. ' ' .. smatch(msg, '^[\r\n]*(.-)[\r\n]*$')}
end

-- redis.call raises an error reply, redis.pcall returns it (luaRedisGenericCommand). Both
-- are Rust (C) functions, as Redis' are, so that `return redis.call(...)` keeps the
-- script's frame. A Rust function cannot raise a table: redis.call keeps the error table
-- aside and raises a placeholder, which every catcher of the sandbox swaps back
-- (`translate`): Redis' pcall, xpcall and the error handler.
local function translate(e)
  if type(e) == 'userdata' then
    local t = take_pending()
    if t then return t end
  end
  return e
end
local function error_reply(...)
  if select('#', ...) ~= 1 or type((...)) ~= 'string' then
    return error_table('wrong number or type of arguments')
  end
  local s = ...
  if ssub(s, 1, 1) ~= '-' then s = '-' .. s end
  return error_table(s)
end
local function status_reply(...)
  if select('#', ...) ~= 1 or type((...)) ~= 'string' then
    return error_table('wrong number or type of arguments')
  end
  return {ok = (...)}
end

-- Lua's pcall as Redis replaces it (luaRedisPcall): an error table gives its message.
local function finish(ok, ...)
  if ok then return true, ... end
  local e = translate((...))
  if type(e) == 'table' then
    local m = e.err
    if type(m) == 'string' or type(m) == 'number' then e = m end
  end
  return false, e
end
local function redis_pcall(f, ...) return finish(pcall(f, ...)) end
local function sandbox_xpcall(f, h)
  return xpcall(f, function(e) return h(translate(e)) end)
end

local math_copy = {}
for k, v in pairs(math) do math_copy[k] = v end
math_copy.random = function() return loud('math.random') end
math_copy.randomseed = function() return loud('math.randomseed') end

-- The globals of a call: Redis' allow-list, less what the model leaves out.
local run_api = {
  string = view(string), math = view(math_copy), table = view(table),
  coroutine = view(coroutine), xpcall = sandbox_xpcall, tostring = tostring,
  setmetatable = setmetatable, next = next, assert = assert, tonumber = tonumber,
  rawequal = rawequal, getmetatable = getmetatable, rawset = rawset, pcall = redis_pcall,
  type = type, select = select, unpack = unpack, pairs = pairs, rawget = rawget,
  ipairs = ipairs, _VERSION = _VERSION, error = error,
  redis = view({call = redis_call, pcall = redis_pcall_command, error_reply = error_reply,
    status_reply = status_reply}, loud_under('redis.')),
}
local RUN_LOUD = {cjson = true, bit = true, cmsgpack = true, struct = true, os = true,
  loadstring = true, load = true, getfenv = true, setfenv = true, _G = true,
  collectgarbage = true, gcinfo = true, newproxy = true}
local function run_absent(k)
  if RUN_LOUD[k] then return loud('the global ' .. tostring(k)) end
  return nonexistent(k)
end

-- FUNCTION LOAD: only redis.register_function (luaRegisterFunction).
local registered, order = {}, {}
local FLAGS = {['no-writes'] = true, ['allow-oom'] = true, ['allow-stale'] = true,
  ['no-cluster'] = true, ['allow-cross-slot-keys'] = true}
local function fail(msg) error({err = 'ERR ' .. msg}) end
local function is_string(v) return type(v) == 'string' or type(v) == 'number' end
local function read_flags(t)
  local flags, n = {}, 1
  while true do
    local f = t[n]
    if f == nil then return flags end
    if not is_string(f) or not FLAGS[slower(tostring(f))] then return nil end
    flags[#flags + 1] = slower(tostring(f))
    n = n + 1
  end
end
local function register_function(...)
  local argc = select('#', ...)
  if argc < 1 or argc > 2 then fail('wrong number of arguments to redis.register_function') end
  local name, callback, flags
  if argc == 1 then
    local t = ...
    if type(t) ~= 'table' then
      fail('calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments).')
    end
    for k, v in pairs(t) do
      if not is_string(k) then fail('named argument key given to redis.register_function is not a string') end
      local key = slower(tostring(k))
      if key == 'function_name' then
        if not is_string(v) then fail('function_name argument given to redis.register_function must be a string') end
        name = tostring(v)
      elseif key == 'description' then
        if not is_string(v) then fail('description argument given to redis.register_function must be a string') end
      elseif key == 'callback' then
        if type(v) ~= 'function' then fail('callback argument given to redis.register_function must be a function') end
        callback = v
      elseif key == 'flags' then
        if type(v) ~= 'table' then fail('flags argument to redis.register_function must be a table representing function flags') end
        flags = read_flags(v)
        if not flags then fail('unknown flag given') end
      else
        fail('unknown argument given to redis.register_function')
      end
    end
    if not name then fail('redis.register_function must get a function name argument') end
    if not callback then fail('redis.register_function must get a callback argument') end
  else
    name, callback = ...
    if not is_string(name) then fail('first argument to redis.register_function must be a string') end
    if type(callback) ~= 'function' then fail('second argument to redis.register_function must be a function') end
    name = tostring(name)
  end
  if not smatch(name, '^[%w_]+$') then
    fail('Library names can only contain letters, numbers, or underscores(_) and must be at least one character long')
  end
  if registered[name] then fail('Function already exists in the library') end
  registered[name] = {callback = callback, flags = flags or {}}
  order[#order + 1] = name
end
local LOAD_LOUD = {log = true, LOG_DEBUG = true, LOG_VERBOSE = true, LOG_NOTICE = true,
  LOG_WARNING = true, REDIS_VERSION = true, REDIS_VERSION_NUM = true}
local load_api = {
  redis = view({register_function = register_function}, function(k)
    if LOAD_LOUD[k] then return loud('redis.' .. tostring(k)) end
    return nonexistent(k)
  end),
}

-- The one global table of every script of this state: read-only, its names from the
-- phase's API (and, under EVAL, KEYS and ARGV).
local api, absent, eval_globals = run_api, run_absent, nil
local env = setmetatable({}, {
  __index = function(_, k)
    if eval_globals then
      local v = eval_globals[k]
      if v ~= nil then return v end
    end
    local v = api[k]
    if v == nil then return absent(k) end
    return v
  end,
  __newindex = readonly,
})

-- The error handler of a call (luaEngineInitEngine's): the error as a table, with the
-- script's line (past C frames and the sandbox's own).
local function handler(e)
  local level = 2
  local i = dbg.getinfo(level, 'Sl')
  while i and (i.what == 'C' or i.source == SHIM) do
    level = level + 1
    i = dbg.getinfo(level, 'Sl')
  end
  e = translate(e)
  if type(e) ~= 'table' then e = {err = 'ERR ' .. tostring(e)} end
  if i then e.source, e.line = i.source, i.currentline end
  return e
end

-- A library's locals: the upvalues reachable from its callbacks. `tables` holds each table
-- reached, with its path, to check that no call changes one.
local state_cells, const_cells, const_values, copies = {}, {}, {}, {}
local function enumerate(roots)
  local seen, found, tables = {}, {}, {}
  local walk_table
  local function walk_function(f, path)
    if seen[f] then return end
    seen[f] = true
    if dbg.getinfo(f, 'S').what == 'C' then return end
    local i = 1
    while true do
      local name, v = dbg.getupvalue(f, i)
      if name == nil then break end
      local here = path .. '>' .. name
      found[#found + 1] = {f = f, i = i, name = name, path = here}
      if type(v) == 'function' then walk_function(v, here)
      elseif type(v) == 'table' then walk_table(v, here) end
      i = i + 1
    end
  end
  walk_table = function(t, path)
    if seen[t] then return end
    seen[t] = true
    tables[#tables + 1] = {t = t, path = path}
    local keys = {}
    for k in next, t do keys[#keys + 1] = k end
    sort(keys, function(a, b) return tostring(a) < tostring(b) end)
    for _, k in ipairs(keys) do
      local v = rawget(t, k)
      local here = path .. '[' .. tostring(k) .. ']'
      if type(v) == 'function' then walk_function(v, here)
      elseif type(v) == 'table' then walk_table(v, here) end
    end
  end
  for n, f in ipairs(roots) do walk_function(f, '#' .. n) end
  return found, tables
end
-- True when cells a and b are one variable (Lua 5.1 has no upvalueid): set a, read b.
local function same_cell(a, b)
  local _, va = dbg.getupvalue(a.f, a.i)
  local probe = {}
  dbg.setupvalue(a.f, a.i, probe)
  local _, vb = dbg.getupvalue(b.f, b.i)
  dbg.setupvalue(a.f, a.i, va)
  return rawequal(vb, probe)
end
local function setup_cells(roots)
  local found, tables = enumerate(roots)
  local groups = {}
  for _, c in ipairs(found) do
    local group = groups[c.name] or {}
    groups[c.name] = group
    local known = false
    for _, r in ipairs(group) do
      if same_cell(r, c) then known = true break end
    end
    if not known then
      group[#group + 1] = c
      local _, v = dbg.getupvalue(c.f, c.i)
      local t = type(v)
      if t == 'nil' or t == 'boolean' or t == 'number' or t == 'string' then
        state_cells[#state_cells + 1] = c
      else
        const_cells[#const_cells + 1] = c
        const_values[#const_cells] = v
      end
    end
  end
  for _, entry in ipairs(tables) do
    local copy = {}
    for k, v in next, entry.t do copy[k] = v end
    copies[#copies + 1] = {t = entry.t, path = entry.path, copy = copy}
  end
  local names, paths = {}, {}
  for n, c in ipairs(state_cells) do names[n], paths[n] = c.name, c.path end
  return names, paths
end

local helpers = {}
-- Runs a library's main chunk as FUNCTION LOAD does: its registrations, or the error text.
function helpers.load(chunk)
  api, absent = load_api, nonexistent
  local ok, e = pcall(chunk)
  api, absent = run_api, run_absent
  if not ok then
    if is_string(e) then return false, 'ERR ' .. tostring(e) end
    if type(e) == 'table' and is_string(e.err) then return false, tostring(e.err) end
    return false, '(null)'
  end
  local names, callbacks, flags = {}, {}, {}
  for n, name in ipairs(order) do
    names[n], callbacks[n], flags[n] = name, registered[name].callback, registered[name].flags
  end
  return true, names, callbacks, flags
end
function helpers.env() return env end
function helpers.setup_cells(callbacks) return setup_cells(callbacks) end
function helpers.read_state()
  local out = {}
  for n, c in ipairs(state_cells) do
    local _, v = dbg.getupvalue(c.f, c.i)
    out[n] = v
  end
  return out
end
function helpers.write_state(n, v)
  local c = state_cells[n]
  dbg.setupvalue(c.f, c.i, v)
end
function helpers.check_constants()
  for n, c in ipairs(const_cells) do
    local _, v = dbg.getupvalue(c.f, c.i)
    if not rawequal(v, const_values[n]) then return c.path end
  end
  for _, entry in ipairs(copies) do
    for k, v in next, entry.t do
      if not rawequal(entry.copy[k], v) then return entry.path .. '[' .. tostring(k) .. ']' end
    end
    for k, v in next, entry.copy do
      if not rawequal(rawget(entry.t, k), v) then return entry.path .. '[' .. tostring(k) .. ']' end
    end
  end
  return nil
end
-- FCALL: callback(keys, args), one result (luaCallFunction).
function helpers.run(callback, keys, args)
  return xpcall(function() return callback(keys, args) end, handler)
end
-- EVAL: the script with KEYS and ARGV as globals.
function helpers.eval(f, keys, argv)
  eval_globals = {KEYS = keys, ARGV = argv}
  local ok, r = xpcall(f, handler)
  eval_globals = nil
  return ok, r
end
function helpers.error_table(s) return error_table(s) end
return helpers
"#;
