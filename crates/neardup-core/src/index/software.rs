//! Software text across hosts, learned from the pages decided so far (text rules 6 and
//! later).
//!
//! **Principle.** Software text is what several sites each print on pages about different
//! things: a forum's permissions box, a shop's delivery notice, a CMS's comment-form labels.
//! A wire story is printed by many sites too, but each prints it with the same content
//! around it, so it never becomes template text of any one host. Two pages that share only
//! software text are not copies of each other, however much of their signed text it is.
//!
//! The counts, in the order pages are decided (every decided page counts, duplicates and
//! skipped pages included; a repeated id does not):
//!
//! - a short block ([`crate::signature::software`]) is *template text of host h* once a
//!   page of h carries it with a fingerprint more than [`TEMPLATE_DISTANCE`] bits from that
//!   of the first page of h that carried it (pages about different things; identical copies
//!   have equal fingerprints and never count);
//! - it is *software text* once it is template text of [`HOSTS`] hosts.
//!
//! The decision leaves the signatures of a page's software blocks out of matching, on the
//! page as it is decided and, for a unique page, for good (its stored record keeps them:
//! [`super::docs`]). Nothing else changes: a page left with too few signatures of its own is
//! matched only as an identical copy ([`crate::dedup`]).
//!
//! Bounded memory: a table of (block, host) → first fingerprint (2^[`FIRST_LOG2`] slots) and
//! a table of blocks → the first two hosts where each is template text and whether it is
//! software (2^[`BLOCKS_LOG2`] slots), each slot taken by the newest key that maps to it. A
//! key pushed out only delays a detection: template text comes back on its host's next
//! page. Everything is deterministic in the order the pages are counted, so the counts
//! rebuilt from the stored documents (each keeps its short blocks' hashes) after a restart,
//! or by a standby from the changelog, are the live ones.
//!
//! With text rules 7 the tables are sized to what was counted ([`SoftwareText::growing`]):
//! they start at 2^[`START_LOG2`] slots and double whenever more than one slot in 32 is
//! taken, up to the sizes above. A doubling moves every entry to the slot its key gives in
//! the larger table (the same bits of the key pick the slot in both, one more of them in
//! the larger, so no two entries meet), which depends only on what was counted before it:
//! a recount gives the same tables. At text rules 6 the tables are whole from the start, as
//! they were: 2^22 and 2^20 slots for any index.
//!
//! Either way a table is held as a map of its taken slots until an array of every slot
//! would be smaller ([`slots`]): the same slots, the same counts, in the memory of what was
//! counted (kilobytes for the README's 13-page example, where arrays held 64 MiB at text
//! rules 6 and 28 KB growing).

use std::io::{Read, Write};

use super::freq::Stamp;
use slots::Slots;

mod slots;

/// Hosts a block must be template text of before it is software text. Two hosts can share a
/// paragraph by chance (one site quoting another twice); three that each print it on pages
/// about different things is a piece of software. (The study found the same figures at 2
/// and 3: docs/benchmarks/2026-11-27-software-text.md.)
pub const HOSTS: usize = 3;

/// Two pages whose fingerprints are more than this many bits apart are about different
/// things (the fingerprint of near-identical pages differs in a few bits; a third of its 64
/// bits is far outside what a changed date or counter does).
pub const TEMPLATE_DISTANCE: u32 = 16;

/// Slots of the (block, host) table, log2 (2^22 × 12 bytes: 48 MiB).
pub const FIRST_LOG2: u32 = 22;

/// Slots of the block table, log2 (2^20 × 16 bytes: 16 MiB).
pub const BLOCKS_LOG2: u32 = 20;

/// Slots of each table at the start when the tables grow (text rules 7 and later), log2.
pub const START_LOG2: u32 = 10;

/// The slot of block `b` in a block table of `2^log2` slots.
fn block_slot(b: u32, log2: u32) -> usize {
    (mix(u64::from(b) | 0x5b_0000_0000) & ((1u64 << log2) - 1)) as usize
}

fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// A block's entry: its hash, the first hosts (32-bit, never 0) where it is template text,
/// and whether it is software text (1). Free while the first host is 0. Plain words, so that
/// a fresh table is zeroed memory the system hands out lazily.
type BlockEntry = [u32; HOSTS + 1];

/// A (block, host) entry: a tag of the key (never 0; 0 is a free slot) and the first
/// fingerprint of a page of the host with the block (low, high 32 bits), in one cache line.
type FirstEntry = [u32; 3];

/// Sizes of the software-text counts, for `neardup index stats`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct SoftwareStats {
    /// Memory held, bytes.
    pub bytes: usize,
    /// Times a block was found to be software text so far (a block pushed out of its slot
    /// and found again counts again; as of the last count, which removals leave to the next
    /// decision).
    pub software_blocks: u64,
}

/// The counts of short blocks across hosts.
#[derive(Clone, Debug, PartialEq)]
pub struct SoftwareText {
    /// The (block, host) table.
    first: Slots<FirstEntry>,
    /// The block table.
    blocks: Slots<BlockEntry>,
    /// Times a block became software text (a block pushed out of its slot and found again
    /// counts again).
    found: u64,
    /// The tables grow with what is counted (text rules 7 and later), and the (block, host)
    /// table's slot is taken from the key's bits above the tag's lowest.
    growing: bool,
    /// Taken slots of each table (for the growth).
    taken: [usize; 2],
}

impl Default for SoftwareText {
    fn default() -> Self {
        SoftwareText::new(FIRST_LOG2, BLOCKS_LOG2)
    }
}

/// Whether a table of `len` slots with `taken` of them taken is due to double: more than
/// one in [`GROW_AT`]. A new key finds its slot taken as often as the table is full, and
/// pushes out the key there: the whole tables of text rules 6 are 2–3 % full on the
/// labelled corpora (a few thousand pages), and at half full a host's template was pushed
/// out before its next page came often enough to add 20 false pairs on webdup-v1.
fn due(taken: usize, len: usize) -> bool {
    taken * GROW_AT > len
}

/// A growing table doubles when more than one slot in this many is taken.
const GROW_AT: usize = 32;

impl SoftwareText {
    /// Empty counts with tables of `2^first_log2` and `2^blocks_log2` slots.
    pub fn new(first_log2: u32, blocks_log2: u32) -> SoftwareText {
        let (first_log2, blocks_log2) = (first_log2.clamp(4, 30), blocks_log2.clamp(4, 30));
        SoftwareText {
            first: Slots::new(first_log2),
            blocks: Slots::new(blocks_log2),
            found: 0,
            growing: false,
            taken: [0; 2],
        }
    }

    /// Empty counts whose tables grow with what is counted (text rules 7 and later), from
    /// 2^[`START_LOG2`] slots up to the default sizes.
    pub fn growing() -> SoftwareText {
        SoftwareText {
            growing: true,
            ..SoftwareText::new(START_LOG2, START_LOG2)
        }
    }

    /// Empty counts for an index of these rules: growing tables with `growing` (text rules
    /// 7 and later), whole ones before.
    pub fn for_rules(growing: bool) -> SoftwareText {
        if growing {
            SoftwareText::growing()
        } else {
            SoftwareText::default()
        }
    }

    /// The slot of a (block, host) key in the first table.
    #[inline]
    fn first_slot(&self, key: u64) -> usize {
        let mask = (1u64 << self.first.log2()) - 1;
        if self.growing {
            // the tag's bits above its lowest (which is forced to 1): a doubling finds the
            // slot again from the tag alone
            ((key >> 33) & mask) as usize
        } else {
            (key & mask) as usize
        }
    }

    /// The slot of block `b` in the block table.
    #[inline]
    fn block_slot(&self, b: u32) -> usize {
        block_slot(b, self.blocks.log2())
    }

    /// Doubles the (block, host) table, every entry to its slot in the larger one.
    fn grow_first(&mut self) {
        let log2 = self.first.log2() + 1;
        let mask = (1usize << log2) - 1;
        self.first = (self.first).moved(log2, |e| (e[0] >> 1) as usize & mask);
    }

    /// Doubles the block table, every entry to its slot in the larger one.
    fn grow_blocks(&mut self) {
        let log2 = self.blocks.log2() + 1;
        self.blocks = (self.blocks).moved(log2, |e| block_slot(e[0], log2));
    }

    /// Taken slots of each table, counted.
    fn count_taken(&self) -> [usize; 2] {
        [self.first.iter().count(), self.blocks.iter().count()]
    }

    /// Counts one decided page of `host` ([`super::freq::host_hash`]) with fingerprint `fp`
    /// (its first 64 bits) and the short blocks `blocks`.
    pub fn observe(&mut self, host: u64, fp: u64, blocks: impl IntoIterator<Item = u32>) {
        let host32 = ((host >> 32) as u32) | 1;
        for b in blocks {
            let key = mix(u64::from(b) ^ host.rotate_left(23));
            let slot = self.first_slot(key);
            let tag = ((key >> 32) as u32) | 1;
            let e = self.first.slot_mut(slot);
            if e[0] != tag {
                let free = e[0] == 0;
                *e = [tag, fp as u32, (fp >> 32) as u32];
                if free && self.growing {
                    self.taken[0] += 1;
                    if due(self.taken[0], self.first.len()) && self.first.log2() < FIRST_LOG2 {
                        self.grow_first();
                    }
                }
            } else {
                let first = u64::from(e[1]) | u64::from(e[2]) << 32;
                if (first ^ fp).count_ones() > TEMPLATE_DISTANCE {
                    self.template(b, host32);
                }
            }
        }
    }

    /// Block `b` is template text of the host `host32`.
    fn template(&mut self, b: u32, host32: u32) {
        let slot = self.block_slot(b);
        let e = self.blocks.slot_mut(slot);
        let hosts = 1..HOSTS;
        if e[1] == 0 || e[0] != b {
            let free = e[1] == 0;
            *e = [0; HOSTS + 1];
            e[0] = b;
            e[1] = host32;
            if free && self.growing {
                self.taken[1] += 1;
                if due(self.taken[1], self.blocks.len()) && self.blocks.log2() < BLOCKS_LOG2 {
                    self.grow_blocks();
                }
            }
            return;
        }
        if e[HOSTS] == 1 || e[hosts.clone()].contains(&host32) {
            return;
        }
        match e[hosts].iter_mut().find(|h| **h == 0) {
            Some(free) => *free = host32,
            None => {
                e[HOSTS] = 1;
                self.found += 1;
            }
        }
    }

    /// Whether block `b` is software text.
    pub fn is_software(&self, b: u32) -> bool {
        let e = self.blocks.get(self.block_slot(b));
        e[HOSTS] == 1 && e[0] == b && e[1] != 0
    }

    /// Times a block was found to be software text so far (a block pushed out of its slot
    /// and found again counts again).
    pub fn found(&self) -> u64 {
        self.found
    }

    /// Memory held, bytes.
    pub fn bytes(&self) -> usize {
        self.first.bytes() + self.blocks.bytes()
    }

    /// Writes the counts (layout: the two table sizes' log2 u32 LE, `found` u64 LE, the
    /// tags u32 LE, the fingerprints u64 LE, then each block entry: block, hosts u32 LE,
    /// software u8).
    pub fn write_to(&self, w: &mut impl Write) -> std::io::Result<()> {
        w.write_all(&self.first.log2().to_le_bytes())?;
        w.write_all(&self.blocks.log2().to_le_bytes())?;
        w.write_all(&self.found.to_le_bytes())?;
        let mut first = vec![[0u32; 3]; self.first.len()];
        for (slot, e) in self.first.iter() {
            first[slot] = e;
        }
        let mut blocks = vec![[0u32; HOSTS + 1]; self.blocks.len()];
        for (slot, e) in self.blocks.iter() {
            blocks[slot] = e;
        }
        let mut buf = Vec::with_capacity(first.len() * 8);
        buf.extend(first.iter().flat_map(|e| e[0].to_le_bytes()));
        w.write_all(&buf)?;
        buf.clear();
        buf.extend(
            first
                .iter()
                .flat_map(|e| [e[1], e[2]])
                .flat_map(u32::to_le_bytes),
        );
        w.write_all(&buf)?;
        buf.clear();
        for e in &blocks {
            for v in &e[..HOSTS] {
                buf.extend_from_slice(&v.to_le_bytes());
            }
            buf.push(e[HOSTS] as u8);
        }
        w.write_all(&buf)
    }

    /// Writes the counts, the taken slots only (layout: the two table sizes' log2 u32 LE,
    /// `found` u64 LE, the number of taken (block, host) slots u64 LE, each as its slot, tag
    /// and fingerprint's two halves u32 LE, then the number of taken block slots u64 LE, each
    /// as its slot, block, hosts u32 LE and software u8). An index's tables are mostly free
    /// until it holds hundreds of thousands of pages: the file, and the memory a read
    /// touches, follow what was counted rather than the tables' 64 MiB.
    pub fn write_sparse(&self, w: &mut impl Write) -> std::io::Result<()> {
        w.write_all(&self.first.log2().to_le_bytes())?;
        w.write_all(&self.blocks.log2().to_le_bytes())?;
        w.write_all(&self.found.to_le_bytes())?;
        let first = self.first.sorted();
        let taken = first.len() as u64;
        let mut buf = Vec::with_capacity(8 + taken as usize * 16);
        buf.extend_from_slice(&taken.to_le_bytes());
        for (slot, e) in first {
            for v in [slot as u32, e[0], e[1], e[2]] {
                buf.extend_from_slice(&v.to_le_bytes());
            }
        }
        w.write_all(&buf)?;
        buf.clear();
        let blocks = self.blocks.sorted();
        buf.extend_from_slice(&(blocks.len() as u64).to_le_bytes());
        for (slot, e) in blocks {
            buf.extend_from_slice(&(slot as u32).to_le_bytes());
            for v in &e[..HOSTS] {
                buf.extend_from_slice(&v.to_le_bytes());
            }
            buf.push(e[HOSTS] as u8);
        }
        w.write_all(&buf)
    }

    /// Reads what [`SoftwareText::write_sparse`] wrote: tables of the default sizes, or,
    /// with `growing`, of growing tables (text rules 7 and later) between their start and
    /// those sizes.
    pub fn read_sparse(r: &mut impl Read, growing: bool) -> std::io::Result<SoftwareText> {
        let bad = |m: String| std::io::Error::new(std::io::ErrorKind::InvalidData, m);
        let mut s = read_header(r, growing)?;
        let mut b8 = [0u8; 8];
        r.read_exact(&mut b8)?;
        let taken = u64::from_le_bytes(b8);
        if taken > s.first.len() as u64 {
            return Err(bad(format!("{taken} taken slots of {}", s.first.len())));
        }
        let mut buf = vec![0u8; taken as usize * 16];
        r.read_exact(&mut buf)?;
        let u = |c: &[u8], i: usize| {
            u32::from_le_bytes(c[4 * i..4 * i + 4].try_into().expect("4 bytes"))
        };
        for c in buf.chunks_exact(16) {
            let slot = u(c, 0) as usize;
            if slot >= s.first.len() {
                return Err(bad(format!("slot {slot} out of the table")));
            }
            if u(c, 1) == 0 {
                return Err(bad("a taken slot with a free tag".into()));
            }
            *s.first.slot_mut(slot) = [u(c, 1), u(c, 2), u(c, 3)];
        }
        r.read_exact(&mut b8)?;
        let taken = u64::from_le_bytes(b8);
        if taken > s.blocks.len() as u64 {
            return Err(bad(format!(
                "{taken} taken block slots of {}",
                s.blocks.len()
            )));
        }
        let each = 4 + 4 * HOSTS + 1;
        let mut buf = vec![0u8; taken as usize * each];
        r.read_exact(&mut buf)?;
        for c in buf.chunks_exact(each) {
            let slot = u(c, 0) as usize;
            if slot >= s.blocks.len() {
                return Err(bad(format!("block slot {slot} out of the table")));
            }
            let mut e = [0u32; HOSTS + 1];
            for (i, v) in e[..HOSTS].iter_mut().enumerate() {
                *v = u(c, i + 1);
            }
            e[HOSTS] = match c[each - 1] {
                v @ (0 | 1) => u32::from(v),
                v => return Err(bad(format!("software flag {v}"))),
            };
            if e[1] == 0 {
                return Err(bad("a taken block slot without a host".into()));
            }
            *s.blocks.slot_mut(slot) = e;
        }
        if growing {
            s.taken = s.count_taken();
        }
        Ok(s)
    }

    /// Reads what [`SoftwareText::write_to`] wrote, for tables of the default sizes.
    pub fn read_from(r: &mut impl Read) -> std::io::Result<SoftwareText> {
        let bad = |m: String| std::io::Error::new(std::io::ErrorKind::InvalidData, m);
        let mut s = read_header(r, false)?;
        let u = |c: &[u8], i: usize| {
            u32::from_le_bytes(c[4 * i..4 * i + 4].try_into().expect("4 bytes"))
        };
        // every slot: the taken ones kept (a free slot holds nothing the counts read)
        let mut tags = vec![0u8; s.first.len() * 4];
        r.read_exact(&mut tags)?;
        let mut fps = vec![0u8; s.first.len() * 8];
        r.read_exact(&mut fps)?;
        for (slot, (t, f)) in tags.chunks_exact(4).zip(fps.chunks_exact(8)).enumerate() {
            if u(t, 0) != 0 {
                *s.first.slot_mut(slot) = [u(t, 0), u(f, 0), u(f, 1)];
            }
        }
        let each = 4 * HOSTS + 1;
        let mut buf = vec![0u8; s.blocks.len() * each];
        r.read_exact(&mut buf)?;
        for (slot, c) in buf.chunks_exact(each).enumerate() {
            let mut e = [0u32; HOSTS + 1];
            for (i, v) in e[..HOSTS].iter_mut().enumerate() {
                *v = u(c, i);
            }
            e[HOSTS] = match c[each - 1] {
                v @ (0 | 1) => u32::from(v),
                v => return Err(bad(format!("software flag {v}"))),
            };
            if e[1] != 0 {
                *s.blocks.slot_mut(slot) = e;
            }
        }
        Ok(s)
    }
}

/// The tables' sizes and `found` of a snapshot body, as empty counts of those sizes: the
/// default sizes, or with `growing` any between the start and them.
fn read_header(r: &mut impl Read, growing: bool) -> std::io::Result<SoftwareText> {
    let bad = |m: String| std::io::Error::new(std::io::ErrorKind::InvalidData, m);
    let mut b4 = [0u8; 4];
    let mut b8 = [0u8; 8];
    r.read_exact(&mut b4)?;
    let first_log2 = u32::from_le_bytes(b4);
    r.read_exact(&mut b4)?;
    let blocks_log2 = u32::from_le_bytes(b4);
    let fits = if growing {
        (START_LOG2..=FIRST_LOG2).contains(&first_log2)
            && (START_LOG2..=BLOCKS_LOG2).contains(&blocks_log2)
    } else {
        (first_log2, blocks_log2) == (FIRST_LOG2, BLOCKS_LOG2)
    };
    if !fits {
        let expected = if growing { "at most " } else { "" };
        return Err(bad(format!(
            "software-text tables of 2^{first_log2} and 2^{blocks_log2} slots, expected \
             {expected}2^{FIRST_LOG2} and 2^{BLOCKS_LOG2}"
        )));
    }
    r.read_exact(&mut b8)?;
    let mut s = SoftwareText::new(first_log2, blocks_log2);
    s.growing = growing;
    s.found = u64::from_le_bytes(b8);
    Ok(s)
}

/// The software-text snapshot, beside the database's files: written at a clean stop with the
/// lists snapshot, read back on open under the same rules (the index's epoch, and no more
/// documents than the index has).
pub const SNAPSHOT: &str = "software.snapshot";

/// Version 1: every slot of both tables (61 MiB whatever the index holds); read, not written.
const MAGIC_V1: &[u8; 8] = b"NDSOFT1\0";

/// Version 2: the taken slots only.
const MAGIC: &[u8; 8] = b"NDSOFT2\0";

/// Writes `s` to `path` (temporary file, fsync, rename). Layout (v2): the magic
/// `NDSOFT2\0`, epoch u64 LE, next_doc u64 LE, [`SoftwareText::write_sparse`], CRC-32 of
/// everything before it, u32 LE. (v1, `NDSOFT1\0`, held [`SoftwareText::write_to`]'s every
/// slot instead: [`load`] reads both.)
pub fn save(s: &SoftwareText, path: &std::path::Path, stamp: Stamp) -> std::io::Result<()> {
    super::freq::write_snapshot(path, MAGIC, stamp, 1 << 16, |body| s.write_sparse(body))
}

/// Reads a snapshot written by [`save`] (or by a version that wrote v1) of counts with
/// growing tables or not (`growing`: text rules 7 and later); a damaged or foreign file is
/// an error.
pub fn load(path: &std::path::Path, growing: bool) -> std::io::Result<(SoftwareText, Stamp)> {
    match super::freq::read_snapshot(path, MAGIC, "software-text", |r| {
        SoftwareText::read_sparse(r, growing)
    }) {
        Err(e) if e.to_string().contains("not a software-text snapshot") => {
            super::freq::read_snapshot(path, MAGIC_V1, "software-text", |r| {
                SoftwareText::read_from(r)
            })
        }
        r => r,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FAR: u64 = 0;
    const FAR2: u64 = u64::MAX;

    #[test]
    fn a_block_is_software_once_template_text_of_three_hosts() {
        let mut s = SoftwareText::new(10, 8);
        let (a, b, c) = (
            0xaaaa_0000_0000_0000,
            0xbbbb_0000_0000_0000,
            0xcccc_0000_0000_0000,
        );
        let block = 42;
        for (i, host) in [a, b].into_iter().enumerate() {
            s.observe(host, FAR, [block]);
            s.observe(host, FAR2, [block]);
            assert!(!s.is_software(block), "{i}: two hosts are not enough");
        }
        s.observe(c, FAR, [block]);
        assert!(
            !s.is_software(block),
            "one page of the third host is not template text"
        );
        s.observe(c, FAR2, [block]);
        assert!(s.is_software(block));
        assert_eq!(s.found(), 1);
        assert!(!s.is_software(43));
    }

    #[test]
    fn copies_and_one_host_never_make_software_text() {
        let mut s = SoftwareText::new(10, 8);
        // a wire story on ten hosts, each host printing it twice: the same fingerprint
        for h in 1..=10u64 {
            let host = h << 40;
            s.observe(host, 0x1234, [7]);
            s.observe(host, 0x1234 ^ 0xff, [7]); // a few bits apart: a near copy
        }
        assert!(!s.is_software(7));
        // one host printing a notice on a hundred different pages
        for p in 0..100u64 {
            s.observe(9 << 40, mix(p), [8]);
        }
        assert!(!s.is_software(8));
        assert_eq!(s.found(), 0);
    }

    #[test]
    fn the_counts_depend_on_the_order_only_and_round_trip() {
        let pages: Vec<(u64, u64, Vec<u32>)> = (0..2000u64)
            .map(|i| {
                (
                    mix(i % 17) << 8,
                    mix(i),
                    vec![(i % 5) as u32, 100 + (i % 300) as u32],
                )
            })
            .collect();
        let run = || {
            let mut s = SoftwareText::new(12, 8);
            for (h, fp, b) in &pages {
                s.observe(*h, *fp, b.iter().copied());
            }
            s
        };
        let (x, y) = (run(), run());
        assert_eq!(x, y);
        assert!(x.is_software(0) && x.is_software(4));
        let mut full = SoftwareText::default();
        for (h, fp, b) in &pages {
            full.observe(*h, *fp, b.iter().copied());
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(SNAPSHOT);
        let stamp = Stamp {
            epoch: 7,
            next_doc: 2000,
        };
        save(&full, &path, stamp).unwrap();
        let (back, st) = load(&path, false).unwrap();
        assert_eq!(st, stamp);
        assert_eq!(back, full);
        // the taken slots only: a few kilobytes, not the tables' 64 MiB
        let size = std::fs::metadata(&path).unwrap().len();
        assert!(size < 64 << 10, "{size} bytes");
        // a snapshot of the version before (every slot) is still read
        let v1 = dir.path().join("v1.snapshot");
        crate::index::freq::write_snapshot(&v1, MAGIC_V1, stamp, full.bytes(), |b| {
            full.write_to(b)
        })
        .unwrap();
        assert!(std::fs::metadata(&v1).unwrap().len() > 60 << 20);
        let (back, st) = load(&v1, false).unwrap();
        assert_eq!((back, st), (full.clone(), stamp));
        let mut bytes = std::fs::read(&path).unwrap();
        let n = bytes.len();
        bytes[n / 2] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        assert!(load(&path, false).is_err(), "a damaged snapshot is refused");
    }

    #[test]
    fn growing_tables_double_as_they_fill_and_recount_alike() {
        // pages of 40 hosts, each with 5 blocks of their own and one block every host
        // prints; some hosts print a shared notice on pages about different things
        let pages: Vec<(u64, u64, Vec<u32>)> = (0..1500u64)
            .map(|i| {
                let host = mix(i % 40) << 8;
                let own = (0..5).map(|k| (mix(i * 8 + k) >> 40) as u32);
                let shared = [7u32, 9 + (i % 3) as u32];
                (host, mix(i), own.chain(shared).collect())
            })
            .collect();
        let run = |s: &mut SoftwareText| {
            for (h, fp, b) in &pages {
                s.observe(*h, *fp, b.iter().copied());
            }
        };
        let mut g = SoftwareText::growing();
        assert_eq!((g.first.log2(), g.blocks.log2()), (START_LOG2, START_LOG2));
        run(&mut g);
        // 1,500 pages of 7 blocks: the first table doubled several times, and is a small
        // part of the whole tables
        assert!(g.first.log2() > START_LOG2 + 3, "{}", g.first.log2());
        let arrays = (1 << FIRST_LOG2) * std::mem::size_of::<FirstEntry>()
            + (1 << BLOCKS_LOG2) * std::mem::size_of::<BlockEntry>();
        assert!(g.bytes() < arrays / 8, "{} bytes", g.bytes());
        assert_eq!(g.taken, g.count_taken());
        assert!(g.is_software(7) && g.is_software(9) && g.is_software(10));
        // the same order, the same tables
        let mut again = SoftwareText::growing();
        run(&mut again);
        assert_eq!(again, g);
        // the shared blocks are found as whole tables find them
        let mut whole = SoftwareText::default();
        run(&mut whole);
        assert_eq!(g.found(), whole.found());
        // the snapshot holds the grown sizes, and is read back only as growing counts
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(SNAPSHOT);
        let stamp = Stamp {
            epoch: 1,
            next_doc: 1500,
        };
        save(&g, &path, stamp).unwrap();
        assert_eq!(load(&path, true).unwrap(), (g.clone(), stamp));
        assert!(load(&path, false).is_err());
        // and growing further from there equals growing all the way
        let (mut back, _) = load(&path, true).unwrap();
        let (mut whole, more) = (g.clone(), [(mix(99) << 8, 5u64, vec![1u32, 2, 3])]);
        for (h, fp, b) in &more {
            back.observe(*h, *fp, b.iter().copied());
            whole.observe(*h, *fp, b.iter().copied());
        }
        assert_eq!(back, whole);
    }
}
