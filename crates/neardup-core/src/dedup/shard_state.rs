//! The state files of a sharded decider's roles, written at a clean stop so that the next
//! start takes up from where it stopped instead of reading the whole stream again: a shard's
//! ([`ShardState`], what a [`super::sharded::Shard`] holds beside its index, written with the
//! index's snapshots) and the aggregator's ([`AggregatorState`], every decision it keeps).
//!
//! A shard's state is a function of the records read, in order: the signed pages (its index,
//! the software-text counts of every page, the ids read, the copy keys) and the decisions
//! (the duplicates it owns, taken out of its lists or waiting). The file names the position
//! in each stream it is of, and the index's stamp (lists epoch, next document number) it was
//! written with. It is used once: the stage removes it before the index changes again, so a
//! shard killed later starts empty and reads the stream from its start, as without one.
//!
//! Layout (version 1), little-endian: the magic `NDSHRD1\0`; shard and shards (u32 each);
//! the index's epoch and next document number (u64 each); the positions (u32 count, then
//! each: u32 name length, the name's bytes, partition i32, next offset i64); the probes
//! (two u128: the id hash and the copy key of a fixed page, under this build's hashing);
//! the copy keys' two seeds (u64 each); the copies stored (u64); then the ids read, the
//! decided duplicates waiting and the copy keys of the pages stored unique (each a u64
//! count and as many u128); CRC-32 of everything before it, u32.

use std::io;
use std::path::Path;

use crate::index::{Decision, DecisionKind, Found};

/// The state file's name, in the shard's index directory.
pub const STATE_FILE: &str = "shard.state";

const MAGIC: &[u8; 8] = b"NDSHRD1\0";

/// Where in one stream a state is of: its name, partition and the next offset to read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Position {
    pub stream: String,
    pub partition: i32,
    pub next: i64,
}

/// What a shard holds besides its index, and what it is of.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShardState {
    pub me: u32,
    pub shards: u32,
    /// The index's stamp when the state was written ([`crate::index::Index::stamp`]).
    pub epoch: u64,
    pub next_doc: u64,
    pub positions: Vec<Position>,
    /// The id hash and copy key of a fixed page under the hashing of the build that wrote
    /// the file: a build that hashes otherwise refuses the file.
    pub probes: [u128; 2],
    pub seeds: [u64; 2],
    pub copies: u64,
    pub seen: Vec<u128>,
    pub pending: Vec<u128>,
    pub keys: Vec<u128>,
}

fn bad(m: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, m.into())
}

impl ShardState {
    /// Writes the state to `path` (a temporary file, fsync, rename).
    pub fn save(&self, path: &Path) -> io::Result<()> {
        let sets = self.seen.len() + self.pending.len() + self.keys.len();
        let mut out = Vec::with_capacity(128 + 16 * sets);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&self.me.to_le_bytes());
        out.extend_from_slice(&self.shards.to_le_bytes());
        out.extend_from_slice(&self.epoch.to_le_bytes());
        out.extend_from_slice(&self.next_doc.to_le_bytes());
        put_positions(&mut out, &self.positions)?;
        for v in self.probes {
            out.extend_from_slice(&v.to_le_bytes());
        }
        for v in self.seeds {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.extend_from_slice(&self.copies.to_le_bytes());
        for set in [&self.seen, &self.pending, &self.keys] {
            out.extend_from_slice(&(set.len() as u64).to_le_bytes());
            for v in set {
                out.extend_from_slice(&v.to_le_bytes());
            }
        }
        write_checked(path, out)
    }

    /// Reads a state file written by [`ShardState::save`]; a damaged or foreign file is an
    /// error that says so.
    pub fn load(path: &Path) -> io::Result<ShardState> {
        let body = read_checked(path, MAGIC, "a shard state file")?;
        let mut r = Reader(&body);
        let me = r.u32()?;
        let shards = r.u32()?;
        let epoch = r.u64()?;
        let next_doc = r.u64()?;
        let positions = r.positions()?;
        let probes = [r.u128()?, r.u128()?];
        let seeds = [r.u64()?, r.u64()?];
        let copies = r.u64()?;
        let mut set = || -> io::Result<Vec<u128>> {
            let n = r.u64()?;
            if n > (r.0.len() / 16) as u64 {
                return Err(bad("a set longer than the file"));
            }
            (0..n).map(|_| r.u128()).collect()
        };
        let (seen, pending, keys) = (set()?, set()?, set()?);
        if !r.0.is_empty() {
            return Err(bad("trailing bytes"));
        }
        Ok(ShardState {
            me,
            shards,
            epoch,
            next_doc,
            positions,
            probes,
            seeds,
            copies,
            seen,
            pending,
            keys,
        })
    }
}

/// The aggregator's state file's name, in its directory.
pub const AGGREGATOR_STATE_FILE: &str = "aggregator.state";

const AGGREGATOR_MAGIC: &[u8; 8] = b"NDAGGR1\0";

/// What the aggregator ([`super::sharded::Aggregator`]) holds, and what it is of.
///
/// Layout (version 1), little-endian: the magic `NDAGGR1\0`; shards (u32); the positions (as
/// in [`ShardState`]: the signed topic's first, then each votes partition's); the probe (u128:
/// the id hash of a fixed id under this build's hashing); the unique bits (u64 count, then
/// the words, u64 each: bit `pos` set when the page at stream position `pos` was decided
/// unique); the decisions (u64 count, then each: the id hash u128, the kind u8 (0 unique, 1
/// duplicate, 2 skipped) and for a duplicate the index that found it u8 (0 none, 1 alg.G,
/// 2 alg.H, 3 SpotSigs, 4 sentences), flags u8 (bit 0 a similarity, bit 1 a Hamming
/// distance), the canonical id and URL (each u32 length and bytes), the similarity f64 and
/// the Hamming distance u32 when flagged); CRC-32 of everything before it, u32.
#[derive(Clone, Debug, PartialEq)]
pub struct AggregatorState {
    pub shards: u32,
    pub positions: Vec<Position>,
    pub probe: u128,
    pub unique: Vec<u64>,
    pub decided: Vec<(u128, Decision)>,
}

fn put_positions(out: &mut Vec<u8>, positions: &[Position]) -> io::Result<()> {
    let count = u32::try_from(positions.len()).map_err(|_| bad("too many positions"))?;
    out.extend_from_slice(&count.to_le_bytes());
    for p in positions {
        put_str(out, &p.stream)?;
        out.extend_from_slice(&p.partition.to_le_bytes());
        out.extend_from_slice(&p.next.to_le_bytes());
    }
    Ok(())
}

fn put_str(out: &mut Vec<u8>, s: &str) -> io::Result<()> {
    let len = u32::try_from(s.len()).map_err(|_| bad("a string too long"))?;
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(s.as_bytes());
    Ok(())
}

/// The whole file: its bytes with their CRC-32 after them, written whole or not at all.
fn write_checked(path: &Path, mut out: Vec<u8>) -> io::Result<()> {
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    crate::index::freq::write_whole(path, &out)
}

/// The body of a file written by [`write_checked`] with `magic` (its magic and checksum
/// checked), or why not.
fn read_checked(path: &Path, magic: &[u8; 8], what: &str) -> io::Result<Vec<u8>> {
    let mut bytes = std::fs::read(path)?;
    if bytes.len() < magic.len() + 4 || &bytes[..8] != magic {
        return Err(bad(format!("not {what} (or of another version)")));
    }
    let (all, crc) = bytes.split_at(bytes.len() - 4);
    if crc32fast::hash(all) != u32::from_le_bytes([crc[0], crc[1], crc[2], crc[3]]) {
        return Err(bad("checksum mismatch (damaged file)"));
    }
    bytes.truncate(bytes.len() - 4);
    bytes.drain(..8);
    Ok(bytes)
}

impl AggregatorState {
    /// Writes the state to `path` (a temporary file, fsync, rename).
    pub fn save(&self, path: &Path) -> io::Result<()> {
        let mut out = Vec::with_capacity(64 + 8 * self.unique.len() + 20 * self.decided.len());
        out.extend_from_slice(AGGREGATOR_MAGIC);
        out.extend_from_slice(&self.shards.to_le_bytes());
        put_positions(&mut out, &self.positions)?;
        out.extend_from_slice(&self.probe.to_le_bytes());
        out.extend_from_slice(&(self.unique.len() as u64).to_le_bytes());
        for w in &self.unique {
            out.extend_from_slice(&w.to_le_bytes());
        }
        out.extend_from_slice(&(self.decided.len() as u64).to_le_bytes());
        for (h, d) in &self.decided {
            out.extend_from_slice(&h.to_le_bytes());
            out.push(match d.kind {
                DecisionKind::Unique => 0,
                DecisionKind::Duplicate => 1,
                DecisionKind::Skipped => 2,
            });
            if d.kind != DecisionKind::Duplicate {
                continue;
            }
            out.push(Found::code(d.found_by));
            out.push(u8::from(d.similarity.is_some()) | u8::from(d.hamming.is_some()) << 1);
            put_str(&mut out, d.canonical_id.as_deref().unwrap_or(""))?;
            put_str(&mut out, d.canonical_url.as_deref().unwrap_or(""))?;
            if let Some(sim) = d.similarity {
                out.extend_from_slice(&sim.to_le_bytes());
            }
            if let Some(h) = d.hamming {
                out.extend_from_slice(&h.to_le_bytes());
            }
        }
        write_checked(path, out)
    }

    /// Reads a state file written by [`AggregatorState::save`]; a damaged or foreign file is
    /// an error that says so.
    pub fn load(path: &Path) -> io::Result<AggregatorState> {
        let body = read_checked(path, AGGREGATOR_MAGIC, "an aggregator state file")?;
        let mut r = Reader(&body);
        let shards = r.u32()?;
        let positions = r.positions()?;
        let probe = r.u128()?;
        let words = r.u64()?;
        if words > (r.0.len() / 8) as u64 {
            return Err(bad("unique bits longer than the file"));
        }
        let unique = (0..words).map(|_| r.u64()).collect::<io::Result<_>>()?;
        let n = r.u64()?;
        if n > (r.0.len() / 17) as u64 {
            return Err(bad("more decisions than the file holds"));
        }
        let mut decided = Vec::with_capacity(n as usize);
        for _ in 0..n {
            let h = r.u128()?;
            let kind = match r.u8()? {
                0 => DecisionKind::Unique,
                1 => DecisionKind::Duplicate,
                2 => DecisionKind::Skipped,
                k => return Err(bad(format!("a decision of kind {k}"))),
            };
            if kind != DecisionKind::Duplicate {
                decided.push((h, Decision::plain(kind)));
                continue;
            }
            let found_by = Found::of_code(r.u8()?)
                .map_err(|f| bad(format!("a decision found by index {f}")))?;
            let flags = r.u8()?;
            let canonical_id = Some(r.string()?).filter(|s| !s.is_empty());
            let canonical_url = Some(r.string()?).filter(|s| !s.is_empty());
            let similarity = if flags & 1 != 0 {
                Some(f64::from_le_bytes(r.take(8)?.try_into().expect("8 bytes")))
            } else {
                None
            };
            let hamming = if flags & 2 != 0 { Some(r.u32()?) } else { None };
            decided.push((
                h,
                Decision {
                    kind,
                    canonical_id,
                    canonical_url,
                    similarity,
                    hamming,
                    found_by,
                },
            ));
        }
        if !r.0.is_empty() {
            return Err(bad("trailing bytes"));
        }
        Ok(AggregatorState {
            shards,
            positions,
            probe,
            unique,
            decided,
        })
    }
}

struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take(&mut self, n: usize) -> io::Result<&[u8]> {
        if self.0.len() < n {
            return Err(bad("truncated"));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn u8(&mut self) -> io::Result<u8> {
        Ok(self.take(1)?[0])
    }

    fn string(&mut self) -> io::Result<String> {
        let len = self.u32()? as usize;
        String::from_utf8(self.take(len)?.to_vec()).map_err(|_| bad("a string that is not UTF-8"))
    }

    fn positions(&mut self) -> io::Result<Vec<Position>> {
        let count = self.u32()?;
        let mut positions = Vec::with_capacity(count.min(1024) as usize);
        for _ in 0..count {
            positions.push(Position {
                stream: self.string()?,
                partition: self.u32()? as i32,
                next: self.u64()? as i64,
            });
        }
        Ok(positions)
    }

    fn u32(&mut self) -> io::Result<u32> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }

    fn u64(&mut self) -> io::Result<u64> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }

    fn u128(&mut self) -> io::Result<u128> {
        Ok(u128::from_le_bytes(
            self.take(16)?.try_into().expect("16 bytes"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state() -> ShardState {
        ShardState {
            me: 1,
            shards: 4,
            epoch: 7,
            next_doc: 1234,
            positions: vec![
                Position {
                    stream: "signed".into(),
                    partition: 0,
                    next: 99,
                },
                Position {
                    stream: "duplicate".into(),
                    partition: 2,
                    next: 0,
                },
            ],
            probes: [u128::MAX - 3, 5],
            seeds: [11, u64::MAX],
            copies: 3,
            seen: (0..100u128).map(|i| i * 0x1_0000_0000_0001).collect(),
            pending: vec![42],
            keys: vec![],
        }
    }

    #[test]
    fn a_state_round_trips_and_a_damaged_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(STATE_FILE);
        let s = state();
        s.save(&path).unwrap();
        assert_eq!(ShardState::load(&path).unwrap(), s);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[40] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        let e = ShardState::load(&path).unwrap_err().to_string();
        assert!(e.contains("checksum"), "{e}");
        std::fs::write(&path, b"NDSOFT2\0 something else entirely").unwrap();
        let e = ShardState::load(&path).unwrap_err().to_string();
        assert!(e.contains("not a shard state file"), "{e}");
        let mut cut = bytes.clone();
        cut.truncate(30);
        std::fs::write(&path, &cut).unwrap();
        assert!(ShardState::load(&path).is_err());
    }
}
