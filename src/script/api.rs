//! The one registry of the `api` surface scripts see.
//!
//! [`API`] lists every function (name, parameters, return type, doc, permission). The Lua and
//! Rhai hosts register exactly these functions (each entry's [`ApiOp`] selects the
//! implementation), and [`luals_definitions`] renders the same table as a LuaLS `---@meta`
//! file (`docs/lua/tavern.lua`), so the editor's view cannot drift from the engine.

/// One parameter of an api function.
#[derive(Debug, Clone, Copy)]
pub struct ApiParam {
    /// Parameter name.
    pub name: &'static str,
    /// LuaLS type (`string`, `table`, `any`, `tavern.ToolSpec`, …).
    pub ty: &'static str,
    /// What it is.
    pub doc: &'static str,
    /// Whether it may be omitted.
    pub optional: bool,
}

/// Which implementation an entry selects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(missing_docs)] // One variant per entry of `API`, named after it.
pub enum ApiOp {
    ToolsRegister,
    ToolsCall,
    ToolsProgress,
    LogDebug,
    LogInfo,
    LogWarn,
    LogError,
    ConfigGet,
    JsonEncode,
    JsonDecode,
    FsRead,
    FsWrite,
    FsAppend,
    FsList,
    FsRemove,
    FsExists,
    FsMkdir,
    HooksOn,
    HooksOff,
    ServicesOverride,
    StoreGet,
    StoreSet,
    StoreIncr,
    StoreDelete,
    ClientAsk,
    LlmChat,
    ResourcesNotify,
    WorldGet,
    WorldSet,
}

/// One function of the `api` table.
#[derive(Debug, Clone, Copy)]
pub struct ApiFunction {
    /// Namespace inside `api` (`tools`, `log`, `fs` …).
    pub namespace: &'static str,
    /// Function name inside the namespace.
    pub name: &'static str,
    /// Parameters in order.
    pub params: &'static [ApiParam],
    /// LuaLS return type (`nil` for none).
    pub returns: &'static str,
    /// What it does (first line is the summary).
    pub doc: &'static str,
    /// Permission the plugin must declare (`fs.read`, `fs.write`, `world: read`), if any.
    pub permission: Option<&'static str>,
    /// The implementation.
    pub op: ApiOp,
    /// The Rhai name when the Lua name is a Rhai keyword (`call` → `invoke`).
    pub rhai_name: Option<&'static str>,
}

impl ApiFunction {
    /// The function's name in Rhai (`api::<namespace>::<name>`).
    pub fn rhai_name(&self) -> &'static str {
        self.rhai_name.unwrap_or(self.name)
    }
}

const fn p(name: &'static str, ty: &'static str, doc: &'static str) -> ApiParam {
    ApiParam {
        name,
        ty,
        doc,
        optional: false,
    }
}

const fn opt(name: &'static str, ty: &'static str, doc: &'static str) -> ApiParam {
    ApiParam {
        name,
        ty,
        doc,
        optional: true,
    }
}

const PATH: ApiParam = p(
    "path",
    "string",
    "Path inside the plugin's root; `/a/b` and `a/b` mean the same file",
);
const STORE_KEY: ApiParam = p(
    "key",
    "string",
    "Key (1 to 512 bytes), private to this plugin or script",
);
const WORLD_PATH: ApiParam = p(
    "path",
    "string",
    "Dotted path (`weather.now`, `party.0.name`: list items by index), as the agent tools use",
);
const MSG: &[ApiParam] = &[p(
    "message",
    "any",
    "Text (other values are converted with tostring)",
)];

/// Every function of the `api` surface.
pub const API: &[ApiFunction] = &[
    ApiFunction {
        namespace: "tools",
        name: "register",
        params: &[p("spec", "tavern.ToolSpec", "The tool: id, description, parameters, handler")],
        returns: "nil",
        doc: "Registers a tool while the plugin loads. The id is namespaced `plugin:name` (a bare `name` gets the plugin's namespace).",
        permission: None,
        op: ApiOp::ToolsRegister,
        rhai_name: None,
    },
    ApiFunction {
        namespace: "tools",
        name: "call",
        params: &[
            p("id", "string", "Tool id (`plugin:tool` or `plugin.tool`)"),
            opt("args", "table", "Arguments object (validated against the tool's schema)"),
        ],
        returns: "any",
        doc: "Calls another tool through the engine and returns its result. A failed call raises a table `{code, message}` (catch it with `pcall` and read `e.code`); let through, it fails your tool with that same error.\n(Rhai: `api::tools::invoke(id, args)`, since `call` is a Rhai keyword; it throws a map `#{code, message}`.)",
        permission: None,
        op: ApiOp::ToolsCall,
        rhai_name: Some("invoke"),
    },
    ApiFunction {
        namespace: "tools",
        name: "progress",
        params: &[
            p("done", "number", "Units of work done so far"),
            opt("total", "number", "Units in all, when known"),
            opt("message", "string", "What is happening now"),
        ],
        returns: "nil",
        doc: "Reports the progress of the tool call being run to whoever watches it: MCP clients that sent a progress token get `notifications/progress`, a served job gets a `progress` event. Does nothing when nobody watches.",
        permission: None,
        op: ApiOp::ToolsProgress,
        rhai_name: None,
    },
    ApiFunction {
        namespace: "log",
        name: "debug",
        params: MSG,
        returns: "nil",
        doc: "Logs a debug message tagged with the plugin's name.\n(Rhai: `api::log::dbg(message)`, since `debug` is a Rhai keyword.)",
        permission: None,
        op: ApiOp::LogDebug,
        rhai_name: Some("dbg"),
    },
    ApiFunction {
        namespace: "log",
        name: "info",
        params: MSG,
        returns: "nil",
        doc: "Logs an info message tagged with the plugin's name.",
        permission: None,
        op: ApiOp::LogInfo,
        rhai_name: None,
    },
    ApiFunction {
        namespace: "log",
        name: "warn",
        params: MSG,
        returns: "nil",
        doc: "Logs a warning tagged with the plugin's name.",
        permission: None,
        op: ApiOp::LogWarn,
        rhai_name: None,
    },
    ApiFunction {
        namespace: "log",
        name: "error",
        params: MSG,
        returns: "nil",
        doc: "Logs an error tagged with the plugin's name (does not raise).",
        permission: None,
        op: ApiOp::LogError,
        rhai_name: None,
    },
    ApiFunction {
        namespace: "config",
        name: "get",
        params: &[p("key", "string", "Option id (`root`) or full key (`extensions.<plugin>.root`)")],
        returns: "any",
        doc: "Returns one of the plugin's settings (configOptions), or nil when unset.",
        permission: None,
        op: ApiOp::ConfigGet,
        rhai_name: None,
    },
    ApiFunction {
        namespace: "json",
        name: "encode",
        params: &[p("value", "any", "Value to encode (tables, strings, numbers, booleans, api.json.null)")],
        returns: "string",
        doc: "Encodes a value as compact JSON.",
        permission: None,
        op: ApiOp::JsonEncode,
        rhai_name: None,
    },
    ApiFunction {
        namespace: "json",
        name: "decode",
        params: &[p("text", "string", "JSON text")],
        returns: "any",
        doc: "Decodes JSON text; JSON null becomes api.json.null.",
        permission: None,
        op: ApiOp::JsonDecode,
        rhai_name: None,
    },
    ApiFunction {
        namespace: "fs",
        name: "read",
        params: &[PATH],
        returns: "string",
        doc: "Reads a whole text file (a regular file: a FIFO, socket or device is an error at once).",
        permission: Some("fs.read"),
        op: ApiOp::FsRead,
        rhai_name: None,
    },
    ApiFunction {
        namespace: "fs",
        name: "write",
        params: &[PATH, p("content", "string", "New content")],
        returns: "nil",
        doc: "Replaces a file atomically (temp file + rename), creating parent directories.",
        permission: Some("fs.write"),
        op: ApiOp::FsWrite,
        rhai_name: None,
    },
    ApiFunction {
        namespace: "fs",
        name: "append",
        params: &[PATH, p("content", "string", "Text to add at the end")],
        returns: "nil",
        doc: "Appends to a file (created if missing); the old content survives any failure.",
        permission: Some("fs.write"),
        op: ApiOp::FsAppend,
        rhai_name: None,
    },
    ApiFunction {
        namespace: "fs",
        name: "list",
        params: &[PATH],
        returns: "tavern.DirEntry[]",
        doc: "Lists a directory, sorted by name.",
        permission: Some("fs.read"),
        op: ApiOp::FsList,
        rhai_name: None,
    },
    ApiFunction {
        namespace: "fs",
        name: "remove",
        params: &[PATH],
        returns: "nil",
        doc: "Removes a file, a symlink (one leading inside the root) or an empty directory.",
        permission: Some("fs.write"),
        op: ApiOp::FsRemove,
        rhai_name: None,
    },
    ApiFunction {
        namespace: "fs",
        name: "exists",
        params: &[PATH],
        returns: "boolean",
        doc: "Whether the path exists inside the root.",
        permission: Some("fs.read"),
        op: ApiOp::FsExists,
        rhai_name: None,
    },
    ApiFunction {
        namespace: "fs",
        name: "mkdir",
        params: &[PATH],
        returns: "nil",
        doc: "Creates a directory and its parents.",
        permission: Some("fs.write"),
        op: ApiOp::FsMkdir,
        rhai_name: None,
    },
    ApiFunction {
        namespace: "hooks",
        name: "on",
        params: &[
            p("point", "string", "Hook point (`tool:before-invoke`, …; `hook:client:<point>` is accepted too)"),
            p("handler", "fun(ev: table, ctx: table): (boolean|table|nil, string?)", "Gets the event; returns nothing to go on, `false[, why]` or `{veto = why}` to stop a `before` point, or a table of fields to replace"),
            opt("options", "tavern.HookOptions", "`{priority = n, once = true, id = \"name\"}`"),
        ],
        returns: "integer",
        doc: "Registers a hook handler; returns a handle for `api.hooks.off`. The point must be listed in `permissions.hooks`. See docs/hooks.md.\n(Rhai: `api::hooks::on(point, |ev| …)` or `Fn(\"name\")`, options as a map.)",
        permission: Some("hooks"),
        op: ApiOp::HooksOn,
        rhai_name: None,
    },
    ApiFunction {
        namespace: "hooks",
        name: "off",
        params: &[p("handle", "integer", "What `api.hooks.on` returned")],
        returns: "boolean",
        doc: "Removes a hook handler of this plugin; returns whether it was registered.",
        permission: None,
        op: ApiOp::HooksOff,
        rhai_name: None,
    },
    ApiFunction {
        namespace: "services",
        name: "override",
        params: &[
            p("id", "string", "Tool or host service id to replace (`FileOperator:WriteFile`)"),
            p("handler", "fun(args: table, ctx: table, next: fun(args: table?): any): any", "Runs instead of the tool; `next(args)` calls what was there before"),
        ],
        returns: "nil",
        doc: "Overrides a tool: the handler runs in its place and may wrap it through `next`. Overrides stack. The id must be listed in `permissions.services.override`.\n(Rhai: `api::services::override(id, |args, ctx| …)`, calling `api::services::next(ctx, args)`.)",
        permission: Some("services.override"),
        op: ApiOp::ServicesOverride,
        rhai_name: None,
    },
    ApiFunction {
        namespace: "store",
        name: "get",
        params: &[STORE_KEY],
        returns: "any",
        doc: "Returns the value kept at `key` by this plugin (or script), or nil (also for a kept JSON null). The store is the engine's: in memory, or shared by every replica of a served home (`tavern serve --store redis://…`). Fails with `store_unavailable: …` while a shared store cannot be reached.",
        permission: None,
        op: ApiOp::StoreGet,
        rhai_name: None,
    },
    ApiFunction {
        namespace: "store",
        name: "set",
        params: &[
            STORE_KEY,
            p("value", "any", "Any JSON value"),
            opt("ttl_s", "number", "Seconds until the key expires (none: kept until deleted)"),
        ],
        returns: "nil",
        doc: "Keeps `value` at `key`, for `ttl_s` seconds when given. Keys are this plugin's (or script's) own.",
        permission: None,
        op: ApiOp::StoreSet,
        rhai_name: None,
    },
    ApiFunction {
        namespace: "store",
        name: "incr",
        params: &[
            STORE_KEY,
            opt("by", "integer", "How much to add (default 1)"),
            opt("ttl_s", "number", "Seconds the counter lives, counted from its first increment"),
        ],
        returns: "integer",
        doc: "Adds `by` to the integer at `key` (a missing key counts as 0) and returns the new value, atomically across replicas. `ttl_s` is set only when the key has no time to live yet, so a counter's window starts with its first increment.",
        permission: None,
        op: ApiOp::StoreIncr,
        rhai_name: None,
    },
    ApiFunction {
        namespace: "store",
        name: "delete",
        params: &[STORE_KEY],
        returns: "boolean",
        doc: "Removes `key`; returns whether it was there.",
        permission: None,
        op: ApiOp::StoreDelete,
        rhai_name: None,
    },
    ApiFunction {
        namespace: "client",
        name: "ask",
        params: &[p("request", "table", "`{message, schema}` (a form: an object schema of flat fields, each with `type`, `title`, `description`, `default`, `enum` / `oneOf`) or `{message, url}` (the user opens a URL); `fallback`: the answer's `content` when the client cannot ask")],
        returns: "table",
        doc: "Asks the user of the MCP client that made this call (MCP elicitation) and returns `{action, content}`: `action` is `accept` (with `content`, the form's values), `decline` or `cancel`. Also `api.ask`. Fails with `client_unsupported: …` when the call does not come from an MCP client that can ask (REST, jobs, the CLI, a client without the elicitation capability), unless the request has a `fallback` (then `{action = \"unsupported\", content = fallback}`).",
        permission: None,
        op: ApiOp::ClientAsk,
        rhai_name: None,
    },
    ApiFunction {
        namespace: "llm",
        name: "chat",
        params: &[p("request", "table", "`{messages = {{role, content}}, system?, max_tokens?, temperature?}` (`content` a string or an MCP content block), or `{prompt = text, …}`")],
        returns: "table",
        doc: "Asks a language model: the model of the MCP client that made this call (MCP sampling, `sampling/createMessage`). Returns `{text, model, stop_reason, content}`. Fails with `client_unsupported: …` when the call does not come from an MCP client that declared sampling.",
        permission: None,
        op: ApiOp::LlmChat,
        rhai_name: None,
    },
    ApiFunction {
        namespace: "resources",
        name: "notify",
        params: &[p("uri", "string", "The resource that changed (`tavern://world`, one of the plugin's `resources:`)")],
        returns: "nil",
        doc: "Tells MCP clients subscribed to `uri` that it changed (`notifications/resources/updated`). Does nothing when no server runs.",
        permission: None,
        op: ApiOp::ResourcesNotify,
        rhai_name: None,
    },
    ApiFunction {
        namespace: "world",
        name: "get",
        params: &[WORLD_PATH],
        returns: "any",
        doc: "Returns the value at `path` in the engine's live world (the world state its agents read: `world.json`, the host's, or with `tavern serve --store` the one every replica shares), or nil when there is none. An empty path gives the whole world.",
        permission: Some("world: read"),
        op: ApiOp::WorldGet,
        rhai_name: None,
    },
    ApiFunction {
        namespace: "world",
        name: "set",
        params: &[WORLD_PATH, p("value", "any", "Any JSON value")],
        returns: "nil",
        doc: "Sets the value at `path` in the engine's live world, creating objects on the way, and tells MCP clients subscribed to `tavern://world` that it changed. Fails when a part on the way is a value that is not an object (or a list without that index).",
        permission: Some("world: write"),
        op: ApiOp::WorldSet,
        rhai_name: None,
    },
];

/// Namespaces in the order they appear in [`API`].
pub fn namespaces() -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for f in API {
        if !out.contains(&f.namespace) {
            out.push(f.namespace);
        }
    }
    out
}

const PRELUDE: &str = r#"---@meta
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
"#;

/// The LuaLS `---@meta` file describing `api`, generated from [`API`].
pub fn luals_definitions() -> String {
    let mut out = String::from(PRELUDE);
    for ns in namespaces() {
        out.push_str(&format!("\n---@class tavern.api.{ns}\napi.{ns} = {{}}\n"));
        if ns == "json" {
            out.push_str("\n---The JSON null value (distinct from nil).\n---@type lightuserdata\napi.json.null = nil\n");
        }
        for f in API.iter().filter(|f| f.namespace == ns) {
            out.push('\n');
            for line in f.doc.lines() {
                out.push_str(&format!("---{line}\n"));
            }
            if let Some(perm) = f.permission {
                out.push_str(&format!(
                    "---Needs permission `{perm}` in plugin.yaml{}.\n",
                    match perm {
                        "fs.read" => " (or `fs.write`)",
                        "world: read" => " (or `world: write`)",
                        _ => "",
                    }
                ));
            }
            for a in f.params {
                let q = if a.optional { "?" } else { "" };
                out.push_str(&format!("---@param {}{q} {} {}\n", a.name, a.ty, a.doc));
            }
            if f.returns != "nil" {
                out.push_str(&format!("---@return {}\n", f.returns));
            }
            let names: Vec<&str> = f.params.iter().map(|a| a.name).collect();
            out.push_str(&format!(
                "function api.{ns}.{}({}) end\n",
                f.name,
                names.join(", ")
            ));
        }
        if ns == "client" {
            out.push_str("\n---Same as `api.client.ask`.\napi.ask = api.client.ask\n");
        }
    }
    out
}
