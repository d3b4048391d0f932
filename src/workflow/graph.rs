//! Pictures of a workflow: Mermaid (`flowchart LR`) and Graphviz DOT.

use std::fmt::Write;

use super::format::Workflow;

/// Picture formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GraphFormat {
    /// Mermaid flowchart (renders on GitHub and in most Markdown viewers).
    Mermaid,
    /// Graphviz DOT (`dot -Tsvg`).
    Dot,
}

impl std::str::FromStr for GraphFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "mermaid" | "mmd" => Ok(GraphFormat::Mermaid),
            "dot" | "graphviz" => Ok(GraphFormat::Dot),
            other => Err(format!(
                "unknown graph format '{other}': expected mermaid or dot"
            )),
        }
    }
}

/// Renders the workflow's nodes and edges.
pub fn render(wf: &Workflow, format: GraphFormat) -> String {
    match format {
        GraphFormat::Mermaid => mermaid(wf),
        GraphFormat::Dot => dot(wf),
    }
}

fn mermaid_id(i: usize) -> String {
    format!("n{i}")
}

fn mermaid_text(s: &str) -> String {
    s.replace('"', "#quot;")
}

fn mermaid(wf: &Workflow) -> String {
    let mut s = String::from("flowchart LR\n");
    let index = |id: &str| wf.nodes.iter().position(|n| n.id == id);
    for (i, n) in wf.nodes.iter().enumerate() {
        let _ = writeln!(
            s,
            "    {}[\"{}<br/><small>{}</small>\"]",
            mermaid_id(i),
            mermaid_text(&n.id),
            mermaid_text(&n.node_type)
        );
    }
    for e in &wf.edges {
        if let (Some(a), Some(b)) = (index(&e.source), index(&e.target)) {
            let _ = writeln!(
                s,
                "    {} -- \"{} → {}\" --> {}",
                mermaid_id(a),
                mermaid_text(&e.source_handle),
                mermaid_text(&e.target_handle),
                mermaid_id(b)
            );
        }
    }
    s
}

fn dot_text(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

fn dot(wf: &Workflow) -> String {
    let mut s = format!(
        "digraph \"{}\" {{\n    rankdir=LR;\n    node [shape=box, style=rounded];\n",
        dot_text(&wf.id)
    );
    for n in &wf.nodes {
        let _ = writeln!(
            s,
            "    \"{}\" [label=\"{}\\n{}\"];",
            dot_text(&n.id),
            dot_text(&n.id),
            dot_text(&n.node_type)
        );
    }
    for e in &wf.edges {
        let _ = writeln!(
            s,
            "    \"{}\" -> \"{}\" [label=\"{} → {}\"];",
            dot_text(&e.source),
            dot_text(&e.target),
            dot_text(&e.source_handle),
            dot_text(&e.target_handle)
        );
    }
    s.push_str("}\n");
    s
}
