//! The ExecutionEngine: workflow format, node registry, built-in nodes, validation, the
//! concurrent DAG runner, events, and `workflow:` tool schemas.
//!
//! ```text
//! Workflow (file) ──compile(registry)──► Plan ──run(args, RunOptions)──► RunReport
//!                    every problem listed     ready nodes at once,        outputs + per-node
//!                    (WorkflowError::Invalid)  failures skip descendants  status, events
//! ```
//! [`Workflows`] holds the loaded set and turns each workflow with an interface into tool
//! `workflow:<id>`; [`Workflows::node_tool_handler`] runs one node as a tool.

pub mod catalogue;
mod compile;
pub mod config_tools;
mod error;
mod format;
mod graph;
mod hooks;
mod library;
pub mod node_tools;
pub mod nodes;
mod registry;
mod run;
mod schema;
mod types;

pub use compile::{compile, Plan};
pub use error::{Invalid, NodeError, WorkflowError};
pub use format::{
    is_valid_id, slot_shape, Workflow, WorkflowEdge, WorkflowNode, GROUP_INPUT, GROUP_OUTPUT,
};
pub use graph::{render as render_graph, GraphFormat};
pub use library::{invalid_problem, CompiledWorkflow, RunDefaults, Workflows};
pub use registry::{
    ExecMode, FnExecutor, NodeContext, NodeDefinition, NodeExecutor, NodeFuture, NodeOutputs,
    NodeRegistry, NodeTypeError, RegisteredNode,
};
pub use run::{
    NodeReport, NodeStatus, RunOptions, RunReport, RunStatus, WorkflowEvent, DEFAULT_CONCURRENCY,
};
pub use schema::{
    node_tool_definition, parameters_schema, slot_schema, workflow_tool_definition,
    workflow_tool_id, workflow_tool_schema, workflow_tool_schema_with, SchemaOptions, TOOL_SCHEMA,
};
pub use types::{DataFlowType, OrderedMap, SlotConfig, SlotDefinition, Suggestion};
