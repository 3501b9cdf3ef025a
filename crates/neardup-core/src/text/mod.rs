//! Text: markup stripping, tokens, stemming and stopword data.
//!
//! Pure code: no I/O, no runtime, no metrics.

pub mod lang;
pub mod strip;
pub mod tokens;

pub use lang::{Language, WordLists};
pub use strip::{main_region, strip, Block, BlockKind, StripMode, StripOptions, Stripped};
pub use tokens::{for_each_word, push_lowercase, TokenFlags, Tokenizer, Tokens};
