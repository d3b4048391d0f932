//! The one integration-test crate: each module is what was a test binary of its own, the
//! `*_support` modules and `common` are the helpers they share (rust-analyzer's layout: one
//! crate links once, instead of one binary per file).
//!
//! Modules that run the `tavern` binary need the features it requires (`cli`, `server`,
//! `llm-http`, `store-redis`); the fake model server of the agent tests needs `server` (axum) and
//! `llm-http`. The rest runs on the lean library: `cargo test --no-default-features --test it`.

#[cfg(all(feature = "server", feature = "llm-http"))]
mod agent_support;
#[cfg(all(
    feature = "cli",
    feature = "server",
    feature = "llm-http",
    feature = "store-redis"
))]
mod cli_support;
mod common;
mod hooks_support;
mod plugin_support;
#[cfg(all(
    feature = "cli",
    feature = "server",
    feature = "llm-http",
    feature = "store-redis"
))]
mod server_support;
#[cfg(any(feature = "llm-local", feature = "llm-http"))]
mod weather_home;
#[cfg(all(
    feature = "cli",
    feature = "server",
    feature = "llm-http",
    feature = "store-redis"
))]
mod web_support;

#[cfg(all(
    feature = "cli",
    feature = "server",
    feature = "llm-http",
    feature = "store-redis"
))]
mod agent_cli;
mod agent_constrain;
#[cfg(all(feature = "server", feature = "llm-http"))]
mod agent_e2e;
mod agent_formats;
#[cfg(feature = "llm-local")]
mod agent_local;
mod agent_profile_strict;
#[cfg(feature = "llm-http")]
mod agent_real_model;
#[cfg(all(
    feature = "cli",
    feature = "server",
    feature = "llm-http",
    feature = "store-redis"
))]
mod agent_small_models;
mod architecture_lists;
#[cfg(all(
    feature = "cli",
    feature = "server",
    feature = "llm-http",
    feature = "store-redis"
))]
mod call_ids;
#[cfg(all(
    feature = "cli",
    feature = "server",
    feature = "llm-http",
    feature = "store-redis"
))]
mod cli_call;
#[cfg(all(
    feature = "cli",
    feature = "server",
    feature = "llm-http",
    feature = "store-redis"
))]
mod cli_panic;
#[cfg(all(
    feature = "cli",
    feature = "server",
    feature = "llm-http",
    feature = "store-redis"
))]
mod cli_parse;
#[cfg(all(
    feature = "cli",
    feature = "server",
    feature = "llm-http",
    feature = "store-redis"
))]
mod cli_parse_native;
#[cfg(all(
    feature = "cli",
    feature = "server",
    feature = "llm-http",
    feature = "store-redis"
))]
mod cli_tools;
#[cfg(all(
    feature = "cli",
    feature = "server",
    feature = "llm-http",
    feature = "store-redis"
))]
mod cli_vcp;
mod config_tools;
#[cfg(all(
    feature = "cli",
    feature = "server",
    feature = "llm-http",
    feature = "store-redis"
))]
mod conformance;
#[cfg(all(
    feature = "cli",
    feature = "server",
    feature = "llm-http",
    feature = "store-redis"
))]
mod docs_examples;
mod embed_host;
mod engine_script_limits;
mod fileoperator_tools;
#[cfg(all(
    feature = "cli",
    feature = "server",
    feature = "llm-http",
    feature = "store-redis"
))]
mod first_hour_three;
mod fs_race;
mod hooks_lua;
#[cfg(all(
    feature = "cli",
    feature = "server",
    feature = "llm-http",
    feature = "store-redis"
))]
mod hooks_permissions;
mod hooks_rhai;
mod hooks_rust;
#[cfg(all(
    feature = "cli",
    feature = "server",
    feature = "llm-http",
    feature = "store-redis"
))]
mod hooks_scripts;
#[cfg(all(
    feature = "cli",
    feature = "server",
    feature = "llm-http",
    feature = "store-redis"
))]
mod hooks_workflow_points;
mod host_frictions;
mod host_loop;
#[cfg(all(
    feature = "cli",
    feature = "server",
    feature = "llm-http",
    feature = "store-redis"
))]
mod jobs_hardening;
#[cfg(all(
    feature = "cli",
    feature = "server",
    feature = "llm-http",
    feature = "store-redis"
))]
mod modder_errors;
mod node_tools;
mod plugin_turns;
#[cfg(all(
    feature = "cli",
    feature = "server",
    feature = "llm-http",
    feature = "store-redis"
))]
mod plugins_cli;
mod plugins_loading;
mod plugins_nodes;
mod plugins_sandbox;
#[cfg(all(
    feature = "cli",
    feature = "server",
    feature = "llm-http",
    feature = "store-redis"
))]
mod plugins_seed_chain;
mod process_tools;
mod protocol_cases;
#[cfg(all(
    feature = "cli",
    feature = "server",
    feature = "llm-http",
    feature = "store-redis"
))]
mod protocol_format_names;
mod protocol_fuzz_corpus;
mod protocol_grammar;
mod protocol_grammar_native;
mod protocol_limits;
mod protocol_native;
mod protocol_native_props;
#[cfg(all(
    feature = "cli",
    feature = "server",
    feature = "llm-http",
    feature = "store-redis"
))]
mod protocol_one_value;
mod protocol_props;
mod protocol_stream;
mod sandbox_error_objects;
mod sandbox_fs;
mod sandbox_gc;
mod sandbox_instructions;
mod sandbox_memory;
mod sandbox_metatables;
mod sandbox_panic;
mod sandbox_patterns;
mod sandbox_process_code;
mod sandbox_process_hostile;
#[cfg(all(
    feature = "cli",
    feature = "server",
    feature = "llm-http",
    feature = "store-redis"
))]
mod sandbox_process_limits;
mod sandbox_recursion;
mod sandbox_reentrancy;
mod sandbox_rhai_faults;
mod sandbox_rhai_import;
mod sandbox_rhai_stack;
mod sandbox_stdlib;
mod sandbox_string_rep;
mod sandbox_timeout;
mod sandbox_values;
mod script_api;
mod script_error_values;
mod script_luals;
mod script_store;
mod script_world;
#[cfg(all(
    feature = "cli",
    feature = "server",
    feature = "llm-http",
    feature = "store-redis"
))]
mod server_bodies_headers;
#[cfg(all(
    feature = "cli",
    feature = "server",
    feature = "llm-http",
    feature = "store-redis"
))]
mod server_catalog;
#[cfg(all(
    feature = "cli",
    feature = "server",
    feature = "llm-http",
    feature = "store-redis"
))]
mod server_jobs;
#[cfg(all(
    feature = "cli",
    feature = "server",
    feature = "llm-http",
    feature = "store-redis"
))]
mod server_lifecycle;
#[cfg(all(
    feature = "cli",
    feature = "server",
    feature = "llm-http",
    feature = "store-redis"
))]
mod server_limits;
#[cfg(all(
    feature = "cli",
    feature = "server",
    feature = "llm-http",
    feature = "store-redis"
))]
mod server_mcp_agents;
#[cfg(all(
    feature = "cli",
    feature = "server",
    feature = "llm-http",
    feature = "store-redis"
))]
mod server_mcp_direct;
#[cfg(all(
    feature = "cli",
    feature = "server",
    feature = "llm-http",
    feature = "store-redis"
))]
mod server_mcp_python;
#[cfg(all(
    feature = "cli",
    feature = "server",
    feature = "llm-http",
    feature = "store-redis"
))]
mod server_mcp_stdio;
#[cfg(all(
    feature = "cli",
    feature = "server",
    feature = "llm-http",
    feature = "store-redis"
))]
mod server_mcp_tasks;
#[cfg(all(
    feature = "cli",
    feature = "server",
    feature = "llm-http",
    feature = "store-redis"
))]
mod server_rest;
#[cfg(all(
    feature = "cli",
    feature = "server",
    feature = "llm-http",
    feature = "store-redis"
))]
mod server_world;
#[cfg(all(
    feature = "cli",
    feature = "server",
    feature = "llm-http",
    feature = "store-redis"
))]
mod store_redis;
mod tools_args;
mod tools_builtin;
mod tools_dispatch;
mod tools_names_as_written;
mod tools_registry;
mod tools_vcp_dispatch;
mod typed_errors;
#[cfg(all(
    feature = "cli",
    feature = "server",
    feature = "llm-http",
    feature = "store-redis"
))]
mod ways_in;
#[cfg(all(
    feature = "cli",
    feature = "server",
    feature = "llm-http",
    feature = "store-redis"
))]
mod web_api;
#[cfg(all(
    feature = "cli",
    feature = "server",
    feature = "llm-http",
    feature = "store-redis"
))]
mod web_e2e;
#[cfg(all(
    feature = "cli",
    feature = "server",
    feature = "llm-http",
    feature = "store-redis"
))]
mod web_explorer;
#[cfg(all(
    feature = "cli",
    feature = "server",
    feature = "llm-http",
    feature = "store-redis"
))]
mod workflow_cli;
mod workflow_engine;
mod workflow_nodes;
mod workflow_script;
mod workflow_tools;
