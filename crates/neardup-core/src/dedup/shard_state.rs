//! A shard's state file: what a shard of a sharded decider ([`super::sharded::Shard`]) holds
//! beside its index, written at a clean stop with the index's snapshots, so that the next
//! start takes up from where it stopped instead of reading the whole stream again.
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
        let count = u32::try_from(self.positions.len()).map_err(|_| bad("too many positions"))?;
        out.extend_from_slice(&count.to_le_bytes());
        for p in &self.positions {
            let len = u32::try_from(p.stream.len()).map_err(|_| bad("a stream name too long"))?;
            out.extend_from_slice(&len.to_le_bytes());
            out.extend_from_slice(p.stream.as_bytes());
            out.extend_from_slice(&p.partition.to_le_bytes());
            out.extend_from_slice(&p.next.to_le_bytes());
        }
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
        let crc = crc32fast::hash(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        crate::index::freq::write_whole(path, &out)
    }

    /// Reads a state file written by [`ShardState::save`]; a damaged or foreign file is an
    /// error that says so.
    pub fn load(path: &Path) -> io::Result<ShardState> {
        let bytes = std::fs::read(path)?;
        if bytes.len() < MAGIC.len() + 4 || &bytes[..8] != MAGIC {
            return Err(bad("not a shard state file (or of another version)"));
        }
        let (all, crc) = bytes.split_at(bytes.len() - 4);
        if crc32fast::hash(all) != u32::from_le_bytes([crc[0], crc[1], crc[2], crc[3]]) {
            return Err(bad("checksum mismatch (damaged file)"));
        }
        let mut r = Reader(&all[8..]);
        let me = r.u32()?;
        let shards = r.u32()?;
        let epoch = r.u64()?;
        let next_doc = r.u64()?;
        let count = r.u32()?;
        let mut positions = Vec::with_capacity(count.min(1024) as usize);
        for _ in 0..count {
            let len = r.u32()? as usize;
            let stream = String::from_utf8(r.take(len)?.to_vec())
                .map_err(|_| bad("a stream name that is not UTF-8"))?;
            positions.push(Position {
                stream,
                partition: r.u32()? as i32,
                next: r.u64()? as i64,
            });
        }
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
