-- luaop.base64 - standard base64 (RFC 4648, with padding), as an
-- AdmissionReview's patch and a Secret's data carry it. src/b64.c decodes
-- for the kubeconfig only and has no Lua face; these are small texts (a
-- JSON patch, a Secret's value), so plain Lua does.
local M = {}

local ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
local VALUE = {}
for i = 1, #ALPHABET do VALUE[ALPHABET:byte(i)] = i - 1 end

function M.encode(s)
  local out = {}
  for i = 1, #s, 3 do
    local a, b, c = s:byte(i, i + 2)
    local n = (a << 16) | ((b or 0) << 8) | (c or 0)
    local q = {}
    for j = 1, 4 do
      local x = (n >> (6 * (4 - j))) & 63
      q[j] = ALPHABET:sub(x + 1, x + 1)
    end
    if not b then q[3] = "=" end
    if not c then q[4] = "=" end
    out[#out + 1] = table.concat(q)
  end
  return table.concat(out)
end

-- The bytes s encodes, or nil, why (whitespace is not allowed; padding is
-- optional).
function M.decode(s)
  if type(s) ~= "string" then return nil, "base64 is a string" end
  s = s:gsub("==?$", "")
  if #s % 4 == 1 then return nil, "base64 of a length no encoding has" end
  local out = {}
  for i = 1, #s, 4 do
    local n, k = 0, 0
    for j = i, math.min(i + 3, #s) do
      local v = VALUE[s:byte(j)]
      if not v then return nil, ("not a base64 character at %d: %q"):format(j, s:sub(j, j)) end
      n, k = (n << 6) | v, k + 1
    end
    n = n << (6 * (4 - k))
    local bytes = string.char((n >> 16) & 255, (n >> 8) & 255, n & 255)
    out[#out + 1] = bytes:sub(1, k - 1)
  end
  return table.concat(out)
end

return M
