-- Audit trail: one JSON line per tool call (tool, caller, outcome, duration) appended to a
-- file. Disabled by default. To enable it, in tavern.toml:
--
--   [scripts.audit_trail]
--   enabled = true
--   file = "audit.jsonl"            # inside the write root below
--   [scripts.audit_trail.permissions]
--   fs = { write = ["logs"] }       # relative to the home
--
-- (The engine's own `--audit FILE` writes a fuller trail without any script.)

if api.config.get("enabled") ~= true then return end
local file = api.config.get("file") or "audit.jsonl"

api.hooks.on("tool:after-invoke", function(ev)
  local line = {
    tool = ev.tool,
    caller = ev.caller,
    ok = ev.ok,
    elapsed_ms = ev.elapsed_ms,
    error = ev.error and ev.error.code or api.json.null,
  }
  api.fs.append(file, api.json.encode(line) .. "\n")
end, {id = "audit_trail", priority = -100})
