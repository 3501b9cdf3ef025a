//! Why a serving request was not answered.

use crate::index::IndexError;

/// Why a request was not answered; the HTTP layer maps each kind to a status code.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// Malformed or inconsistent request (400).
    #[error("{0}")]
    BadRequest(String),
    /// More items than the limit (413).
    #[error("{0}")]
    TooLarge(String),
    /// An id that is not in the index, where one is required (404).
    #[error("{0}")]
    NotFound(String),
    /// The index failed (500).
    #[error("index: {0}")]
    Index(#[from] IndexError),
}

impl ServeError {
    /// The HTTP status code of this error.
    pub fn status(&self) -> u16 {
        match self {
            ServeError::BadRequest(_) => 400,
            ServeError::TooLarge(_) => 413,
            ServeError::NotFound(_) => 404,
            ServeError::Index(_) => 500,
        }
    }

    /// A short machine-readable kind, as in the error body.
    pub fn kind(&self) -> &'static str {
        match self {
            ServeError::BadRequest(_) => "bad_request",
            ServeError::TooLarge(_) => "too_large",
            ServeError::NotFound(_) => "not_found",
            ServeError::Index(_) => "index_error",
        }
    }
}
