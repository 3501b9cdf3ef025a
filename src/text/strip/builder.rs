//! Folds visible text into blocks: whitespace folded to one space, block boundaries, word
//! and link counts, and the container context of each block.

use super::hints::BOILERPLATE;
use super::{Block, BlockKind, Stripped};

/// The largest share of a page's words a negative container may hold and still be
/// treated as boilerplate (see `Builder::assign_contexts`).
const MAX_BOILERPLATE_SHARE: f64 = 0.5;

#[derive(Default)]
pub(super) struct Builder {
    pub(super) out: Stripped,
    pub(super) kind: Option<BlockKind>,
    start: usize,
    link_bytes: u32,
    words: u32,
    link_words: u32,
    pub(super) tags: u32,
    /// Open containers: the first block that can start inside each, and its hint.
    open: Vec<(u32, i32)>,
    /// Closed containers with a hint: first block, end block (exclusive), hint.
    hinted: Vec<(u32, u32, i32)>,
    pending_space: bool,
}

impl Builder {
    /// Blocks ended so far, plus the current one if it has text.
    pub(super) fn blocks_begun(&self) -> u32 {
        (self.out.blocks.len() + (self.out.text.len() > self.start) as usize) as u32
    }

    /// A container with hint `weight` opens.
    pub(super) fn enter(&mut self, weight: i32) {
        self.open.push((self.blocks_begun(), weight));
    }

    /// The innermost open container closes.
    pub(super) fn leave(&mut self) {
        if let Some((first, weight)) = self.open.pop() {
            let end = self.blocks_begun();
            if weight != 0 && end > first {
                self.hinted.push((first, end, weight));
            }
        }
    }

    /// Sets each block's [`Block::context`] from the hinted containers around it: −1 inside
    /// a negative container that holds at most [`MAX_BOILERPLATE_SHARE`] of the page's
    /// words, else +1 inside a positive container, else 0. A negative container around most
    /// of the page is a layout wrapper (a page-wide `<form>`, an unclosed `<aside>`, a
    /// "layout-sidebar" column holding the article), not boilerplate.
    pub(super) fn assign_contexts(&mut self) {
        while !self.open.is_empty() {
            self.leave();
        }
        let blocks = &mut self.out.blocks;
        let n = blocks.len();
        let mut prefix = Vec::with_capacity(n + 1);
        prefix.push(0u64);
        for b in blocks.iter() {
            prefix.push(prefix[prefix.len() - 1] + b.words as u64);
        }
        let total = prefix[n] as f64;
        let (mut neg, mut pos) = (vec![0i32; n + 1], vec![0i32; n + 1]);
        for &(first, end, weight) in &self.hinted {
            let (f, e) = ((first as usize).min(n), (end as usize).min(n));
            let diff = if weight > 0 {
                &mut pos
            } else if weight <= BOILERPLATE
                || ((prefix[e] - prefix[f]) as f64) <= MAX_BOILERPLATE_SHARE * total
            {
                &mut neg
            } else {
                continue;
            };
            diff[f] += 1;
            diff[e] -= 1;
        }
        let (mut in_neg, mut in_pos) = (0, 0);
        for (i, b) in blocks.iter_mut().enumerate() {
            in_neg += neg[i];
            in_pos += pos[i];
            b.context = if in_neg > 0 { -1 } else { (in_pos > 0) as i32 };
        }
    }

    /// Appends text: runs of whitespace (`char::is_whitespace`) and NULs fold to one space
    /// between words, none at a block's start or end.
    pub(super) fn text(&mut self, s: &str, in_link: bool) {
        let b = s.as_bytes();
        let mut i = 0;
        while i < b.len() {
            // skip whitespace
            let c = b[i];
            if c < 0x80 {
                if is_ascii_space(c) {
                    self.pending_space = true;
                    i += 1;
                    continue;
                }
            } else {
                let ch = s[i..].chars().next().unwrap_or(' ');
                if ch.is_whitespace() {
                    self.pending_space = true;
                    i += ch.len_utf8();
                    continue;
                }
            }
            // a run of non-whitespace
            let run = i;
            while i < b.len() {
                let c = b[i];
                if c < 0x80 {
                    if is_ascii_space(c) {
                        break;
                    }
                    i += 1;
                } else {
                    let ch = s[i..].chars().next().unwrap_or(' ');
                    if ch.is_whitespace() {
                        break;
                    }
                    i += ch.len_utf8();
                }
            }
            self.word_part(&s[run..i], in_link);
        }
    }

    /// Appends a run of non-whitespace characters.
    fn word_part(&mut self, part: &str, in_link: bool) {
        let t = &mut self.out.text;
        if t.len() == self.start || self.pending_space {
            self.words += 1;
            self.link_words += in_link as u32;
        }
        if t.len() > self.start && self.pending_space {
            t.push(' ');
            self.link_bytes += in_link as u32;
        }
        self.pending_space = false;
        t.push_str(part);
        if in_link {
            self.link_bytes += part.len() as u32;
        }
    }

    /// Ends the current block (if it has text) and starts one of `kind`.
    pub(super) fn boundary(&mut self, kind: BlockKind) {
        self.end_block();
        self.kind = Some(kind);
    }

    pub(super) fn end_block(&mut self) {
        let t = &mut self.out.text;
        if t.len() > self.start {
            self.out.blocks.push(Block {
                kind: self.kind.unwrap_or(BlockKind::Text),
                start: self.start as u32,
                end: t.len() as u32,
                link_bytes: self.link_bytes,
                words: self.words,
                link_words: self.link_words,
                tags: self.tags,
                context: 0,
            });
            self.tags = 0;
            t.push('\n');
            self.start = t.len();
        }
        self.link_bytes = 0;
        self.words = 0;
        self.link_words = 0;
        self.pending_space = false;
        self.kind = None;
    }

    pub(super) fn finish(mut self) -> Stripped {
        self.end_block();
        self.assign_contexts();
        if self.out.text.ends_with('\n') {
            self.out.text.pop();
        }
        self.out
    }
}

/// ASCII whitespace as `char::is_whitespace` has it (tab, LF, VT, FF, CR, space), and NUL.
#[inline]
fn is_ascii_space(c: u8) -> bool {
    matches!(c, b'\t' | b'\n' | 0x0B | 0x0C | b'\r' | b' ' | 0)
}
