-- Interpreter benchmark (issue 3): last use and del lists over N synthetic statements.
-- Twin of bench/lastuse.trace: same loops, same data structures, same checksum.
-- Lua lists are 1-based: stmts[i + 1] holds statement i; dict keys are the same integers.
-- Run: lua5.4 bench/lastuse.lua [N]   (N defaults to 200000)
local N = tonumber(arg and arg[1]) or 200000

local function lastuse_bench(n)
  -- 1. the synthetic statements: stmts[i + 1] = {a, b}, the two values statement i reads
  local stmts = {}
  local x = 12345
  for i = 0, n - 1 do
    local k = i + 2
    x = (x * 1103515245 + 12345) % 2147483648
    local a = x % k
    x = (x * 1103515245 + 12345) % 2147483648
    local b = x % k
    stmts[#stmts + 1] = {a, b}
  end

  -- 2. last use: value -> index of the last statement that reads it
  local last = {}
  for i = 0, n - 1 do
    local s = stmts[i + 1]
    last[s[1]] = i
    last[s[2]] = i
  end

  -- 3. del lists: statement index -> values to delete after it; a value never read is
  --    deleted right after the statement that defines it (an unread input: at the start)
  local dels = {}
  local start = {}
  for v = 0, n + 1 do
    local j = last[v]
    if j == nil then
      if v < 2 then
        start[#start + 1] = v
        goto continue
      end
      j = v - 2
    end
    local l = dels[j]
    if l == nil then
      l = {}
      dels[j] = l
    end
    l[#l + 1] = v
    ::continue::
  end

  -- 4. walk the statements in order, as a pass emitting the new trace would
  local check = #start
  local count = #start
  for i = 0, n - 1 do
    local l = dels[i]
    if l ~= nil then
      for _, v in ipairs(l) do
        check = (check * 31 + v + i) % 1000000007
        count = count + 1
      end
    end
  end
  return {check, count}
end

local r = lastuse_bench(N)
print(string.format("lastuse n=%d dels=%d checksum=%d", N, r[2], r[1]))
