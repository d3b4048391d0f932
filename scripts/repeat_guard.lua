-- Repeat guard: refuses a call when the same tool was just called with the same arguments
-- `max_repeats` times in a row (a model stuck in a loop). Disabled by default. To enable it:
--
--   [scripts.repeat_guard]
--   enabled = true
--   max_repeats = 3
--
-- The last call and its count live in `api.store` (shared by the replicas of a served home
-- with `--store`), forgotten after an hour without calls. While a shared store cannot be
-- reached the guard is not applied (a warning is logged).

if api.config.get("enabled") ~= true then return end
local max_repeats = api.config.get("max_repeats") or 3
local KEEP_S = 3600

local function count_repeat(key)
  if api.store.get("last") == key then
    return api.store.incr("count", 1, KEEP_S)
  end
  api.store.set("last", key, KEEP_S)
  api.store.set("count", 1, KEEP_S)
  return 1
end

api.hooks.on("tool:before-invoke", function(ev)
  if ev.tool:sub(1, 7) == "system:" then return end
  local key = ev.tool .. " " .. api.json.encode(ev.args)
  local ok, count = pcall(count_repeat, key)
  if not ok then
    api.log.warn("repeat guard not applied to " .. ev.tool .. ": " .. tostring(count))
    return
  end
  if count > max_repeats then
    return false, string.format(
      "repeat guard: %s was called with the same arguments %d times in a row (max %d); change the arguments or stop",
      ev.tool, count, max_repeats)
  end
end, {id = "repeat_guard", priority = 40})
