//! Folds visible text into blocks: whitespace folded to one space, block boundaries, word
//! and link counts, and the container context of each block.

use super::hints::BOILERPLATE;
use super::output::{Block, BlockKind, Stripped};

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
        let n = b.len();
        let mut i = 0;
        while i < n {
            // whitespace
            match CLASS[b[i] as usize] {
                SPACE => {
                    self.pending_space = true;
                    i += 1;
                    continue;
                }
                WIDE if wide_space(s, i) > 0 => {
                    self.pending_space = true;
                    i += wide_space(s, i);
                    continue;
                }
                _ => {}
            }
            // words joined by single spaces, copied as one run
            let run = i;
            let mut words = 1;
            loop {
                while i < n && CLASS[b[i] as usize] == PLAIN {
                    i += 1;
                }
                if i >= n {
                    break;
                }
                match CLASS[b[i] as usize] {
                    WIDE => match wide_space(s, i) {
                        0 => i += utf8_len(b[i]),
                        _ => break,
                    },
                    _ if b[i] == b' ' && i + 1 < n && CLASS[b[i + 1] as usize] == PLAIN => {
                        words += 1;
                        i += 2;
                    }
                    _ => break,
                }
            }
            self.words_run(&s[run..i], words, in_link);
        }
    }

    /// Appends `words` words joined by single spaces.
    fn words_run(&mut self, run: &str, words: u32, in_link: bool) {
        let t = &mut self.out.text;
        let first_new = t.len() == self.start || self.pending_space;
        let counted = words - 1 + first_new as u32;
        self.words += counted;
        self.link_words += counted * in_link as u32;
        if t.len() > self.start && self.pending_space {
            t.push(' ');
            self.link_bytes += in_link as u32;
        }
        self.pending_space = false;
        t.push_str(run);
        if in_link {
            self.link_bytes += run.len() as u32;
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

/// Byte classes of [`Builder::text`]: ASCII other than whitespace, ASCII whitespace as
/// `char::is_whitespace` has it (tab, LF, VT, FF, CR, space) and NUL, and the lead or
/// continuation bytes of wider characters.
const PLAIN: u8 = 0;
const SPACE: u8 = 1;
const WIDE: u8 = 2;
static CLASS: [u8; 256] = {
    let mut t = [WIDE; 256];
    let mut c = 0;
    while c < 128 {
        t[c] = match c as u8 {
            b'\t' | b'\n' | 0x0B | 0x0C | b'\r' | b' ' | 0 => SPACE,
            _ => PLAIN,
        };
        c += 1;
    }
    t
};

/// The length of the character at `s[i..]` (a lead byte ≥ 0x80) if it is whitespace, else 0.
#[inline]
fn wide_space(s: &str, i: usize) -> usize {
    match s[i..].chars().next() {
        Some(c) if c.is_whitespace() => c.len_utf8(),
        _ => 0,
    }
}

/// The length of a UTF-8 sequence from its lead byte.
#[inline]
fn utf8_len(lead: u8) -> usize {
    match lead {
        0xF0.. => 4,
        0xE0.. => 3,
        _ => 2,
    }
}
