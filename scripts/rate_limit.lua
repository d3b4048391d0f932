-- Per-tool rate limit: at most `max_calls` calls of one tool per `window_s` seconds; more are
-- vetoed with the reason. Disabled by default. To enable it:
--
--   [scripts.rate_limit]
--   enabled = true
--   max_calls = 30
--   window_s = 60

if api.config.get("enabled") ~= true then return end
local max_calls = api.config.get("max_calls") or 30
local window = api.config.get("window_s") or 60
local CLOCK = "system:get_current_time"

local calls = {}   -- tool id -> list of call times (seconds)

api.hooks.on("tool:before-invoke", function(ev)
  if ev.tool == CLOCK then return end  -- the clock itself is never limited (and never loops)
  local now = api.tools.call(CLOCK, {format = "unix"})
  now = tonumber(now) or 0
  local list = calls[ev.tool] or {}
  local kept = {}
  for _, t in ipairs(list) do
    if now - t < window then kept[#kept + 1] = t end
  end
  if #kept >= max_calls then
    calls[ev.tool] = kept
    return false, string.format("rate limit: %s was called %d times in the last %d s (max %d)",
      ev.tool, #kept, window, max_calls)
  end
  kept[#kept + 1] = now
  calls[ev.tool] = kept
end, {id = "rate_limit", priority = 50})
