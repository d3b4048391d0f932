---@meta
-- tavern plugin API for Lua (LuaLS definitions).
-- GENERATED from src/script/api.rs; do not edit. Regenerate with:
--   TAVERN_BLESS=1 cargo test --test it script_luals

---A tool registered with api.tools.register.
---@class tavern.ToolSpec
---@field id string Tool id: `name` (namespaced to the plugin) or `plugin:name`.
---@field description string What the tool does and when to use it (shown to models).
---@field parameters? table JSON Schema of the arguments object.
---@field displayName? string Human title.
---@field handler fun(args: table, ctx: tavern.Context): any Runs the tool.

---What a handler knows about its call.
---@class tavern.Context
---@field tool_id string Canonical id of the tool being run.
---@field caller string Who called (`cli`, `model`, `plugin:<name>`, …).
---@field config table The plugin's settings.
---@field log fun(message: any) Logs a message tagged with the tool id.

---Options of api.hooks.on.
---@class tavern.HookOptions
---@field priority? integer Higher runs first (default 0); equal priorities run in registration order.
---@field once? boolean Run a single time, then remove the handler.
---@field id? string A name: registering the same id again replaces the handler.

---An entry of api.fs.list.
---@class tavern.DirEntry
---@field name string
---@field type "file"|"dir"|"symlink"|"other"
---@field size integer

---Prints to the plugin log (or a snippet's output), never to stdout.
---@param ... any
function print(...) end

---The tavern API.
---@class tavern.api
api = {}

---@class tavern.api.tools
api.tools = {}

---Registers a tool while the plugin loads. The id is namespaced `plugin:name` (a bare `name` gets the plugin's namespace).
---@param spec tavern.ToolSpec The tool: id, description, parameters, handler
function api.tools.register(spec) end

---Calls another tool through the engine and returns its result. A failed call raises a table `{code, message}` (catch it with `pcall` and read `e.code`); let through, it fails your tool with that same error.
---(Rhai: `api::tools::invoke(id, args)`, since `call` is a Rhai keyword; it throws a map `#{code, message}`.)
---@param id string Tool id (`plugin:tool` or `plugin.tool`)
---@param args? table Arguments object (validated against the tool's schema)
---@return any
function api.tools.call(id, args) end

---Reports the progress of the tool call being run to whoever watches it: MCP clients that sent a progress token get `notifications/progress`, a served job gets a `progress` event. Does nothing when nobody watches.
---@param done number Units of work done so far
---@param total? number Units in all, when known
---@param message? string What is happening now
function api.tools.progress(done, total, message) end

---@class tavern.api.log
api.log = {}

---Logs a debug message tagged with the plugin's name.
---(Rhai: `api::log::dbg(message)`, since `debug` is a Rhai keyword.)
---@param message any Text (other values are converted with tostring)
function api.log.debug(message) end

---Logs an info message tagged with the plugin's name.
---@param message any Text (other values are converted with tostring)
function api.log.info(message) end

---Logs a warning tagged with the plugin's name.
---@param message any Text (other values are converted with tostring)
function api.log.warn(message) end

---Logs an error tagged with the plugin's name (does not raise).
---@param message any Text (other values are converted with tostring)
function api.log.error(message) end

---@class tavern.api.config
api.config = {}

---Returns one of the plugin's settings (configOptions), or nil when unset.
---@param key string Option id (`root`) or full key (`extensions.<plugin>.root`)
---@return any
function api.config.get(key) end

---@class tavern.api.json
api.json = {}

---The JSON null value (distinct from nil).
---@type lightuserdata
api.json.null = nil

---Encodes a value as compact JSON.
---@param value any Value to encode (tables, strings, numbers, booleans, api.json.null)
---@return string
function api.json.encode(value) end

---Decodes JSON text; JSON null becomes api.json.null.
---@param text string JSON text
---@return any
function api.json.decode(text) end

---@class tavern.api.fs
api.fs = {}

---Reads a whole text file (a regular file: a FIFO, socket or device is an error at once).
---Needs permission `fs.read` in plugin.yaml (or `fs.write`).
---@param path string Path inside the plugin's root; `/a/b` and `a/b` mean the same file
---@return string
function api.fs.read(path) end

---Replaces a file atomically (temp file + rename), creating parent directories.
---Needs permission `fs.write` in plugin.yaml.
---@param path string Path inside the plugin's root; `/a/b` and `a/b` mean the same file
---@param content string New content
function api.fs.write(path, content) end

---Appends to a file (created if missing); the old content survives any failure.
---Needs permission `fs.write` in plugin.yaml.
---@param path string Path inside the plugin's root; `/a/b` and `a/b` mean the same file
---@param content string Text to add at the end
function api.fs.append(path, content) end

---Lists a directory, sorted by name.
---Needs permission `fs.read` in plugin.yaml (or `fs.write`).
---@param path string Path inside the plugin's root; `/a/b` and `a/b` mean the same file
---@return tavern.DirEntry[]
function api.fs.list(path) end

---Removes a file, a symlink (one leading inside the root) or an empty directory.
---Needs permission `fs.write` in plugin.yaml.
---@param path string Path inside the plugin's root; `/a/b` and `a/b` mean the same file
function api.fs.remove(path) end

---Whether the path exists inside the root.
---Needs permission `fs.read` in plugin.yaml (or `fs.write`).
---@param path string Path inside the plugin's root; `/a/b` and `a/b` mean the same file
---@return boolean
function api.fs.exists(path) end

---Creates a directory and its parents.
---Needs permission `fs.write` in plugin.yaml.
---@param path string Path inside the plugin's root; `/a/b` and `a/b` mean the same file
function api.fs.mkdir(path) end

---@class tavern.api.hooks
api.hooks = {}

---Registers a hook handler; returns a handle for `api.hooks.off`. The point must be listed in `permissions.hooks`. See docs/hooks.md.
---(Rhai: `api::hooks::on(point, |ev| …)` or `Fn("name")`, options as a map.)
---Needs permission `hooks` in plugin.yaml.
---@param point string Hook point (`tool:before-invoke`, …; `hook:client:<point>` is accepted too)
---@param handler fun(ev: table, ctx: table): (boolean|table|nil, string?) Gets the event; returns nothing to go on, `false[, why]` or `{veto = why}` to stop a `before` point, or a table of fields to replace
---@param options? tavern.HookOptions `{priority = n, once = true, id = "name"}`
---@return integer
function api.hooks.on(point, handler, options) end

---Removes a hook handler of this plugin; returns whether it was registered.
---@param handle integer What `api.hooks.on` returned
---@return boolean
function api.hooks.off(handle) end

---@class tavern.api.services
api.services = {}

---Overrides a tool: the handler runs in its place and may wrap it through `next`. Overrides stack. The id must be listed in `permissions.services.override`.
---(Rhai: `api::services::override(id, |args, ctx| …)`, calling `api::services::next(ctx, args)`.)
---Needs permission `services.override` in plugin.yaml.
---@param id string Tool or host service id to replace (`FileOperator:WriteFile`)
---@param handler fun(args: table, ctx: table, next: fun(args: table?): any): any Runs instead of the tool; `next(args)` calls what was there before
function api.services.override(id, handler) end

---@class tavern.api.store
api.store = {}

---Returns the value kept at `key` by this plugin (or script), or nil (also for a kept JSON null). The store is the engine's: in memory, or shared by every replica of a served home (`tavern serve --store redis://…`). Fails with `store_unavailable: …` while a shared store cannot be reached.
---@param key string Key (1 to 512 bytes), private to this plugin or script
---@return any
function api.store.get(key) end

---Keeps `value` at `key`, for `ttl_s` seconds when given. Keys are this plugin's (or script's) own.
---@param key string Key (1 to 512 bytes), private to this plugin or script
---@param value any Any JSON value
---@param ttl_s? number Seconds until the key expires (none: kept until deleted)
function api.store.set(key, value, ttl_s) end

---Adds `by` to the integer at `key` (a missing key counts as 0) and returns the new value, atomically across replicas. `ttl_s` is set only when the key has no time to live yet, so a counter's window starts with its first increment.
---@param key string Key (1 to 512 bytes), private to this plugin or script
---@param by? integer How much to add (default 1)
---@param ttl_s? number Seconds the counter lives, counted from its first increment
---@return integer
function api.store.incr(key, by, ttl_s) end

---Removes `key`; returns whether it was there.
---@param key string Key (1 to 512 bytes), private to this plugin or script
---@return boolean
function api.store.delete(key) end

---@class tavern.api.client
api.client = {}

---Asks the user of the MCP client that made this call (MCP elicitation) and returns `{action, content}`: `action` is `accept` (with `content`, the form's values), `decline` or `cancel`. Also `api.ask`. Fails with `client_unsupported: …` when the call does not come from an MCP client that can ask (REST, jobs, the CLI, a client without the elicitation capability), unless the request has a `fallback` (then `{action = "unsupported", content = fallback}`).
---@param request table `{message, schema}` (a form: an object schema of flat fields, each with `type`, `title`, `description`, `default`, `enum` / `oneOf`) or `{message, url}` (the user opens a URL); `fallback`: the answer's `content` when the client cannot ask
---@return table
function api.client.ask(request) end

---Same as `api.client.ask`.
api.ask = api.client.ask

---@class tavern.api.llm
api.llm = {}

---Asks a language model: the model of the MCP client that made this call (MCP sampling, `sampling/createMessage`). Returns `{text, model, stop_reason, content}`. Fails with `client_unsupported: …` when the call does not come from an MCP client that declared sampling.
---@param request table `{messages = {{role, content}}, system?, max_tokens?, temperature?}` (`content` a string or an MCP content block), or `{prompt = text, …}`
---@return table
function api.llm.chat(request) end

---@class tavern.api.resources
api.resources = {}

---Tells MCP clients subscribed to `uri` that it changed (`notifications/resources/updated`). Does nothing when no server runs.
---@param uri string The resource that changed (`tavern://world`, one of the plugin's `resources:`)
function api.resources.notify(uri) end

---@class tavern.api.world
api.world = {}

---Returns the value at `path` in the engine's live world (the world state its agents read: `world.json`, the host's, or with `tavern serve --store` the one every replica shares), or nil when there is none. An empty path gives the whole world.
---Needs permission `world: read` in plugin.yaml (or `world: write`).
---@param path string Dotted path (`weather.now`, `party.0.name`: list items by index), as the agent tools use
---@return any
function api.world.get(path) end

---Sets the value at `path` in the engine's live world, creating objects on the way, and tells MCP clients subscribed to `tavern://world` that it changed. Fails when a part on the way is a value that is not an object (or a list without that index).
---Needs permission `world: write` in plugin.yaml.
---@param path string Dotted path (`weather.now`, `party.0.name`: list items by index), as the agent tools use
---@param value any Any JSON value
function api.world.set(path, value) end
