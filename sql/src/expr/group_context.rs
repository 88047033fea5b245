//! The group stage's bookkeeping while a grouped statement is resolved ([`GroupContext`]):
//! its keys and the aggregates found so far. A leaf below the resolver, shared by the group
//! stage and the window stage over groups ([`super::WindowContext::group`]).

use engine::query::ir::AggSpec;

use super::typed::Typed;

/// The group stage's slots: keys (row-stage expressions) and aggregates collected while
/// resolving.
#[derive(Debug, Default)]
pub struct GroupContext {
    /// The group keys.
    pub keys: Vec<Typed>,
    /// The aggregates found so far.
    pub aggregates: Vec<AggSpec>,
}
