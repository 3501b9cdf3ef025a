//! Short blocks: what a page gives the software-text rule ([`crate::index::software`]; text
//! rules 6 and later).
//!
//! Text that one piece of forum, CMS or shop software prints on the pages of many sites (a
//! permissions box, comment-form labels, a credit line) is a short block: a few words, the
//! same on every page that carries it. A page gives the decision two things about its short
//! blocks:
//!
//! - the hashes of every short block it shows ([`ShortBlocks::blocks`]), which the index
//!   counts to learn which blocks are template text of many hosts;
//! - for each short block of the signed text, the page's signatures that block makes on
//!   its own ([`ShortBlocks::sigs`]): the signatures left out of matching when the block is
//!   software text.
//!
//! A short block has [`MIN_WORDS`] to [`MAX_WORDS`] words (whitespace-separated) and is not
//! link-dominated; its hash is the CRC-32 of its trimmed text, as in the template sample
//! ([`super::template`]). Below three words a block makes no signature (a SpotSigs chain is
//! an antecedent and two words, a word shingle three words).
//!
//! With text rules 7 the page also lists its longer blocks (more than [`MAX_WORDS`] words,
//! not link-dominated), so that two pages of one host can be compared on all the text they
//! show ([`crate::dedup::kept_apart`]). Bit 0 of a hash then says which kind a block is: set
//! for a long block, clear for a short one ([`is_long`]); the software-text counts read the
//! short ones only, as with text rules 6.

use super::set::Signatures;
use super::template::block_hash;
use crate::text::{Stripped, Tokens};

/// Fewest words of a short block.
pub const MIN_WORDS: u32 = 3;

/// Most words of a short block. A longer block is prose: a quoted paragraph that three
/// sites each print in two stories is not software text, and counting it as such cut dev
/// gold pairs below τ in the study (docs/benchmarks/2026-11-27-software-text.md).
pub const MAX_WORDS: u32 = 20;

/// Whether `hash`, listed by a page signed with text rules 7 or later, is a long block's.
pub fn is_long(hash: u32) -> bool {
    hash & 1 == 1
}

/// The blocks of `blocks` (a page's, ascending) that the software-text counts read: all of
/// them with text rules 6, the short ones with 7 and later (`tagged`).
pub fn counted(blocks: &[u32], tagged: bool) -> impl Iterator<Item = u32> + '_ {
    blocks
        .iter()
        .copied()
        .filter(move |&h| !(tagged && is_long(h)))
}

/// How much of the smaller of two pages' block lists (ascending, distinct) the other one
/// shows: shared blocks over the smaller list's length; `None` when either is empty.
pub fn containment(a: &[u32], b: &[u32]) -> Option<f64> {
    let smaller = a.len().min(b.len());
    if smaller == 0 {
        return None;
    }
    let (mut i, mut j, mut shared) = (0, 0, 0usize);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                shared += 1;
                i += 1;
                j += 1;
            }
        }
    }
    Some(shared as f64 / smaller as f64)
}

/// The short blocks of a signed page.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ShortBlocks {
    /// Hashes of the page's short blocks, ascending and distinct (with text rules 7 and
    /// later, of its long blocks too, tagged by bit 0: [`is_long`]).
    pub blocks: Vec<u32>,
    /// For each short block of the signed text that makes some of the page's signatures on
    /// its own: its hash and those signatures, both ascending; ascending by hash.
    pub sigs: Vec<(u32, Vec<u32>)>,
}

impl ShortBlocks {
    /// Nothing.
    pub fn is_empty(&self) -> bool {
        self.blocks.is_empty() && self.sigs.is_empty()
    }

    /// The page's signatures of the blocks `software` says are software text, ascending
    /// and distinct.
    pub fn software_sigs(&self, software: impl Fn(u32) -> bool) -> Vec<u32> {
        let mut out: Vec<u32> = Vec::new();
        for (block, sigs) in &self.sigs {
            if software(*block) {
                out.extend_from_slice(sigs);
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Whether the lists are well formed: blocks ascending and distinct, each block with
    /// signatures one of them, and its signatures ascending, distinct and not empty.
    pub fn well_formed(&self) -> bool {
        self.blocks.windows(2).all(|w| w[0] < w[1])
            && self.sigs.windows(2).all(|w| w[0].0 < w[1].0)
            && (self.sigs.iter()).all(|(b, _)| self.blocks.binary_search(b).is_ok())
            && self
                .sigs
                .iter()
                .all(|(_, s)| !s.is_empty() && s.windows(2).all(|w| w[0] < w[1]))
    }
}

/// Whether a block of the page is text of its own: at least [`MIN_WORDS`] words, not
/// link-dominated.
fn is_text(text: &Stripped, b: &crate::text::Block, max_link_density: f64) -> bool {
    b.words >= MIN_WORDS
        && b.link_bytes as f64 <= max_link_density * (b.end - b.start) as f64
        && !text.block_text(b).trim().is_empty()
}

/// The short blocks of `text`: every short block's hash, and for each short block among the
/// blocks `signed` (the range of blocks the page was signed from), its own signatures
/// (`sign` makes them from the block's tokens, `tokens_of` those from its text) that are in
/// `page` (the page's signatures). With `long` (text rules 7 and later), the long blocks'
/// hashes too, every hash tagged by bit 0 ([`is_long`]).
pub(crate) fn of(
    text: &Stripped,
    max_link_density: f64,
    long: bool,
    signed: std::ops::Range<usize>,
    page: &Signatures,
    mut tokens_of: impl FnMut(&str, &mut Tokens),
    mut sign: impl FnMut(&Tokens) -> Vec<u32>,
) -> ShortBlocks {
    let mut blocks: Vec<u32> = Vec::new();
    let mut sigs: Vec<(u32, Vec<u32>)> = Vec::new();
    let mut tokens = Tokens::default();
    for (i, b) in text.blocks.iter().enumerate() {
        if !is_text(text, b, max_link_density) {
            continue;
        }
        let t = text.block_text(b);
        let h = match (long, b.words > MAX_WORDS) {
            (false, true) => continue,
            (false, false) => block_hash(t),
            (true, false) => block_hash(t) & !1,
            (true, true) => {
                blocks.push(block_hash(t) | 1);
                continue;
            }
        };
        blocks.push(h);
        if page.set_len() == 0 || !signed.contains(&i) || sigs.iter().any(|(x, _)| *x == h) {
            continue;
        }
        tokens.clear();
        tokens_of(t, &mut tokens);
        let mut own: Vec<u32> = sign(&tokens)
            .into_iter()
            .filter(|&s| page.contains(s))
            .collect();
        if own.is_empty() {
            continue;
        }
        own.sort_unstable();
        own.dedup();
        sigs.push((h, own));
    }
    blocks.sort_unstable();
    blocks.dedup();
    sigs.sort_unstable_by_key(|e| e.0);
    ShortBlocks { blocks, sigs }
}
