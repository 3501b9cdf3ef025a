//! Markup stripping: the visible text of a page as blocks.
//!
//! Three implementations produce the same [`Stripped`] value; each is a tokenizer feeding
//! one set of block rules (`rules`), which keep text outside `script`, `style`, `noscript`,
//! `template`, `svg`, `math`, `iframe` and `head` (except `<title>`):
//!
//! - [`StripMode::Bytes`] (default, `scan`): one pass over the bytes that tokenizes as the
//!   HTML standard does, skipping hidden text with a byte search and reading only the hint
//!   attributes of container elements (class, id, role, style, hidden). No tree, no token
//!   values; linear in the input.
//! - [`StripMode::Tokens`] (`oracle`): html5ever's tokenizer, the reference the byte
//!   scanner is tested against (`tests/strip_differential.rs`).
//! - [`StripMode::Tree`] (`tree`): `scraper` parses the document into a tree (the HTML5
//!   tree-building rules: implied tags, misnesting repair) and the visible text nodes are
//!   walked without recursion.
//!
//! Block elements (paragraphs, headings, list items, table cells, `<br>`, …) start and end
//! blocks; block boundaries are sentence boundaries for the sentence shingles and chain
//! boundaries for SpotSigs. Entities are decoded, whitespace is folded to one space. Text
//! inside links is counted per block (`link_bytes`) so navigation blocks can be told apart.
//! Input larger than [`StripOptions::max_bytes`] is cut at that size (on a char boundary).

mod builder;
mod entities;
mod hints;
mod options;
mod oracle;
mod output;
mod rules;
mod scan;
#[cfg(test)]
mod tests;
mod tree;

pub use hints::{container_weight, BOILERPLATE, CONTENT, LAYOUT};
pub use options::{StripMode, StripOptions};
pub use output::{Block, BlockKind, Stripped};

/// The main text region of a page (Body Text Extraction, Finn et al. 2001): the contiguous
/// run of blocks that maximises words outside links minus tags and link words, so the long,
/// tag-sparse article wins over menus, teasers and footers. Blocks inside containers with a
/// negative hint count against a region, blocks inside positive ones count double.
/// Returns a block index range.
pub fn main_region(blocks: &[Block]) -> std::ops::Range<usize> {
    let (mut best, mut best_range) = (i64::MIN, 0..0);
    let (mut run, mut run_start) = (0i64, 0usize);
    for (i, b) in blocks.iter().enumerate() {
        let plain = b.words.saturating_sub(b.link_words) as i64;
        let score = match b.context {
            c if c < 0 => -(b.words as i64) - b.tags as i64,
            0 => plain - b.link_words as i64 - b.tags as i64,
            _ => 2 * plain - b.link_words as i64 - b.tags as i64,
        };
        if run <= 0 {
            run = 0;
            run_start = i;
        }
        run += score;
        if run > best {
            best = run;
            best_range = run_start..i + 1;
        }
    }
    best_range
}

/// Strips the markup of `html` (any text: HTML, plain text or junk) into text blocks.
pub fn strip(html: &str, opts: &StripOptions) -> Stripped {
    let (input, truncated) = cut(html, opts.max_bytes);
    let input = tame_tags(input);
    let mut out = match opts.mode {
        StripMode::Bytes => scan::strip(&input, opts),
        StripMode::Tokens => oracle::strip(&input, opts),
        StripMode::Tree => tree::strip(&input, opts.hint_rules()),
    };
    out.truncated = truncated;
    out
}

/// The longest start tag kept whole, in bytes. Longer ones are cut to this length: a tag holds
/// no visible text, and the tokenizer checks each new attribute of a tag against all earlier
/// ones, so a tag with a million attributes would cost minutes.
pub const MAX_TAG_BYTES: usize = 64 * 1024;

/// Cuts every tag (a `<` followed by a letter or `/`, up to the next `>`) longer than
/// [`MAX_TAG_BYTES`]; an unterminated one at the end is cut likewise. Linear; borrows when
/// nothing is cut (every normal page).
pub fn tame_tags(html: &str) -> std::borrow::Cow<'_, str> {
    let b = html.as_bytes();
    if no_long_tags(b) {
        return std::borrow::Cow::Borrowed(html);
    }
    let mut out: Option<String> = None;
    let mut copied = 0; // bytes of `html` already handled in `out`
    let mut at = 0;
    let mut next_gt: Option<usize> = None; // a known `>` position ≥ at (None: none left)
    let mut gt_known = false;
    while let Some(off) = memchr::memchr(b'<', &b[at..]) {
        let lt = at + off;
        at = lt + 1;
        match b.get(lt + 1) {
            Some(c) if c.is_ascii_alphabetic() || *c == b'/' => {}
            _ => continue,
        }
        if !gt_known || next_gt.is_some_and(|g| g < lt) {
            next_gt = memchr::memchr(b'>', &b[lt..]).map(|g| lt + g);
            gt_known = true;
        }
        let end = next_gt.unwrap_or(b.len());
        if end - lt <= MAX_TAG_BYTES {
            continue;
        }
        let mut keep = lt + MAX_TAG_BYTES;
        while !html.is_char_boundary(keep) {
            keep -= 1;
        }
        let o = out.get_or_insert_with(|| String::with_capacity(html.len()));
        o.push_str(&html[copied..keep]);
        copied = end; // resume at the `>` (or the end)
        at = end.max(at);
    }
    match out {
        None => std::borrow::Cow::Borrowed(html),
        Some(mut o) => {
            o.push_str(&html[copied..]);
            std::borrow::Cow::Owned(o)
        }
    }
}

/// A cheap proof that no tag is longer than [`MAX_TAG_BYTES`]: every block of half that size
/// but the last holds a `>`, so from any `<` the next `>` (or the end of the input) is at
/// most two blocks away. One `memchr` per 32 KiB instead of one per tag.
fn no_long_tags(b: &[u8]) -> bool {
    const BLOCK: usize = MAX_TAG_BYTES / 2;
    let mut chunks = b.chunks(BLOCK);
    chunks.next_back();
    chunks.all(|c| memchr::memchr(b'>', c).is_some())
}

fn cut(s: &str, max: usize) -> (&str, bool) {
    if s.len() <= max {
        return (s, false);
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    (&s[..end], true)
}
