//! The state files of a sharded decider's roles, written at a clean stop so that the next
//! start takes up from where it stopped instead of reading the whole stream again: a shard's
//! ([`ShardState`], what a [`super::sharded::Shard`] holds beside its index, written with the
//! index's snapshots) and the aggregator's ([`AggregatorState`], which pages it decided
//! unique, beside its decisions on disk: [`super::decided`]).
//!
//! A shard's state is a function of the records read, in order: the signed pages (its index
//! with the ids read, the software-text counts of every page, the copy keys) and the decisions
//! (the duplicates it owns, taken out of its lists or waiting). The file names the position
//! in each stream it is of, and the index's stamp (lists epoch, next document number) it was
//! written with. It is used once: the stage removes it before the index changes again, so a
//! shard killed later starts empty and reads the stream from its start, as without one.
//!
//! Both files are written and read a buffer at a time (a role's sets move into its state at
//! its stop, never copied: a clean stop needs no more memory than the role held), with a
//! CRC-32 over every byte before it at the end.
//!
//! Shard layout (version 2), little-endian: the magic `NDSHRD2\0`; shard and shards (u32
//! each); the index's epoch and next document number (u64 each); the positions (u32 count,
//! then each: u32 name length, the name's bytes, partition i32, next offset i64); the probes
//! (two u128: the id hash of a fixed id and the copy key of a fixed page, under this build's
//! hashing); the copy keys' two seeds (u64 each); the copies stored (u64); the count of ids
//! read (u64: their hashes are in the index, [`super::seen`]); then the decided duplicates
//! waiting and the copy keys of the pages stored unique (each a u64 count and as many u128);
//! CRC-32 of everything before it, u32. Version 1 held the ids' hashes here: a file of it is
//! refused as of another version, and the shard reads its topics again from their start.

use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use rustc_hash::FxHashSet;

/// The state file's name, in the shard's index directory.
pub const STATE_FILE: &str = "shard.state";

const MAGIC: &[u8; 8] = b"NDSHRD2\0";

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
    /// The id hash of a fixed id and the copy key of a fixed page under the hashing of the
    /// build that wrote the file: a build that hashes otherwise refuses the file.
    pub probes: [u128; 2],
    pub seeds: [u64; 2],
    pub copies: u64,
    /// How many ids the shard read (their hashes are in its index: [`super::seen`]).
    pub ids: u64,
    pub pending: FxHashSet<u128>,
    pub keys: FxHashSet<u128>,
}

fn bad(m: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, m.into())
}

/// A file written a buffer at a time beside its place, with a running CRC-32: [`Out::finish`]
/// appends the CRC, syncs it, renames it over the place and syncs the directory, so the file
/// is there whole or not at all.
struct Out {
    w: BufWriter<File>,
    crc: crc32fast::Hasher,
    tmp: PathBuf,
    path: PathBuf,
}

impl Out {
    fn create(path: &Path, magic: &[u8; 8]) -> io::Result<Out> {
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        let mut out = Out {
            w: BufWriter::with_capacity(1 << 20, File::create(&tmp)?),
            crc: crc32fast::Hasher::new(),
            tmp,
            path: path.to_path_buf(),
        };
        out.put(magic)?;
        Ok(out)
    }

    fn put(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.crc.update(bytes);
        self.w.write_all(bytes)
    }

    fn str(&mut self, s: &str) -> io::Result<()> {
        let len = u32::try_from(s.len()).map_err(|_| bad("a string too long"))?;
        self.put(&len.to_le_bytes())?;
        self.put(s.as_bytes())
    }

    fn positions(&mut self, positions: &[Position]) -> io::Result<()> {
        let count = u32::try_from(positions.len()).map_err(|_| bad("too many positions"))?;
        self.put(&count.to_le_bytes())?;
        for p in positions {
            self.str(&p.stream)?;
            self.put(&p.partition.to_le_bytes())?;
            self.put(&p.next.to_le_bytes())?;
        }
        Ok(())
    }

    fn set(&mut self, set: &FxHashSet<u128>) -> io::Result<()> {
        self.put(&(set.len() as u64).to_le_bytes())?;
        for v in set {
            self.put(&v.to_le_bytes())?;
        }
        Ok(())
    }

    fn finish(mut self) -> io::Result<()> {
        let crc = self.crc.clone().finalize();
        self.w.write_all(&crc.to_le_bytes())?;
        let f = self
            .w
            .into_inner()
            .map_err(io::IntoInnerError::into_error)?;
        f.sync_all()?;
        drop(f);
        std::fs::rename(&self.tmp, &self.path)?;
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            File::open(dir)?.sync_all()?;
        }
        Ok(())
    }
}

/// A file written by [`Out`], read a buffer at a time: every byte but the last four goes
/// through the running CRC-32, which [`In::finish`] checks against them.
struct In {
    r: BufReader<File>,
    crc: crc32fast::Hasher,
    /// Bytes left before the CRC.
    left: u64,
}

impl In {
    fn open(path: &Path, magic: &[u8; 8], what: &str) -> io::Result<In> {
        let f = File::open(path)?;
        let len = f.metadata()?.len();
        let mut r = In {
            r: BufReader::with_capacity(1 << 20, f),
            crc: crc32fast::Hasher::new(),
            left: len.saturating_sub(4),
        };
        if len < magic.len() as u64 + 4 || &r.take::<8>()? != magic {
            return Err(bad(format!("not {what} (or of another version)")));
        }
        Ok(r)
    }

    fn read(&mut self, buf: &mut [u8]) -> io::Result<()> {
        if (buf.len() as u64) > self.left {
            return Err(bad("truncated"));
        }
        self.r.read_exact(buf)?;
        self.crc.update(buf);
        self.left -= buf.len() as u64;
        Ok(())
    }

    fn take<const N: usize>(&mut self) -> io::Result<[u8; N]> {
        let mut b = [0u8; N];
        self.read(&mut b)?;
        Ok(b)
    }

    fn u32(&mut self) -> io::Result<u32> {
        Ok(u32::from_le_bytes(self.take()?))
    }

    fn u64(&mut self) -> io::Result<u64> {
        Ok(u64::from_le_bytes(self.take()?))
    }

    fn u128(&mut self) -> io::Result<u128> {
        Ok(u128::from_le_bytes(self.take()?))
    }

    fn string(&mut self) -> io::Result<String> {
        let len = self.u32()? as usize;
        if len as u64 > self.left {
            return Err(bad("truncated"));
        }
        let mut b = vec![0u8; len];
        self.read(&mut b)?;
        String::from_utf8(b).map_err(|_| bad("a string that is not UTF-8"))
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

    /// A count of items of `size` bytes each, refused past what the file holds.
    fn count(&mut self, size: u64, what: &str) -> io::Result<u64> {
        let n = self.u64()?;
        if n > self.left / size {
            return Err(bad(format!("{what} longer than the file")));
        }
        Ok(n)
    }

    fn set(&mut self) -> io::Result<FxHashSet<u128>> {
        let n = self.count(16, "a set")?;
        let mut set = FxHashSet::default();
        set.reserve(n as usize);
        for _ in 0..n {
            set.insert(self.u128()?);
        }
        Ok(set)
    }

    fn finish(mut self) -> io::Result<()> {
        if self.left != 0 {
            return Err(bad("trailing bytes"));
        }
        let mut crc = [0u8; 4];
        self.r.read_exact(&mut crc)?;
        if self.crc.finalize() != u32::from_le_bytes(crc) {
            return Err(bad("checksum mismatch (damaged file)"));
        }
        Ok(())
    }
}

/// What a shard's state file holds, borrowed: [`save_shard`] writes it from a clean stop's
/// [`ShardState`] and from a running shard's sets alike (a checkpoint), never copied.
pub struct ShardParts<'a> {
    pub me: u32,
    pub shards: u32,
    pub epoch: u64,
    pub next_doc: u64,
    pub positions: &'a [Position],
    pub probes: [u128; 2],
    pub seeds: [u64; 2],
    pub copies: u64,
    pub ids: u64,
    pub pending: &'a FxHashSet<u128>,
    pub keys: &'a FxHashSet<u128>,
}

/// Writes a shard's state file to `path` (a temporary file, synced, renamed over it, the
/// directory synced), in the layout above.
pub fn save_shard(path: &Path, p: ShardParts<'_>) -> io::Result<()> {
    let mut out = Out::create(path, MAGIC)?;
    out.put(&p.me.to_le_bytes())?;
    out.put(&p.shards.to_le_bytes())?;
    out.put(&p.epoch.to_le_bytes())?;
    out.put(&p.next_doc.to_le_bytes())?;
    out.positions(p.positions)?;
    for v in p.probes {
        out.put(&v.to_le_bytes())?;
    }
    for v in p.seeds {
        out.put(&v.to_le_bytes())?;
    }
    out.put(&p.copies.to_le_bytes())?;
    out.put(&p.ids.to_le_bytes())?;
    for set in [p.pending, p.keys] {
        out.set(set)?;
    }
    out.finish()
}

impl ShardState {
    /// Writes the state to `path` (a temporary file, synced, renamed over it, the directory
    /// synced).
    pub fn save(&self, path: &Path) -> io::Result<()> {
        save_shard(
            path,
            ShardParts {
                me: self.me,
                shards: self.shards,
                epoch: self.epoch,
                next_doc: self.next_doc,
                positions: &self.positions,
                probes: self.probes,
                seeds: self.seeds,
                copies: self.copies,
                ids: self.ids,
                pending: &self.pending,
                keys: &self.keys,
            },
        )
    }

    /// Reads a state file written by [`ShardState::save`]; a damaged or foreign file is an
    /// error that says so.
    pub fn load(path: &Path) -> io::Result<ShardState> {
        let mut r = In::open(path, MAGIC, "a shard state file")?;
        let me = r.u32()?;
        let shards = r.u32()?;
        let epoch = r.u64()?;
        let next_doc = r.u64()?;
        let positions = r.positions()?;
        let probes = [r.u128()?, r.u128()?];
        let seeds = [r.u64()?, r.u64()?];
        let copies = r.u64()?;
        let ids = r.u64()?;
        let (pending, keys) = (r.set()?, r.set()?);
        r.finish()?;
        Ok(ShardState {
            me,
            shards,
            epoch,
            next_doc,
            positions,
            probes,
            seeds,
            copies,
            ids,
            pending,
            keys,
        })
    }
}

/// The aggregator's state file's name, in its directory.
pub const AGGREGATOR_STATE_FILE: &str = "aggregator.state";

/// The directory of the aggregator's store of decisions, beside its state file
/// ([`super::decided`]).
pub const AGGREGATOR_DECISIONS: &str = "decisions";

const AGGREGATOR_MAGIC: &[u8; 8] = b"NDAGGR2\0";

/// What the aggregator ([`super::sharded::Aggregator`]) holds beside its store of decisions
/// ([`super::decided`]), and what it is of.
///
/// Layout (version 2), little-endian: the magic `NDAGGR2\0`; shards (u32); the positions (as
/// in [`ShardState`]: the signed topic's first, then each votes partition's); the probe (u128:
/// the id hash of a fixed id under this build's hashing); the unique bits (u64 count, then
/// the words, u64 each: bit `pos` set when the page at stream position `pos` was decided
/// unique); the stamp of the store of decisions (u128) and the count of decisions it held
/// (u64); CRC-32 of everything before it, u32. Version 1 held every decision here: a file of
/// it is refused as of another version, and the aggregator reads its topics again from their
/// start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AggregatorState {
    pub shards: u32,
    pub positions: Vec<Position>,
    pub probe: u128,
    pub unique: Vec<u64>,
    /// The stamp of the store of decisions the state is of.
    pub stamp: u128,
    /// The decisions that store held when the state was written.
    pub written: u64,
}

impl AggregatorState {
    /// Writes the state to `path` (a temporary file, synced, renamed over it, the directory
    /// synced).
    pub fn save(&self, path: &Path) -> io::Result<()> {
        save_aggregator(
            path,
            AggregatorParts {
                shards: self.shards,
                positions: &self.positions,
                probe: self.probe,
                unique: &self.unique,
                stamp: self.stamp,
                written: self.written,
            },
        )
    }

    /// Reads a state file written by [`AggregatorState::save`]; a damaged or foreign file is
    /// an error that says so.
    pub fn load(path: &Path) -> io::Result<AggregatorState> {
        let mut r = In::open(path, AGGREGATOR_MAGIC, "an aggregator state file")?;
        let shards = r.u32()?;
        let positions = r.positions()?;
        let probe = r.u128()?;
        let words = r.count(8, "the unique bits")?;
        let unique = (0..words).map(|_| r.u64()).collect::<io::Result<_>>()?;
        let stamp = r.u128()?;
        let written = r.u64()?;
        r.finish()?;
        Ok(AggregatorState {
            shards,
            positions,
            probe,
            unique,
            stamp,
            written,
        })
    }
}

/// Whether `positions` name the signed topic's partition and each of `parts` (a stream
/// and partition each), so that a state is of the streams this process reads; a state that
/// names another signed topic is of another stream.
pub fn names_all(positions: &[Position], parts: &[(&str, i32)]) -> bool {
    parts
        .iter()
        .all(|&(t, p)| positions.iter().any(|q| q.stream == t && q.partition == p))
}

/// The offset `positions` give each of `parts` (a stream and partition each): where a
/// state left off in it, 0 (its start) for one they do not name.
pub fn offsets_of(positions: &[Position], parts: &[(&str, i32)]) -> Vec<i64> {
    parts
        .iter()
        .map(|&(t, p)| {
            positions
                .iter()
                .find(|q| q.stream == t && q.partition == p)
                .map_or(0, |q| q.next)
        })
        .collect()
}

/// What an aggregator state file holds, borrowed from where it is kept: an
/// [`AggregatorState`] read back, or the running aggregator
/// ([`super::sharded::Aggregator::save`], which writes it while it goes on deciding).
pub struct AggregatorParts<'a> {
    pub shards: u32,
    pub positions: &'a [Position],
    pub probe: u128,
    pub unique: &'a [u64],
    pub stamp: u128,
    pub written: u64,
}

/// Writes an aggregator state file (layout at [`AggregatorState`]) to `path`: a temporary
/// file, synced, renamed over it, the directory synced, so that a kill while it is written
/// leaves the file before it whole.
pub fn save_aggregator(path: &Path, s: AggregatorParts<'_>) -> io::Result<()> {
    let mut out = Out::create(path, AGGREGATOR_MAGIC)?;
    out.put(&s.shards.to_le_bytes())?;
    out.positions(s.positions)?;
    out.put(&s.probe.to_le_bytes())?;
    out.put(&(s.unique.len() as u64).to_le_bytes())?;
    for w in s.unique {
        out.put(&w.to_le_bytes())?;
    }
    out.put(&s.stamp.to_le_bytes())?;
    out.put(&s.written.to_le_bytes())?;
    out.finish()
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
            ids: 100,
            pending: [42].into_iter().collect(),
            keys: FxHashSet::default(),
        }
    }

    #[test]
    fn a_state_round_trips_and_a_damaged_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(STATE_FILE);
        let s = state();
        s.save(&path).unwrap();
        assert_eq!(ShardState::load(&path).unwrap(), s);
        assert!(names_all(&s.positions, &[("signed", 0)]));
        assert!(!names_all(&s.positions, &[("other-signed", 0)]));
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[40] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        let e = ShardState::load(&path).unwrap_err().to_string();
        assert!(e.contains("checksum"), "{e}");
        std::fs::write(&path, b"NDSOFT2\0 something else entirely").unwrap();
        let e = ShardState::load(&path).unwrap_err().to_string();
        assert!(e.contains("not a shard state file"), "{e}");
        for cut in [30, bytes.len() - 5, bytes.len() - 1] {
            std::fs::write(&path, &bytes[..cut]).unwrap();
            assert!(ShardState::load(&path).is_err(), "cut at {cut}");
        }
    }
}
