//! A copy of the in-memory lists in a file, so that opening a large index reads the lists
//! instead of rebuilding them from every stored signature set (a query a document: minutes
//! at ten million documents).
//!
//! # File layout, version 2 (all integers little-endian)
//!
//! | bytes | field |
//! |---|---|
//! | 8 | magic `NDLISTS\0` |
//! | 4 | version, 2 |
//! | 8 | τ as the bits of an IEEE 754 double |
//! | 1 | count filter: 1 for the Jaccard measure, 0 for the weighted one |
//! | 8 | epoch of the index (`meta/lists_epoch`) the lists were taken from |
//! | 8 | `next_doc` of the index when taken: the lists hold every unique document below it |
//! | 8 | postings, 8 documents |
//! | 4 | bits of the presence map |
//! | 8 + 8 + 4·n | n, the first document number b, then the set length of documents b … b+n−1 (0: not in the lists) |
//! | 65,536 × (4 + 6·k) | per shard: k, then k low 16-bit halves of signatures, then the low 32 bits of k document numbers, sorted by (low half, those bits) |
//! | 4 | CRC-32 of every byte before it |
//!
//! The presence map is not stored: it is set again from the entries as they are read.
//! Version 1 had no b: its lengths start at document 0, and it is read as such.
//!
//! A snapshot is only a cache of what the `docs` family holds. It is used when its τ and
//! filter match, its epoch equals the index's (the epoch changes whenever documents are
//! removed, so lists taken before a removal are never used after it) and its `next_doc` is
//! not beyond the index's; the documents numbered from its `next_doc` on are then entered
//! in order, as a running stage would have entered them. Anything else (a torn or foreign
//! file, a checksum mismatch, another epoch) is reported and the lists are rebuilt from
//! `docs`: a snapshot can make opening faster, never change a decision.

use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::Path;

use super::layout::SHARD_BITS;
use super::{presence, Lists, Presence, Recent, Shard};

const MAGIC: &[u8; 8] = b"NDLISTS\0";
/// Version of the snapshot layout.
pub const VERSION: u32 = 2;
/// Values converted a chunk at a time.
const CHUNK: usize = 1 << 14;

/// Which state of the index a snapshot holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    /// The index's `meta/lists_epoch` when the lists were taken.
    pub epoch: u64,
    /// The index's `next_doc` when the lists were taken.
    pub next_doc: u64,
}

/// Writes through a CRC-32.
struct Summed<W: Write> {
    inner: W,
    crc: crc32fast::Hasher,
}

impl<W: Write> Summed<W> {
    fn put(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.crc.update(bytes);
        self.inner.write_all(bytes)
    }
}

/// Reads through a CRC-32, knowing how many bytes the file has left, so that a length
/// read from a damaged file cannot ask for more memory than the file could fill.
struct Checked<R: Read> {
    inner: R,
    crc: crc32fast::Hasher,
    left: u64,
}

impl<R: Read> Checked<R> {
    fn take(&mut self, buf: &mut [u8]) -> io::Result<()> {
        self.inner.read_exact(buf)?;
        self.crc.update(buf);
        self.left = self.left.saturating_sub(buf.len() as u64);
        Ok(())
    }

    /// Fails unless `n` values of `size` bytes can still follow.
    fn fits(&self, n: usize, size: u64) -> io::Result<()> {
        if (n as u64).saturating_mul(size) > self.left {
            return Err(invalid(format!(
                "{n} values announced, the file has {} bytes left",
                self.left
            )));
        }
        Ok(())
    }

    fn u8(&mut self) -> io::Result<u8> {
        let mut b = [0u8; 1];
        self.take(&mut b)?;
        Ok(b[0])
    }

    fn u32(&mut self) -> io::Result<u32> {
        let mut b = [0u8; 4];
        self.take(&mut b)?;
        Ok(u32::from_le_bytes(b))
    }

    fn u64(&mut self) -> io::Result<u64> {
        let mut b = [0u8; 8];
        self.take(&mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    fn values<T: Le>(&mut self, n: usize, out: &mut Vec<T>, buf: &mut Vec<u8>) -> io::Result<()> {
        self.fits(n, T::SIZE as u64)?;
        let at = out.len();
        out.resize(at + n, T::ZERO);
        self.fill(&mut out[at..], buf)
    }

    /// Reads `out.len()` values into `out` (the caller checked that they fit: [`Self::fits`]).
    fn fill<T: Le>(&mut self, out: &mut [T], buf: &mut Vec<u8>) -> io::Result<()> {
        for chunk in out.chunks_mut(CHUNK) {
            buf.resize(chunk.len() * T::SIZE, 0);
            self.take(buf)?;
            for (v, b) in chunk.iter_mut().zip(buf.chunks_exact(T::SIZE)) {
                *v = T::get(b);
            }
        }
        Ok(())
    }
}

/// The arrays' element types, written little-endian.
trait Le: Copy {
    const SIZE: usize;
    const ZERO: Self;
    fn put(self, out: &mut Vec<u8>);
    fn get(bytes: &[u8]) -> Self;
}

impl Le for u16 {
    const SIZE: usize = 2;
    const ZERO: u16 = 0;
    fn put(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
    fn get(b: &[u8]) -> u16 {
        u16::from_le_bytes([b[0], b[1]])
    }
}

impl Le for u32 {
    const SIZE: usize = 4;
    const ZERO: u32 = 0;
    fn put(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
    fn get(b: &[u8]) -> u32 {
        u32::from_le_bytes([b[0], b[1], b[2], b[3]])
    }
}

fn put_values<W: Write, T: Le>(w: &mut Summed<W>, v: &[T], buf: &mut Vec<u8>) -> io::Result<()> {
    for chunk in v.chunks(CHUNK) {
        buf.clear();
        for &x in chunk {
            x.put(buf);
        }
        w.put(buf)?;
    }
    Ok(())
}

fn invalid(what: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.into())
}

impl Lists {
    /// Writes the lists to `path` (through a temporary file renamed into place, synced), each
    /// shard's entries merged as they are written ([`Shard::with_entries`]); the lists are
    /// left as they were.
    pub fn save(&self, path: &Path, stamp: Stamp) -> io::Result<()> {
        let tmp = path.with_extension("tmp");
        let file = File::create(&tmp)?;
        let mut w = Summed {
            inner: BufWriter::with_capacity(1 << 20, file),
            crc: crc32fast::Hasher::new(),
        };
        let mut buf = Vec::with_capacity(CHUNK * 4);
        w.put(MAGIC)?;
        w.put(&VERSION.to_le_bytes())?;
        w.put(&self.tau.to_bits().to_le_bytes())?;
        w.put(&[u8::from(self.count_filter)])?;
        w.put(&stamp.epoch.to_le_bytes())?;
        w.put(&stamp.next_doc.to_le_bytes())?;
        w.put(&self.postings.to_le_bytes())?;
        w.put(&self.documents.to_le_bytes())?;
        w.put(&self.presence.bits().to_le_bytes())?;
        w.put(&(self.lens.len() as u64).to_le_bytes())?;
        w.put(&self.base.to_le_bytes())?;
        put_values(&mut w, &self.lens, &mut buf)?;
        for sh in &self.shards {
            sh.with_entries(|lo, doc| {
                let k = u32::try_from(lo.len()).map_err(|_| invalid("shard too large"))?;
                w.put(&k.to_le_bytes())?;
                put_values(&mut w, lo, &mut buf)?;
                put_values(&mut w, doc, &mut buf)
            })?;
        }
        let crc = w.crc.clone().finalize();
        w.inner.write_all(&crc.to_le_bytes())?;
        let file = w.inner.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        drop(file);
        std::fs::rename(&tmp, path)?;
        if let Some(dir) = path.parent() {
            // the rename itself is durable once the directory is synced
            if let Ok(d) = File::open(dir) {
                let _ = d.sync_all();
            }
        }
        Ok(())
    }

    /// Reads lists saved by [`Lists::save`] for threshold `tau` and filter `count_filter`.
    /// Any mismatch or damage is an error (the caller rebuilds instead).
    pub fn load(path: &Path, tau: f64, count_filter: bool) -> io::Result<(Lists, Stamp)> {
        let file = File::open(path)?;
        let left = file.metadata()?.len();
        let mut r = Checked {
            inner: BufReader::with_capacity(1 << 20, file),
            crc: crc32fast::Hasher::new(),
            left,
        };
        let mut magic = [0u8; 8];
        r.take(&mut magic)?;
        if &magic != MAGIC {
            return Err(invalid("not a lists snapshot"));
        }
        let version = r.u32()?;
        if !(1..=VERSION).contains(&version) {
            return Err(invalid(format!(
                "snapshot version {version}, this build reads 1 to {VERSION}"
            )));
        }
        let file_tau = f64::from_bits(r.u64()?);
        let file_filter = r.u8()? == 1;
        if file_tau.to_bits() != tau.to_bits() || file_filter != count_filter {
            return Err(invalid(format!(
                "snapshot taken for tau {file_tau} (count filter {file_filter}), \
                 the index has tau {tau} (count filter {count_filter})"
            )));
        }
        let stamp = Stamp {
            epoch: r.u64()?,
            next_doc: r.u64()?,
        };
        let postings = r.u64()?;
        let documents = r.u64()?;
        let bits = r.u32()?;
        if !(presence::MIN_BITS..=presence::MAX_BITS).contains(&bits) {
            return Err(invalid(format!("presence map of {bits} bits")));
        }
        let n = usize::try_from(r.u64()?).map_err(|_| invalid("lengths"))?;
        if n as u64 > super::MAX_SPAN + 1 {
            return Err(invalid("more documents than the lists hold"));
        }
        // version 1 gave the lengths from document 0
        let base = if version >= 2 { r.u64()? } else { 0 };
        let mut buf = Vec::with_capacity(CHUNK * 4);
        let mut lists = Lists::new(tau, count_filter).map_err(|e| invalid(e.to_string()))?;
        r.values(n, &mut lists.lens, &mut buf)?;
        lists.base = base;
        let mut presence = Presence::with_bits(bits);
        let mut total = 0u64;
        // one shard's entries at a time, packed into its base as they are read
        let (mut lo, mut doc) = (Vec::<u16>::new(), Vec::<u32>::new());
        for (h, sh) in lists.shards.iter_mut().enumerate() {
            let k = r.u32()? as usize;
            total += k as u64;
            if total > postings {
                return Err(invalid("more entries than postings"));
            }
            r.fits(k, 6)?;
            lo.resize(k, 0);
            doc.resize(k, 0);
            r.fill(&mut lo, &mut buf)?;
            r.fill(&mut doc, &mut buf)?;
            let sorted = lo
                .windows(2)
                .zip(doc.windows(2))
                .all(|(l, d)| (l[0], d[0]) < (l[1], d[1]));
            if !sorted
                || doc
                    .iter()
                    .any(|&d| d.wrapping_sub(base as u32) as usize >= n)
            {
                return Err(invalid(format!("shard {h} out of order")));
            }
            let s = Shard::from_sorted(&lo, &doc);
            let top = (h as u32) << (32 - SHARD_BITS);
            for &l in &lo {
                presence.set(top | u32::from(l));
            }
            *sh = s;
        }
        let crc = r.crc.clone().finalize();
        let mut stored = [0u8; 4];
        r.inner.read_exact(&mut stored)?;
        if u32::from_le_bytes(stored) != crc {
            return Err(invalid("checksum mismatch"));
        }
        if total != postings {
            return Err(invalid("fewer entries than postings"));
        }
        lists.postings = postings;
        lists.documents = documents;
        lists.recent = Recent::for_presence(presence.bits());
        lists.presence = presence;
        Ok((lists, stamp))
    }
}
