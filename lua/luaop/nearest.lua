-- luaop.nearest - "did you mean": the known name nearest to a mistyped one,
-- for the messages of definitions, ctx's arguments, --check and the kit.
-- Re-exported as luaop.definition.nearest.

-- The candidate nearest to word, or nil when none is near enough to be
-- the one meant: the same but for case; or one "s" more or less at the end
-- (a plural); or at most 2 edits away (with transpositions) and at most a
-- third of the name's length (at least 1; of a kind, its last part: "v1/Foo"
-- is not "v1/Pod"). The first in candidates' order of the nearest wins.
local function nearest(word, candidates)
  local lw = word:lower()
  for _, c in ipairs(candidates) do
    if c:lower() == lw then return c end
  end
  for _, c in ipairs(candidates) do
    local lc = c:lower()
    if lc .. "s" == lw or lw .. "s" == lc then return c end
  end
  local best, bestd = nil, math.min(2, math.max(1, #(word:match("([^/]*)$")) // 3)) + 1
  for _, c in ipairs(candidates) do
    local a, b, d = lw, c:lower(), {}
    if math.abs(#a - #b) < bestd then
      for i = 0, #a do d[i] = { [0] = i } end
      for j = 0, #b do d[0][j] = j end
      for i = 1, #a do
        for j = 1, #b do
          local cost = a:byte(i) == b:byte(j) and 0 or 1
          d[i][j] = math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost)
          if i > 1 and j > 1 and a:byte(i) == b:byte(j - 1) and a:byte(i - 1) == b:byte(j) then
            d[i][j] = math.min(d[i][j], d[i - 2][j - 2] + 1)
          end
        end
      end
      if d[#a][#b] < bestd then best, bestd = c, d[#a][#b] end
    end
  end
  return best
end

return nearest
