//! Errors: why a workflow cannot start ([`Invalid`]), why a node failed ([`NodeError`]) and
//! why a run did not produce its outputs ([`WorkflowError`]).

use std::fmt;

use serde::Serialize;

use super::types::DataFlowType;
use crate::tools::ToolError;

/// One thing wrong with a workflow, found before anything runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Invalid {
    /// Two nodes share an id.
    DuplicateNodeId {
        /// The id.
        node: String,
    },
    /// No node type with this name is registered.
    UnknownNodeType {
        /// Node id.
        node: String,
        /// The type as written.
        node_type: String,
        /// The closest registered type.
        suggestion: Option<String>,
    },
    /// An edge names a node that does not exist.
    MissingNode {
        /// Edge label.
        edge: String,
        /// `source` or `target`.
        end: &'static str,
        /// The missing node id.
        node: String,
    },
    /// An edge names a slot the node does not have.
    MissingHandle {
        /// Edge label.
        edge: String,
        /// Node id.
        node: String,
        /// `sourceHandle` or `targetHandle`.
        end: &'static str,
        /// The slot as written.
        handle: String,
        /// The slots that exist on that side.
        available: Vec<String>,
    },
    /// Nodes that depend on each other in a loop.
    Cycle {
        /// Node ids on the cycle, in edge order.
        nodes: Vec<String>,
    },
    /// A required input has no edge, no `inputValues` entry and no default.
    MissingInput {
        /// Node id.
        node: String,
        /// Input slot.
        slot: String,
    },
    /// Connected slots carry incompatible types.
    TypeMismatch {
        /// Edge label.
        edge: String,
        /// Source node id.
        source: String,
        /// Output slot.
        source_handle: String,
        /// Type the output carries.
        from: DataFlowType,
        /// Target node id.
        target: String,
        /// Input slot.
        target_handle: String,
        /// Type the input expects.
        to: DataFlowType,
    },
    /// Several edges feed one input that is not `multi`.
    TooManyConnections {
        /// Node id.
        node: String,
        /// Input slot.
        slot: String,
        /// How many edges.
        count: usize,
    },
    /// An `interfaceOutputs` key has no edge into `core:GroupOutput`.
    UnconnectedOutput {
        /// Interface output key.
        key: String,
    },
}

impl Invalid {
    /// The node the problem is about, when it is about one node.
    pub fn node(&self) -> Option<&str> {
        match self {
            Invalid::DuplicateNodeId { node }
            | Invalid::UnknownNodeType { node, .. }
            | Invalid::MissingInput { node, .. }
            | Invalid::TooManyConnections { node, .. }
            | Invalid::MissingHandle { node, .. } => Some(node),
            Invalid::MissingNode { .. } | Invalid::UnconnectedOutput { .. } => None,
            Invalid::TypeMismatch { target, .. } => Some(target),
            Invalid::Cycle { nodes } => nodes.first().map(String::as_str),
        }
    }
}

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Invalid::DuplicateNodeId { node } => {
                write!(f, "two nodes have the id '{node}': node ids must be unique")
            }
            Invalid::UnknownNodeType {
                node,
                node_type,
                suggestion,
            } => {
                write!(f, "node '{node}': unknown node type '{node_type}'")?;
                match suggestion {
                    Some(s) => write!(f, ", did you mean '{s}'?"),
                    None => write!(f, " (is the plugin that provides it installed?)"),
                }
            }
            Invalid::MissingNode { edge, end, node } => {
                write!(f, "edge '{edge}': its {end} node '{node}' does not exist")
            }
            Invalid::MissingHandle {
                edge,
                node,
                end,
                handle,
                available,
            } => write!(
                f,
                "edge '{edge}': node '{node}' has no slot '{handle}' ({end}); it has: {}",
                if available.is_empty() {
                    "none".to_string()
                } else {
                    available.join(", ")
                }
            ),
            Invalid::Cycle { nodes } => {
                let mut ring = nodes.clone();
                if let Some(first) = nodes.first() {
                    ring.push(first.clone());
                }
                write!(
                    f,
                    "cycle: {} (a workflow must be acyclic; remove one of these edges)",
                    ring.join(" -> ")
                )
            }
            Invalid::MissingInput { node, slot } => write!(
                f,
                "node '{node}': required input '{slot}' is not connected and has no value \
                 (connect an edge or set inputValues.{slot})"
            ),
            Invalid::TypeMismatch {
                edge,
                source,
                source_handle,
                from,
                target,
                target_handle,
                to,
            } => write!(
                f,
                "edge '{edge}': {source}.{source_handle} gives {from} but \
                 {target}.{target_handle} expects {to}"
            ),
            Invalid::TooManyConnections { node, slot, count } => write!(
                f,
                "node '{node}': input '{slot}' has {count} connections but takes one"
            ),
            Invalid::UnconnectedOutput { key } => write!(
                f,
                "interface output '{key}' is declared but no edge enters core:GroupOutput.{key}"
            ),
        }
    }
}

/// Why a node failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize)]
#[serde(tag = "kind", content = "detail", rename_all = "snake_case")]
pub enum NodeError {
    /// A required input had no value at run time (its source produced none).
    #[error("missing input '{0}'")]
    MissingInput(String),
    /// An input had a value of the wrong shape.
    #[error("input '{slot}': {message}")]
    InvalidInput {
        /// Slot.
        slot: String,
        /// What is wrong.
        message: String,
    },
    /// The node ran and reported a failure.
    #[error("{0}")]
    Failed(String),
    /// A tool the node called failed.
    #[error("{0}")]
    Tool(Box<ToolError>),
    /// The node ran past the per-node time limit.
    #[error("timed out after {0} ms")]
    Timeout(u64),
    /// The run was cancelled while the node ran.
    #[error("cancelled")]
    Cancelled,
    /// The executor panicked (the run goes on).
    #[error("panicked: {0}")]
    Panicked(String),
}

impl NodeError {
    /// Shorthand for [`NodeError::InvalidInput`].
    pub fn input(slot: &str, message: impl Into<String>) -> Self {
        NodeError::InvalidInput {
            slot: slot.to_string(),
            message: message.into(),
        }
    }
}

/// Why a workflow did not run or did not produce its outputs.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum WorkflowError {
    /// The workflow failed validation; nothing ran. Every problem is listed.
    #[error("workflow '{workflow}' is invalid:\n  - {}", join(.problems))]
    Invalid {
        /// Workflow id.
        workflow: String,
        /// Every problem found.
        problems: Vec<Invalid>,
    },
    /// The arguments do not fit the interface (missing required key, wrong type).
    #[error("workflow '{workflow}': {}", .problems.join("; "))]
    Arguments {
        /// Workflow id.
        workflow: String,
        /// One sentence per problem.
        problems: Vec<String>,
    },
    /// A node failed; its descendants were skipped.
    #[error("workflow '{workflow}': node '{node}' ({node_type}) failed: {error}")]
    NodeFailed {
        /// Workflow id.
        workflow: String,
        /// Node id.
        node: String,
        /// Node type.
        node_type: String,
        /// Why.
        error: Box<NodeError>,
    },
    /// The whole run passed its time limit.
    #[error("workflow '{workflow}' timed out after {after_ms} ms")]
    Timeout {
        /// Workflow id.
        workflow: String,
        /// The limit.
        after_ms: u64,
    },
    /// The run was cancelled.
    #[error("workflow '{workflow}' was cancelled")]
    Cancelled {
        /// Workflow id.
        workflow: String,
    },
    /// A `workflow:before-execute` hook refused the run.
    #[error("workflow '{workflow}' was vetoed: {reason}")]
    Vetoed {
        /// Workflow id.
        workflow: String,
        /// Why (as the hook gave it).
        reason: String,
    },
    /// No workflow with this id or path.
    #[error("no workflow '{0}' (give a file path or the id of a workflow in <home>/workflows)")]
    NotFound(String),
    /// The workflow's file exists but failed to load.
    #[error("workflow '{workflow}' is unavailable: failed to load: {reason}")]
    Unavailable {
        /// The id as asked for.
        workflow: String,
        /// The first load problem, `file:line:column: message`.
        reason: String,
    },
    /// A workflow file could not be read.
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
    Load(Vec<crate::problem::Problem>),
    /// A node type could not be registered.
    #[error("cannot register node type '{node_type}': {message}")]
    Registration {
        /// The type as given.
        node_type: String,
        /// Why.
        message: String,
    },
}

fn join(p: &[Invalid]) -> String {
    p.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n  - ")
}

impl WorkflowError {
    /// The same failure as a [`ToolError`] for tool `tool` (keeps timeouts and cancellation
    /// typed; everything else is `Failed` with this error's sentence).
    pub fn into_tool_error(self, tool: &str) -> ToolError {
        match self {
            WorkflowError::Timeout { after_ms, .. } => ToolError::Timeout {
                tool: tool.to_string(),
                after_ms,
                at: None,
            },
            WorkflowError::Cancelled { .. } => ToolError::Cancelled {
                tool: tool.to_string(),
            },
            WorkflowError::Vetoed { reason, .. } => ToolError::Vetoed {
                tool: tool.to_string(),
                reason,
            },
            WorkflowError::Arguments { problems, .. } => ToolError::InvalidParameters {
                tool: tool.to_string(),
                problems,
            },
            other => {
                if let WorkflowError::NodeFailed {
                    node,
                    node_type,
                    error,
                    ..
                } = &other
                {
                    if let NodeError::Tool(t) = &**error {
                        match &**t {
                            // Runaway tool → workflow → tool recursion keeps its own type
                            // all the way up.
                            ToolError::RecursionLimit { .. } => return (**t).clone(),
                            // A veto (a node hook's, or one of a tool the node called)
                            // reaches the caller as a veto, saying which node it stopped.
                            ToolError::Vetoed { reason, .. } => {
                                return ToolError::Vetoed {
                                    tool: tool.to_string(),
                                    reason: format!("node '{node}' ({node_type}): {reason}"),
                                }
                            }
                            _ => {}
                        }
                    }
                }
                ToolError::failed(tool, other.to_string())
            }
        }
    }
}
