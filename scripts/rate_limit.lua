-- Per-tool rate limit: at most `max_calls` calls of one tool per `window_s` seconds; more are
-- vetoed with the reason. Disabled by default. To enable it:
--
--   [scripts.rate_limit]
--   enabled = true
--   max_calls = 30
--   window_s = 60
--
-- The count lives in `api.store`: in memory, or in the shared store of a served home
-- (`tavern serve --store redis://…`), so every replica counts against one budget. A window
-- starts with the first call of a tool and lasts `window_s`; vetoed attempts count too.
-- While a shared store cannot be reached the limit is not applied (a warning is logged).

if api.config.get("enabled") ~= true then return end
local max_calls = api.config.get("max_calls") or 30
local window = api.config.get("window_s") or 60

api.hooks.on("tool:before-invoke", function(ev)
  local ok, n = pcall(api.store.incr, "calls:" .. ev.tool, 1, window)
  if not ok then
    api.log.warn("rate limit not applied to " .. ev.tool .. ": " .. tostring(n))
    return
  end
  if n > max_calls then
    return false, string.format("rate limit: %s was called %d times in the last %d s (max %d)",
      ev.tool, n, window, max_calls)
  end
end, {id = "rate_limit", priority = 50})
