//! The `system:*` tools every engine has.
//!
//! - `system:get_current_time {format?, timezone?}`: the current time. `timezone` is `utc`
//!   (default), `local`, or a fixed offset like `+08:00`; `format` is `rfc3339` (default),
//!   `unix` (seconds, an integer), `unix_ms`, or a strftime pattern such as `%Y-%m-%d`.
//! - `system:echo {text?, …}`: returns `text` when it is the only argument, otherwise the
//!   whole (validated, converted) arguments object. Any extra argument is accepted.
//! - `system:uuid {}`: a random (v4) UUID as a string.
//! - `system:random_int {min, max}`: a uniformly random integer with `min ≤ n ≤ max`.

use chrono::{DateTime, FixedOffset, Local, Utc};
use serde_json::{json, Value};

use super::{CallContext, ToolDefinition, ToolError, ToolManager};

fn def(
    id: &str,
    title: &str,
    description: &str,
    parameters: Value,
    annotations: Value,
) -> ToolDefinition {
    let mut d = ToolDefinition::host(id, description, parameters);
    d.display_name = Some(title.to_string());
    d.annotations = Some(annotations);
    d
}

/// Registers `system:get_current_time`, `system:echo`, `system:uuid`, `system:random_int`.
pub fn register(tools: &ToolManager) -> Result<(), ToolError> {
    tools.register_fn(
        def(
            "system:get_current_time",
            "Current time",
            "Returns the current date and time. By default an RFC 3339 timestamp in UTC.",
            json!({
                "type": "object",
                "properties": {
                    "format": {
                        "type": "string",
                        "description": "rfc3339 (default), unix (seconds), unix_ms, or a strftime pattern like %Y-%m-%d %H:%M",
                        "default": "rfc3339"
                    },
                    "timezone": {
                        "type": "string",
                        "description": "utc (default), local, or a fixed offset like +08:00",
                        "default": "utc"
                    }
                },
                "additionalProperties": false
            }),
            json!({"title": "Current time", "readOnlyHint": true, "idempotentHint": false, "openWorldHint": false}),
        ),
        current_time,
    )?;
    tools.register_fn(
        def(
            "system:echo",
            "Echo",
            "Returns what it is given: the `text` argument when it is the only one, otherwise all arguments as an object. Useful to test calls.",
            json!({
                "type": "object",
                "properties": {
                    "text": {"type": "string", "description": "Text to return unchanged."}
                },
                "additionalProperties": true
            }),
            json!({"title": "Echo", "readOnlyHint": true, "idempotentHint": true, "openWorldHint": false}),
        ),
        |_ctx: &CallContext, args: Value| {
            if let Value::Object(m) = &args {
                if m.len() == 1 {
                    if let Some(t) = m.get("text") {
                        return Ok(t.clone());
                    }
                }
            }
            Ok(args)
        },
    )?;
    tools.register_fn(
        def(
            "system:uuid",
            "UUID",
            "Returns a new random UUID (version 4), e.g. 6f1c2a4e-0d1b-4c55-9a57-2f6a7e8b9c10.",
            json!({"type": "object", "properties": {}, "additionalProperties": false}),
            json!({"title": "UUID", "readOnlyHint": true, "idempotentHint": false, "openWorldHint": false}),
        ),
        |_ctx: &CallContext, _args: Value| Ok(Value::String(uuid::Uuid::new_v4().to_string())),
    )?;
    tools.register_fn(
        def(
            "system:random_int",
            "Random integer",
            "Returns a random integer between min and max, both included.",
            json!({
                "type": "object",
                "properties": {
                    "min": {"type": "integer", "description": "Smallest possible value.", "examples": [1]},
                    "max": {"type": "integer", "description": "Largest possible value (at least min).", "examples": [6]}
                },
                "required": ["min", "max"],
                "additionalProperties": false
            }),
            json!({"title": "Random integer", "readOnlyHint": true, "idempotentHint": false, "openWorldHint": false}),
        ),
        |ctx: &CallContext, args: Value| {
            // The schema guarantees both are integers; i64 covers every value serde_json
            // reads as an integer except u64 above i64::MAX, which is refused here.
            let get = |k: &str| args.get(k).and_then(Value::as_i64);
            let (Some(min), Some(max)) = (get("min"), get("max")) else {
                return Err(ToolError::failed(
                    &ctx.tool_id,
                    "min and max must be integers between -9223372036854775808 and 9223372036854775807",
                ));
            };
            if min > max {
                return Err(ToolError::failed(
                    &ctx.tool_id,
                    format!("min ({min}) is greater than max ({max}); swap them"),
                ));
            }
            Ok(json!(fastrand::i64(min..=max)))
        },
    )?;
    Ok(())
}

fn current_time(ctx: &CallContext, args: Value) -> Result<Value, ToolError> {
    let format = args
        .get("format")
        .and_then(Value::as_str)
        .unwrap_or("rfc3339");
    let tz = args
        .get("timezone")
        .and_then(Value::as_str)
        .unwrap_or("utc");
    let now = Utc::now();
    let at: DateTime<FixedOffset> = match tz.trim().to_ascii_lowercase().as_str() {
        "utc" | "z" | "gmt" => now.fixed_offset(),
        "local" => now.with_timezone(&Local).fixed_offset(),
        other => {
            let off: FixedOffset = other.parse().map_err(|_| {
                ToolError::failed(
                    &ctx.tool_id,
                    format!("unknown timezone '{tz}': use utc, local or an offset like +08:00"),
                )
            })?;
            now.with_timezone(&off)
        }
    };
    match format.trim().to_ascii_lowercase().as_str() {
        "rfc3339" | "iso8601" | "" => Ok(json!(at.to_rfc3339())),
        "unix" => Ok(json!(at.timestamp())),
        "unix_ms" => Ok(json!(at.timestamp_millis())),
        _ => {
            let items = chrono::format::StrftimeItems::new(format)
                .parse()
                .map_err(|_| {
                    ToolError::failed(
                        &ctx.tool_id,
                        format!("invalid time format '{format}': use rfc3339, unix, unix_ms or a strftime pattern like %Y-%m-%d"),
                    )
                })?;
            let mut out = String::new();
            use std::fmt::Write as _;
            write!(out, "{}", at.format_with_items(items.iter())).map_err(|_| {
                ToolError::failed(
                    &ctx.tool_id,
                    format!("cannot format the time with '{format}'"),
                )
            })?;
            Ok(json!(out))
        }
    }
}
