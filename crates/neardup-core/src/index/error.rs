//! The index's errors: a leaf, so that the modules of the index take them from here rather
//! than from their parent.

use super::store::{IndexParamError, StoreError};

/// Errors of the index.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    /// The storage layer failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Parameters that cannot work.
    #[error(transparent)]
    Param(#[from] IndexParamError),
    /// Stored data does not decode.
    #[error("corrupt index data: {0}")]
    Corrupt(String),
    /// The index was written by another format version.
    #[error(
        "index has format version {found}, this build reads version {expected}: rebuild it \
         into a new directory (neardup dedup --index NEW_DIR …) or use a release that reads \
         version {found}"
    )]
    FormatMismatch {
        /// Version on disk.
        found: u32,
        /// Version of this build.
        expected: u32,
    },
    /// The index was built with other parameters.
    #[error(
        "index was built with other parameters: {differences}; run with the parameters it \
         was built with, or rebuild into a new directory (neardup dedup --index NEW_DIR …)"
    )]
    ParamsMismatch {
        /// `name: stored → requested` for each difference.
        differences: String,
    },
    /// `open_existing` on a directory without an index.
    #[error("no neardup index here (no stored parameters)")]
    NotAnIndex,
    /// The open was ended by the caller's stop flag (no document was written).
    #[error("opening the index was interrupted")]
    Interrupted,
}
