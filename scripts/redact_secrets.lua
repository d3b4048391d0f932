-- Redaction: replaces secret-looking strings (API keys, tokens, private keys) in every tool
-- result before a model or person sees it. Disabled by default. To enable it:
--
--   [scripts.redact_secrets]
--   enabled = true

if api.config.get("enabled") ~= true then return end

local patterns = {
  "sk%-[%w%-_]+",                     -- OpenAI-style keys
  "ghp_%w+", "gho_%w+", "github_pat_[%w_]+",
  "AKIA[%u%d]+",                      -- AWS access key ids
  "xox[abpr]%-[%w%-]+",               -- Slack tokens
  "%-%-%-%-%-BEGIN [%u ]*PRIVATE KEY%-%-%-%-%-.-%-%-%-%-%-END [%u ]*PRIVATE KEY%-%-%-%-%-",
  "[Bb]earer%s+[%w%-%._~%+/]+=*",
}

local function redact_string(s)
  local changed = false
  for _, p in ipairs(patterns) do
    local out, n = string.gsub(s, p, function(m)
      if #m < 12 then return m end      -- too short to be a credential
      return "[REDACTED]"
    end)
    if n > 0 and out ~= s then changed = true; s = out end
  end
  return s, changed
end

local function redact(v, depth)
  if depth > 32 then return v, false end
  if type(v) == "string" then return redact_string(v) end
  if type(v) ~= "table" then return v, false end
  local any = false
  for k, x in pairs(v) do
    local y, c = redact(x, depth + 1)
    if c then v[k] = y; any = true end
  end
  return v, any
end

api.hooks.on("tool:after-invoke", function(ev)
  if not ev.ok then return end
  local r, changed = redact(ev.result, 0)
  if changed then return {result = r} end
end, {id = "redact_secrets", priority = -50})
