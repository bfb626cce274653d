//! [`Unsupported`]: why a graph could not be lifted, naming the node (or graph input/output) at
//! fault, its operator, and a precise reason.

use std::fmt;

/// The graph holds something the [`crate::DecoderPlan`] cannot describe, or breaks an assumption
/// the plan depends on. Such a model is routed to ONNX Runtime with this as the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unsupported {
    /// The node's name, or `"<op_type> #<index>"` when it has none; for graph-level problems the
    /// graph input or output concerned (or `"graph"`).
    pub node: String,
    /// The node's `op_type` (without its domain); `"graph input"`, `"graph output"` or `"graph"`
    /// for graph-level problems.
    pub op_type: String,
    /// What is wrong, in words.
    pub reason: String,
}

impl Unsupported {
    /// A problem with the graph as a whole, or one of its inputs/outputs.
    pub(crate) fn graph(what: &str, kind: &str, reason: impl Into<String>) -> Self {
        Unsupported {
            node: what.to_string(),
            op_type: kind.to_string(),
            reason: reason.into(),
        }
    }
}

impl fmt::Display for Unsupported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({}): {}", self.node, self.op_type, self.reason)
    }
}

impl std::error::Error for Unsupported {}

/// Shorthand for the front end's results.
pub(crate) type Lift<T> = Result<T, Unsupported>;
