//! The ExecutionEngine: workflow format, node registry, built-in nodes, validation, the
//! concurrent DAG runner, events, and `workflow:` tool schemas.
