-- Repeat guard: refuses a call when the same tool was just called with the same arguments
-- `max_repeats` times in a row (a model stuck in a loop). Disabled by default. To enable it:
--
--   [scripts.repeat_guard]
--   enabled = true
--   max_repeats = 3

if api.config.get("enabled") ~= true then return end
local max_repeats = api.config.get("max_repeats") or 3

local last_key, count = nil, 0

api.hooks.on("tool:before-invoke", function(ev)
  if ev.tool:sub(1, 7) == "system:" then return end
  local key = ev.tool .. " " .. api.json.encode(ev.args)
  if key == last_key then
    count = count + 1
  else
    last_key, count = key, 1
  end
  if count > max_repeats then
    return false, string.format(
      "repeat guard: %s was called with the same arguments %d times in a row (max %d); change the arguments or stop",
      ev.tool, count, max_repeats)
  end
end, {id = "repeat_guard", priority = 40})
