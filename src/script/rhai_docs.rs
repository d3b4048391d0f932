//! `docs/rhai.md`: the Rhai side of the `api` surface, generated from [`API`] like the LuaLS
//! file, so the page cannot drift from the engine (a test fails when it is stale).

use std::fmt::Write as _;

use super::api::{namespaces, API};

const INTRO: &str = r#"# The Rhai API

<!-- GENERATED from src/script/api.rs by tavern::script::rhai_api_markdown; do not edit.
     Regenerate with: TAVERN_BLESS=1 cargo test --test it docs_examples -->

A Rhai tool handler is a function `fn name(args, ctx)` in the script a tool file names
(`"implementation": {"type": "service", "script": "main.rhai", "function": "name"}`).

- `args` is the validated arguments object map (`args.title`, `args["title"]`).
- `ctx` is a map with `tool_id` (the tool being run, `Plugin:tool`), `caller` (`cli`,
  `model`, `plugin:<name>` …) and `config` (the plugin's settings, `ctx.config.max_length`).
  There is no `ctx.log` in Rhai: log with `api::log::info(message)` and friends.
- Return any value (maps become JSON objects, arrays arrays, `()` null).
- Fail the call with `throw "message"`, or `throw #{ code: "bad_input", message: "…" }`: a
  thrown map with a `code` and a `message` fails the call with that code (the caller's error
  code is `bad_input`, its message `bad_input: …`; a code is a word of letters, digits, `_`,
  `-`, `.`); a map without `message` shows as JSON, under `execution_failed`.
- `print(x)` goes to the engine's log (stderr), never to stdout.
- `import "helpers" as h;` loads `helpers.rhai` from the plugin directory (and nowhere else).
- `eval` is disabled; scripts run under the plugin's limits (operations, memory, time, sizes).

Every function below lives under `api::<namespace>::`. Where Lua's name is a Rhai keyword the
Rhai name differs (`api::tools::invoke` for `api.tools.call`, `api::log::dbg` for
`api.log.debug`). A function needing a permission fails with `permission_denied` (naming it)
unless plugin.yaml declares it. Every error an `api` function throws — a refused permission,
a bad argument, a file error, a failed nested call — is a map `#{code, message}`: catch it
and read `e.code` (`permission_denied`, `timeout`, `limit_exceeded`, a nested call's own
code, else `execution_failed`); let through, or thrown again, it fails your tool with that
same error.

<!-- file: plugins/Notes/plugin.yaml
name: Notes
configOptions:
  - id: max_length
    type: integer
    default: 20
  - id: folder
    type: string
    default: ./notes
permissions:
  fs: { read: ["{config.folder}"], write: ["{config.folder}"] }
-->
<!-- file: plugins/Notes/tools/add.tool.json
{"id": "add", "description": "Saves a note.",
 "parameters": {"type": "object", "properties": {"title": {"type": "string"}, "text": {"type": "string"}}, "required": ["title", "text"]},
 "implementation": {"type": "service", "script": "main.rhai", "function": "add"}}
-->
<!-- file: plugins/Notes/tools/add_checked.tool.json
{"id": "add_checked", "description": "Saves a note, reporting a failure as a value.",
 "parameters": {"type": "object", "properties": {"title": {"type": "string"}, "text": {"type": "string"}}},
 "implementation": {"type": "service", "script": "main.rhai", "function": "add_checked"}}
-->
<!-- file: plugins/Notes/tests/notes.test.json
{"cases": [
  {"name": "saves", "call": "Notes:add", "args": {"title": "a", "text": "milk"}, "expect": {"saved": "a"}},
  {"name": "too long", "call": "Notes:add", "args": {"title": "b", "text": "a very long note indeed, really"}, "expectError": "execution_failed", "expectMessage": "longer than 20"},
  {"name": "checked", "call": "Notes:add_checked", "args": {"title": "c"}, "expectSubset": {"failed": "invalid_parameters"}},
  {"name": "counted", "call": "Notes:count", "args": {}, "expectType": "integer"}
]}
-->
<!-- file: plugins/Notes/main.rhai -->
```rhai
fn add(args, ctx) {
    if args.text.len() > ctx.config.max_length {
        throw `the note is longer than ${ctx.config.max_length} characters`;
    }
    api::fs::write("/" + args.title + ".txt", args.text);
    api::log::info("saved " + args.title);
    #{ saved: args.title }
}

fn add_checked(args, ctx) {
    // A failed nested call is a map with `code` and `message`.
    try {
        return api::tools::invoke("Notes:add", args);
    } catch (e) {
        return #{ failed: e.code, why: e.message };
    }
}
```

Registering a tool while the plugin loads (at the top level of the script):

<!-- file: plugins/Notes/main.rhai -->
```rhai
fn count(args, ctx) { api::fs::list("/").len() }

api::tools::register(#{
    id: "count",
    description: "How many notes there are.",
    parameters: #{ type: "object", properties: #{} },
    handler: "count",
});
```
"#;

/// The whole of `docs/rhai.md`.
pub fn rhai_api_markdown() -> String {
    let mut out = String::from(INTRO);
    for ns in namespaces() {
        let _ = writeln!(out, "\n## `api::{ns}`\n");
        for f in API.iter().filter(|f| f.namespace == ns) {
            let params: Vec<String> = f
                .params
                .iter()
                .map(|p| {
                    if p.optional {
                        format!("{}?", p.name)
                    } else {
                        p.name.to_string()
                    }
                })
                .collect();
            let _ = writeln!(
                out,
                "### `api::{ns}::{}({})`\n",
                f.rhai_name(),
                params.join(", ")
            );
            let _ = writeln!(out, "{}\n", in_rhai_words(&f.doc.replace('\n', " ")));
            for p in f.params {
                let _ = writeln!(
                    out,
                    "- `{}`{}: {}",
                    p.name,
                    if p.optional { " (optional)" } else { "" },
                    in_rhai_words(p.doc)
                );
            }
            if f.returns != "nil" {
                let _ = writeln!(out, "- returns: {}", rhai_type(f.returns));
            }
            if let Some(perm) = f.permission {
                let _ = writeln!(out, "- needs permission `{perm}` in plugin.yaml");
            }
            out.push('\n');
        }
    }
    out
}

/// The registry's Lua wording (written for docs/lua/tavern.lua) in Rhai's words: errors are
/// thrown maps caught with `try … catch`, missing values `()`, tables maps.
fn in_rhai_words(doc: &str) -> String {
    const WORDS: &[(&str, &str)] = &[
        (
            "A failed call raises a table `{code, message}` (catch it with `pcall` and read `e.code`)",
            "A failed call throws a map `#{code, message}` (catch it with `try { … } catch (e) { … }` and read `e.code`)",
        ),
        ("converted with tostring", "converted with to_string"),
        ("(tables, strings, numbers, booleans, api.json.null)", "(maps, arrays, strings, numbers, bools, ())"),
        ("or nil when unset", "or () when unset"),
        ("or nil (also for a kept JSON null)", "or () (also for a kept JSON null)"),
        ("or nil when there is none", "or () when there is none"),
        ("or a table of fields to replace", "or a map of fields to replace"),
        ("`false[, why]` or `{veto = why}`", "`false` or `#{veto: why}`"),
    ];
    let mut s = doc.to_string();
    for (lua, rhai) in WORDS {
        s = s.replace(lua, rhai);
    }
    s
}

/// A LuaLS type in Rhai words.
fn rhai_type(t: &str) -> String {
    match t {
        "table" => "a map or array".into(),
        "string" => "a string".into(),
        "boolean" => "a bool".into(),
        "integer" => "an integer".into(),
        "any" => "any value".into(),
        "tavern.DirEntry[]" => "an array of maps `#{name, type, size}`".into(),
        other => format!("`{other}`"),
    }
}
