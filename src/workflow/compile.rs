//! Validation and compilation: a [`Workflow`] plus a [`NodeRegistry`] become a [`Plan`], or
//! every problem is listed at once.
//!
//! The plan keeps what the scheduler needs as indices: each input knows the flat indices of
//! the output slots that feed it, each node knows its children and how many parents it
//! waits for. No string map is touched on the hot path.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

use petgraph::graph::{DiGraph, NodeIndex};
use serde_json::{Map, Value};

use super::error::{Invalid, WorkflowError};
use super::format::{Workflow, GROUP_INPUT, GROUP_OUTPUT};
use super::registry::{ExecMode, NodeExecutor, NodeRegistry, RegisteredNode};
use super::types::{DataFlowType, OrderedMap, SlotDefinition};

/// What a compiled node does.
#[derive(Clone)]
pub(crate) enum NodeKind {
    /// Emits the run's arguments.
    GroupInput,
    /// Collects interface outputs.
    GroupOutput,
    /// Runs an executor.
    Exec(Arc<dyn NodeExecutor>, ExecMode),
}

/// One input of a compiled node.
pub(crate) struct PlanInput {
    pub(crate) name: String,
    /// Flat output indices feeding it, in connection order.
    pub(crate) sources: Vec<u32>,
    /// `inputValues` entry or the slot's default, used when no source has a value.
    pub(crate) fallback: Option<Value>,
    pub(crate) multi: bool,
    pub(crate) required: bool,
}

/// One compiled node.
pub(crate) struct PlanNode {
    pub(crate) id: Arc<str>,
    pub(crate) node_type: Arc<str>,
    pub(crate) kind: NodeKind,
    pub(crate) inputs: Vec<PlanInput>,
    /// Output slot names (for `core:GroupInput`: the interface input keys).
    pub(crate) outputs: Vec<String>,
    /// Index of output slot 0 in the run's flat output table.
    pub(crate) out_base: u32,
    pub(crate) config: Map<String, Value>,
    /// Distinct children.
    pub(crate) children: Vec<u32>,
    /// Number of distinct parents.
    pub(crate) parents: u32,
}

/// A validated, compiled workflow, ready to run any number of times (concurrently too).
pub struct Plan {
    pub(crate) workflow_id: Arc<str>,
    pub(crate) nodes: Vec<PlanNode>,
    pub(crate) roots: Vec<u32>,
    pub(crate) slots: usize,
    pub(crate) interface_inputs: OrderedMap<SlotDefinition>,
    pub(crate) interface_outputs: OrderedMap<SlotDefinition>,
    /// Node indices in a topological order.
    pub(crate) topo: Vec<u32>,
}

impl std::fmt::Debug for Plan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plan")
            .field("workflow", &self.workflow_id)
            .field("nodes", &self.nodes.len())
            .finish_non_exhaustive()
    }
}

impl Plan {
    /// The workflow id.
    pub fn workflow_id(&self) -> &str {
        &self.workflow_id
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// True for a workflow without nodes.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Node ids in a topological order (each node after everything it depends on).
    pub fn topological_order(&self) -> Vec<&str> {
        self.topo
            .iter()
            .map(|&i| &*self.nodes[i as usize].id)
            .collect()
    }

    /// The interface inputs (tool parameters).
    pub fn interface_inputs(&self) -> &OrderedMap<SlotDefinition> {
        &self.interface_inputs
    }

    /// The interface outputs (tool result).
    pub fn interface_outputs(&self) -> &OrderedMap<SlotDefinition> {
        &self.interface_outputs
    }
}

/// Slot lists of one node as validation sees them (borrowed: no per-node clones).
struct Shape<'a> {
    inputs: &'a [(String, SlotDefinition)],
    outputs: &'a [(String, SlotDefinition)],
    kind: Option<NodeKind>,
    config: Map<String, Value>,
}

/// Validates `wf` against `registry` and compiles it. On failure the error lists every
/// problem found (unknown types, dangling edges, missing handles, type mismatches, missing
/// required inputs, cycles).
pub fn compile(wf: &Workflow, registry: &NodeRegistry) -> Result<Plan, WorkflowError> {
    let mut problems = Vec::new();
    let n = wf.nodes.len();

    // Node ids.
    let mut index: HashMap<&str, usize> = HashMap::with_capacity(n);
    for (i, node) in wf.nodes.iter().enumerate() {
        if index.insert(node.id.as_str(), i).is_some() {
            problems.push(Invalid::DuplicateNodeId {
                node: node.id.clone(),
            });
        }
    }

    // Node types → slot shapes. Each type is looked up once.
    let mut types: HashMap<&str, Option<Arc<RegisteredNode>>> = HashMap::new();
    for node in &wf.nodes {
        let t = node.node_type.as_str();
        if t != GROUP_INPUT && t != GROUP_OUTPUT && !types.contains_key(t) {
            types.insert(t, registry.get(t));
        }
    }
    let mut shapes: Vec<Shape<'_>> = Vec::with_capacity(n);
    for node in &wf.nodes {
        let shape = match node.node_type.as_str() {
            GROUP_INPUT => Shape {
                inputs: &[],
                outputs: &wf.interface_inputs.0,
                kind: Some(NodeKind::GroupInput),
                config: Map::new(),
            },
            GROUP_OUTPUT => Shape {
                inputs: &wf.interface_outputs.0,
                outputs: &[],
                kind: Some(NodeKind::GroupOutput),
                config: Map::new(),
            },
            t => match types.get(t).and_then(Option::as_ref) {
                Some(reg) => Shape {
                    inputs: &reg.definition.inputs.0,
                    outputs: &reg.definition.outputs.0,
                    kind: Some(NodeKind::Exec(reg.executor.clone(), reg.executor.mode())),
                    config: if reg.definition.config_schema.is_empty() {
                        node.config_values.clone()
                    } else {
                        reg.definition.config_with(&node.config_values)
                    },
                },
                None => {
                    problems.push(Invalid::UnknownNodeType {
                        node: node.id.clone(),
                        node_type: t.to_string(),
                        suggestion: registry.suggest(t),
                    });
                    Shape {
                        inputs: &[],
                        outputs: &[],
                        kind: None,
                        config: Map::new(),
                    }
                }
            },
        };
        shapes.push(shape);
    }

    // Output slot layout.
    let mut out_base = Vec::with_capacity(n);
    let mut slots = 0usize;
    for s in &shapes {
        out_base.push(slots as u32);
        slots += s.outputs.len();
    }

    // Edges: (target node, input slot) → [(edge index, flat source)].
    let mut feeds: HashMap<(usize, usize), Vec<(usize, u32)>> = HashMap::new();
    let mut links: Vec<(usize, usize)> = Vec::with_capacity(wf.edges.len());
    for (ei, e) in wf.edges.iter().enumerate() {
        let s = index.get(e.source.as_str()).copied();
        let t = index.get(e.target.as_str()).copied();
        if s.is_none() {
            problems.push(Invalid::MissingNode {
                edge: e.label(),
                end: "source",
                node: e.source.clone(),
            });
        }
        if t.is_none() {
            problems.push(Invalid::MissingNode {
                edge: e.label(),
                end: "target",
                node: e.target.clone(),
            });
        }
        let (Some(s), Some(t)) = (s, t) else { continue };
        links.push((s, t));
        // Handles of nodes with an unknown type cannot be checked.
        let so = if shapes[s].kind.is_some() {
            let found = shapes[s]
                .outputs
                .iter()
                .position(|(k, _)| *k == e.source_handle);
            if found.is_none() {
                problems.push(Invalid::MissingHandle {
                    edge: e.label(),
                    node: e.source.clone(),
                    end: "sourceHandle",
                    handle: e.source_handle.clone(),
                    available: shapes[s].outputs.iter().map(|(k, _)| k.clone()).collect(),
                });
            }
            found
        } else {
            None
        };
        let ti = if shapes[t].kind.is_some() {
            let found = shapes[t]
                .inputs
                .iter()
                .position(|(k, _)| *k == e.target_handle);
            if found.is_none() {
                problems.push(Invalid::MissingHandle {
                    edge: e.label(),
                    node: e.target.clone(),
                    end: "targetHandle",
                    handle: e.target_handle.clone(),
                    available: shapes[t].inputs.iter().map(|(k, _)| k.clone()).collect(),
                });
            }
            found
        } else {
            None
        };
        let (Some(so), Some(ti)) = (so, ti) else {
            continue;
        };
        let from = shapes[s].outputs[so].1.data_flow_type;
        let to = shapes[t].inputs[ti].1.data_flow_type;
        if !from.connects_to(to) {
            problems.push(Invalid::TypeMismatch {
                edge: e.label(),
                source: e.source.clone(),
                source_handle: e.source_handle.clone(),
                from,
                target: e.target.clone(),
                target_handle: e.target_handle.clone(),
                to,
            });
        }
        feeds
            .entry((t, ti))
            .or_default()
            .push((ei, out_base[s] + so as u32));
    }

    // Inputs of each node.
    let mut plan_inputs: Vec<Vec<PlanInput>> = Vec::with_capacity(n);
    for (i, node) in wf.nodes.iter().enumerate() {
        let mut list = Vec::with_capacity(shapes[i].inputs.len());
        for (si, (name, slot)) in shapes[i].inputs.iter().enumerate() {
            let mut sources = feeds.remove(&(i, si)).unwrap_or_default();
            if sources.len() > 1 && !slot.multi {
                problems.push(Invalid::TooManyConnections {
                    node: node.id.clone(),
                    slot: name.clone(),
                    count: sources.len(),
                });
            }
            if sources.len() > 1 {
                if let Some(order) = node.input_connection_orders.get(name) {
                    // Edges named in `inputConnectionOrders` first, in that order.
                    let rank = |ei: usize| {
                        wf.edges[ei]
                            .id
                            .as_ref()
                            .and_then(|id| order.iter().position(|o| o == id))
                            .unwrap_or(usize::MAX)
                    };
                    sources.sort_by_key(|(ei, _)| rank(*ei));
                }
            }
            let fallback = node
                .input_values
                .get(name)
                .filter(|v| !v.is_null())
                .cloned()
                .or_else(|| slot.default().cloned());
            let is_group_output = matches!(shapes[i].kind, Some(NodeKind::GroupOutput));
            if sources.is_empty() && fallback.is_none() {
                if is_group_output {
                    problems.push(Invalid::UnconnectedOutput { key: name.clone() });
                } else if slot.required {
                    problems.push(Invalid::MissingInput {
                        node: node.id.clone(),
                        slot: name.clone(),
                    });
                }
            }
            list.push(PlanInput {
                name: name.clone(),
                sources: sources.into_iter().map(|(_, src)| src).collect(),
                fallback,
                multi: slot.multi,
                required: slot.required && !is_group_output,
            });
        }
        plan_inputs.push(list);
    }
    // A GroupOutput that is absent while outputs are declared.
    if !wf.interface_outputs.is_empty() && !wf.nodes.iter().any(|nd| nd.node_type == GROUP_OUTPUT) {
        for k in wf.interface_outputs.keys() {
            problems.push(Invalid::UnconnectedOutput { key: k.to_string() });
        }
    }

    // Graph, cycles, topological order.
    let mut graph: DiGraph<(), ()> = DiGraph::with_capacity(n, links.len());
    for _ in 0..n {
        graph.add_node(());
    }
    let mut seen: HashSet<(usize, usize)> = HashSet::with_capacity(links.len());
    let mut children: Vec<Vec<u32>> = vec![Vec::new(); n];
    let mut parents = vec![0u32; n];
    for &(s, t) in &links {
        if seen.insert((s, t)) {
            graph.add_edge(NodeIndex::new(s), NodeIndex::new(t), ());
            children[s].push(t as u32);
            parents[t] += 1;
        }
    }
    let topo = match petgraph::algo::toposort(&graph, None) {
        Ok(order) => order.into_iter().map(|x| x.index() as u32).collect(),
        Err(_) => {
            for cycle in cycles(&graph) {
                problems.push(Invalid::Cycle {
                    nodes: cycle.into_iter().map(|i| wf.nodes[i].id.clone()).collect(),
                });
            }
            Vec::new()
        }
    };

    if !problems.is_empty() {
        return Err(WorkflowError::Invalid {
            workflow: wf.id.clone(),
            problems,
        });
    }

    let mut nodes = Vec::with_capacity(n);
    for (((node, shape), inputs), (kids, par)) in wf
        .nodes
        .iter()
        .zip(shapes)
        .zip(plan_inputs)
        .zip(children.into_iter().zip(parents))
    {
        nodes.push(PlanNode {
            id: Arc::from(node.id.as_str()),
            node_type: Arc::from(node.node_type.as_str()),
            // Every shape without a kind produced an UnknownNodeType problem above.
            kind: shape.kind.unwrap_or(NodeKind::GroupOutput),
            inputs,
            outputs: shape.outputs.iter().map(|(k, _)| k.clone()).collect(),
            out_base: 0,
            config: shape.config,
            children: kids,
            parents: par,
        });
    }
    for (pn, base) in nodes.iter_mut().zip(out_base) {
        pn.out_base = base;
    }
    let roots = nodes
        .iter()
        .enumerate()
        .filter(|(_, pn)| pn.parents == 0)
        .map(|(i, _)| i as u32)
        .collect();
    Ok(Plan {
        workflow_id: Arc::from(wf.id.as_str()),
        nodes,
        roots,
        slots,
        interface_inputs: wf.interface_inputs.clone(),
        interface_outputs: wf.interface_outputs.clone(),
        topo,
    })
}

/// One concrete cycle per strongly connected component that has one, as node indices in
/// edge order (the shortest loop through the component's first node).
fn cycles(graph: &DiGraph<(), ()>) -> Vec<Vec<usize>> {
    let mut out = Vec::new();
    for scc in petgraph::algo::tarjan_scc(graph) {
        let start = scc.iter().map(|x| x.index()).min().unwrap_or(0);
        if scc.len() == 1 {
            if graph.contains_edge(NodeIndex::new(start), NodeIndex::new(start)) {
                out.push(vec![start]);
            }
            continue;
        }
        let members: HashSet<usize> = scc.iter().map(|x| x.index()).collect();
        // Breadth-first from `start` back to `start`, inside the component.
        let mut prev: HashMap<usize, usize> = HashMap::new();
        let mut queue = VecDeque::from([start]);
        let mut closing = None;
        'bfs: while let Some(u) = queue.pop_front() {
            for v in graph.neighbors(NodeIndex::new(u)).map(|x| x.index()) {
                if !members.contains(&v) {
                    continue;
                }
                if v == start {
                    closing = Some(u);
                    break 'bfs;
                }
                if let std::collections::hash_map::Entry::Vacant(e) = prev.entry(v) {
                    e.insert(u);
                    queue.push_back(v);
                }
            }
        }
        let mut path = Vec::new();
        let mut cur = closing.unwrap_or(start);
        while cur != start {
            path.push(cur);
            cur = prev.get(&cur).copied().unwrap_or(start);
        }
        path.push(start);
        path.reverse();
        out.push(path);
    }
    out.sort();
    out
}

/// Whether a value fits a flow type (used for interface arguments).
pub(crate) fn value_fits(ty: DataFlowType, v: &Value) -> bool {
    match ty {
        DataFlowType::String | DataFlowType::Binary => v.is_string(),
        DataFlowType::Integer => v.is_i64() || v.is_u64(),
        DataFlowType::Float => v.is_number(),
        DataFlowType::Boolean => v.is_boolean(),
        DataFlowType::Object => v.is_object(),
        DataFlowType::Array => v.is_array(),
        DataFlowType::Wildcard | DataFlowType::ConvertibleAny => true,
    }
}
