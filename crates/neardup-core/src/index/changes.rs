//! What the index tells its driver about its changes: each mutation it journals for the
//! changelog ([`super::Index::take_journal`]), and what undoing the pending marks removed.

/// One change of the index.
#[derive(Clone, Debug, PartialEq)]
pub enum Mutation {
    /// Document `id` was stored under `num`; `record` is its stored doc record.
    Put {
        /// Internal document number.
        num: u64,
        /// Document id.
        id: String,
        /// The doc record as stored (layout in [`super::docs`]).
        record: Vec<u8>,
    },
    /// Document `id` was removed.
    Delete {
        /// Document id.
        id: String,
    },
}

/// What [`super::Index::undo_pending`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Undone {
    /// Marks no commit covered.
    pub uncommitted: u64,
    /// Documents removed because of them.
    pub removed: u64,
    /// Marks a commit covered (cleared only).
    pub committed: u64,
}
