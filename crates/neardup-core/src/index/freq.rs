//! Document frequencies of signatures, streamed in bounded memory: on how many distinct
//! pages a signature occurs, overall and per host.
//!
//! Counted over the **unique** pages only (the canonical page of each cluster). A wire story
//! republished by fifty outlets is one unique page and forty-nine duplicates, so its phrases
//! count once; a notice, a promo paragraph or a cookie panel sits on many pages that are
//! *not* duplicates of each other, and its count grows with every one. That is the
//! difference between shared content and shared boilerplate, and it is what these counts
//! measure.
//!
//! Two count-min sketches (two 16-bit counters a key, in one cache line): one keyed by the signature,
//! one keyed by (host, signature), which also keeps each host's page count under a key of
//! its own. A count is the smaller of its two counters, so it is never below the true count
//! and above it only by the collisions of both rows. When a sketch has taken `width × 8`
//! additions since its last aging, every counter and the page counts are halved (the aging
//! of frequency sketches in cache admission): the counts then describe a window of recent
//! pages, the collision noise stays bounded however long the stream, and ratios (a count
//! against its page count) are kept. Everything is deterministic in the order the pages are
//! added, so a rebuild from the stored pages gives the same state as the live index had.
//!
//! Two uses (see [`Freq::common`] and [`Freq::template`]): SpotSigs' IDF band (a signature
//! on more than `N^0.8` of the last `N` pages, i.e. a normalised IDF below 0.2, says nothing
//! about which page it is on), and template text (a signature on at least half of a host's
//! pages, once the host has [`TEMPLATE_MIN_PAGES`]).

use std::io::{Read, Write};

/// Pages a host must have before any of its signatures is called template text (below
/// four, two pages sharing a notice would already be half of them).
pub const TEMPLATE_MIN_PAGES: u32 = 4;
/// Pages the index must have counted before the IDF band applies.
pub const BAND_MIN_PAGES: u32 = 1000;
/// The IDF band's exponent: a signature on more than `N^BAND_EXPONENT` of `N` pages is
/// outside it (SpotSigs kept normalised IDF ≥ 0.2).
pub const BAND_EXPONENT: f64 = 0.8;
/// Counters per row, log2, by default (two rows of 2^22 16-bit counters: 16 MiB a sketch).
pub const DEFAULT_WIDTH_LOG2: u32 = 22;

/// The key under which a host's page count is kept in the host sketch.
const PAGES_KEY: u64 = 0x7061_6765_735f_6b65;

fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The hash of a host name (lowercase, without `www.` and port).
pub fn host_hash(url: &str) -> u64 {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let mut host = &rest[..end];
    if let Some((_, h)) = host.rsplit_once('@') {
        host = h;
    }
    if let Some((h, port)) = host.rsplit_once(':') {
        if port.bytes().all(|b| b.is_ascii_digit()) {
            host = h;
        }
    }
    let lower = host.to_ascii_lowercase();
    let host = lower.strip_prefix("www.").unwrap_or(&lower);
    mix(u64::from(crc32fast::hash(host.as_bytes())) ^ 0x686f_7374 << 32)
}

/// One count-min sketch: two rows of saturating 16-bit counters, blocked (a key's two
/// counters share a 64-byte block; `2^log2 ≥ 16`).
#[derive(Clone, Debug, PartialEq)]
struct Sketch {
    log2: u32,
    counters: Vec<u16>,
    /// Additions since the last aging.
    added: u64,
}

impl Sketch {
    fn new(log2: u32) -> Sketch {
        let log2 = log2.max(4);
        Sketch {
            log2,
            counters: vec![0; 2 << log2],
            added: 0,
        }
    }

    /// The key's two counters: both in one block of 32 (one cache line), at two different
    /// places in it, so a lookup costs one memory access and not two.
    fn slots(&self, key: u64) -> [usize; 2] {
        let h = mix(key);
        let blocks = (2u64 << self.log2) / 32;
        let base = ((h & (blocks - 1)) * 32) as usize;
        let a = ((h >> 48) & 31) as usize;
        let b = (a + 1 + ((h >> 53) % 31) as usize) & 31;
        [base + a, base + b]
    }

    fn get(&self, key: u64) -> u32 {
        let [a, b] = self.slots(key);
        u32::from(self.counters[a].min(self.counters[b]))
    }

    /// Counts the key once; returns whether the sketch is due to age.
    fn add(&mut self, key: u64) -> bool {
        for s in self.slots(key) {
            self.counters[s] = self.counters[s].saturating_add(1);
        }
        self.added += 1;
        self.added >= 8u64 << self.log2
    }

    fn age(&mut self) {
        for c in &mut self.counters {
            *c >>= 1;
        }
        self.added = 0;
    }
}

/// Streamed document frequencies, overall and per host.
#[derive(Clone, Debug, PartialEq)]
pub struct Freq {
    overall: Sketch,
    host: Sketch,
    /// Unique pages counted (halved with the overall sketch).
    pages: u32,
}

impl Default for Freq {
    fn default() -> Self {
        Freq::new(DEFAULT_WIDTH_LOG2)
    }
}

impl Freq {
    /// Empty counts, `2^log2` counters a row.
    pub fn new(log2: u32) -> Freq {
        Freq {
            overall: Sketch::new(log2),
            host: Sketch::new(log2),
            pages: 0,
        }
    }

    /// Counts one unique page of `host` with the distinct signatures `sigs`. (Pages leaving
    /// the index by retention are not taken back out: aged counters hold a fraction of what
    /// a page put in, so the index counts the pages that stay again instead.)
    pub fn add(&mut self, host: u64, sigs: impl Iterator<Item = u32> + Clone) {
        let mut age_overall = false;
        let mut age_host = false;
        for s in sigs.clone() {
            age_overall |= self.overall.add(u64::from(s));
        }
        for s in sigs {
            age_host |= self.host.add(host ^ mix(u64::from(s)));
        }
        age_host |= self.host.add(host ^ PAGES_KEY);
        self.pages = self.pages.saturating_add(1);
        if age_overall {
            self.overall.age();
            self.pages >>= 1;
        }
        if age_host {
            self.host.age();
        }
    }

    /// Unique pages in the current window.
    pub fn pages(&self) -> u32 {
        self.pages
    }

    /// Unique pages of `host` in the current window (an upper bound).
    pub fn host_pages(&self, host: u64) -> u32 {
        self.host.get(host ^ PAGES_KEY)
    }

    /// Pages in the window carrying `sig` (an upper bound).
    pub fn count(&self, sig: u32) -> u32 {
        self.overall.get(u64::from(sig))
    }

    /// Pages of `host` in the window carrying `sig` (an upper bound).
    pub fn host_count(&self, host: u64, sig: u32) -> u32 {
        self.host.get(host ^ mix(u64::from(sig)))
    }

    /// The IDF band's bound: a signature on more of the window's `N` pages than this
    /// (`N^0.8`) is outside it; `None` before [`BAND_MIN_PAGES`].
    fn band(&self) -> Option<u32> {
        (self.pages >= BAND_MIN_PAGES).then(|| f64::from(self.pages).powf(BAND_EXPONENT) as u32)
    }

    /// Outside the IDF band ([`Freq::band`]).
    pub fn common(&self, sig: u32) -> bool {
        self.band().is_some_and(|b| self.count(sig) > b)
    }

    /// Template text of `host`: on at least half of its pages, once it has
    /// [`TEMPLATE_MIN_PAGES`] (`host_pages` from [`Freq::host_pages`]).
    pub fn template(&self, host: u64, host_pages: u32, sig: u32) -> bool {
        host_pages >= TEMPLATE_MIN_PAGES && 2 * self.host_count(host, sig) >= host_pages
    }

    /// Whether a signature of a page of `host` is used for matching: neither
    /// [`Freq::common`] nor [`Freq::template`], with the band and the host's page count
    /// worked out once for the page.
    pub fn filter(&self, host: u64) -> impl Fn(u32) -> bool + '_ {
        let band = self.band();
        let pages = self.host_pages(host);
        move |sig| band.is_none_or(|b| self.count(sig) <= b) && !self.template(host, pages, sig)
    }

    /// Memory held, bytes.
    pub fn bytes(&self) -> usize {
        2 * (self.overall.counters.len() + self.host.counters.len())
    }

    /// Writes the counts (layout: `log2` u32 LE, `pages` u32 LE, the two sketches' `added`
    /// u64 LE, then the overall and the host counters, u16 LE each).
    pub fn write_to(&self, w: &mut impl Write) -> std::io::Result<()> {
        w.write_all(&self.overall.log2.to_le_bytes())?;
        w.write_all(&self.pages.to_le_bytes())?;
        w.write_all(&self.overall.added.to_le_bytes())?;
        w.write_all(&self.host.added.to_le_bytes())?;
        let mut buf = Vec::with_capacity(self.overall.counters.len() * 2);
        for s in [&self.overall, &self.host] {
            buf.clear();
            for c in &s.counters {
                buf.extend_from_slice(&c.to_le_bytes());
            }
            w.write_all(&buf)?;
        }
        Ok(())
    }

    /// Reads what [`Freq::write_to`] wrote; `log2` must be the expected width.
    pub fn read_from(r: &mut impl Read, log2: u32) -> std::io::Result<Freq> {
        let bad = |m: String| std::io::Error::new(std::io::ErrorKind::InvalidData, m);
        let mut b4 = [0u8; 4];
        let mut b8 = [0u8; 8];
        r.read_exact(&mut b4)?;
        let got = u32::from_le_bytes(b4);
        if got != log2 {
            return Err(bad(format!(
                "frequency sketch of width 2^{got}, expected 2^{log2}"
            )));
        }
        r.read_exact(&mut b4)?;
        let pages = u32::from_le_bytes(b4);
        r.read_exact(&mut b8)?;
        let added_overall = u64::from_le_bytes(b8);
        r.read_exact(&mut b8)?;
        let added_host = u64::from_le_bytes(b8);
        let mut f = Freq::new(log2);
        f.pages = pages;
        f.overall.added = added_overall;
        f.host.added = added_host;
        let mut buf = vec![0u8; f.overall.counters.len() * 2];
        for s in [&mut f.overall, &mut f.host] {
            r.read_exact(&mut buf)?;
            for (c, b) in s.counters.iter_mut().zip(buf.chunks_exact(2)) {
                *c = u16::from_le_bytes([b[0], b[1]]);
            }
        }
        Ok(f)
    }
}

/// The frequencies snapshot, beside the database's files: written at a clean stop with the
/// lists snapshot, read back on open under the same rules (the index's epoch, and no more
/// documents than the index has), so that opening does not have to count every stored page
/// again.
pub const SNAPSHOT: &str = "freq.snapshot";

const MAGIC: &[u8; 8] = b"NDFREQ1\0";

/// What a snapshot was taken of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stamp {
    /// The index's `meta/lists_epoch` when it was taken.
    pub epoch: u64,
    /// The index's next document number: the pages below it are counted.
    pub next_doc: u64,
}

/// Writes `freq` to `path` (temporary file, fsync, rename). Layout (v1): the magic
/// `NDFREQ1\0`, epoch u64 LE, next_doc u64 LE, [`Freq::write_to`], CRC-32 of everything
/// before it, u32 LE.
pub fn save(freq: &Freq, path: &std::path::Path, stamp: Stamp) -> std::io::Result<()> {
    write_snapshot(path, MAGIC, stamp, freq.bytes(), |body| freq.write_to(body))
}

/// Reads a snapshot written by [`save`]; a damaged or foreign file is an error.
pub fn load(path: &std::path::Path, log2: u32) -> std::io::Result<(Freq, Stamp)> {
    read_snapshot(path, MAGIC, "frequencies", |rest| {
        Freq::read_from(rest, log2)
    })
}

/// Writes a snapshot file (temporary file, fsync, rename): `magic`, the stamp's epoch and
/// next_doc u64 LE, what `body` writes (about `size` bytes), CRC-32 of everything before
/// it, u32 LE.
pub(super) fn write_snapshot(
    path: &std::path::Path,
    magic: &[u8; 8],
    stamp: Stamp,
    size: usize,
    body: impl FnOnce(&mut Vec<u8>) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let mut out = Vec::with_capacity(size + 64);
    out.extend_from_slice(magic);
    out.extend_from_slice(&stamp.epoch.to_le_bytes());
    out.extend_from_slice(&stamp.next_doc.to_le_bytes());
    body(&mut out)?;
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    write_whole(path, &out)
}

/// Writes `bytes` to `path` whole or not at all: a temporary file beside it (its extension
/// `.tmp` after the path's own), synced, then renamed over it.
pub fn write_whole(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = std::path::PathBuf::from(tmp);
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)
}

/// Reads a snapshot file written by [`write_snapshot`] with `magic` (of `what`), its body
/// by `body`, which must read all of it; a damaged or foreign file is an error.
pub(super) fn read_snapshot<T>(
    path: &std::path::Path,
    magic: &[u8; 8],
    what: &str,
    body: impl FnOnce(&mut &[u8]) -> std::io::Result<T>,
) -> std::io::Result<(T, Stamp)> {
    let bad = |m: String| std::io::Error::new(std::io::ErrorKind::InvalidData, m);
    let bytes = std::fs::read(path)?;
    if bytes.len() < magic.len() + 20 || &bytes[..8] != magic {
        return Err(bad(format!("not a {what} snapshot")));
    }
    let (all, crc) = bytes.split_at(bytes.len() - 4);
    if crc32fast::hash(all) != u32::from_le_bytes([crc[0], crc[1], crc[2], crc[3]]) {
        return Err(bad("checksum mismatch (damaged file)".into()));
    }
    let le = |b: &[u8]| u64::from_le_bytes(b.try_into().unwrap_or([0; 8]));
    let stamp = Stamp {
        epoch: le(&all[8..16]),
        next_doc: le(&all[16..24]),
    };
    let mut rest = &all[24..];
    let value = body(&mut rest)?;
    if !rest.is_empty() {
        return Err(bad("trailing bytes".into()));
    }
    Ok((value, stamp))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_names_fold_case_www_and_port() {
        let a = host_hash("https://www.Example.com/a/b?c");
        assert_eq!(a, host_hash("http://example.com:8080/x"));
        assert_eq!(a, host_hash("example.com"));
        assert_ne!(a, host_hash("https://example.org/a"));
        assert_ne!(a, host_hash("https://news.example.com/a"));
    }

    #[test]
    fn counts_are_upper_bounds_and_exact_without_collisions() {
        let mut f = Freq::new(12);
        let h = host_hash("https://a.example/");
        for i in 0..40u32 {
            f.add(h, [1u32, 2, 100 + i].into_iter());
        }
        assert_eq!(f.pages(), 40);
        assert_eq!(f.host_pages(h), 40);
        assert_eq!(f.count(1), 40);
        assert_eq!(f.host_count(h, 2), 40);
        assert!(f.count(105) >= 1);
        assert_eq!(f.host_count(host_hash("b.example"), 1), 0);
        assert!(f.template(h, 40, 1));
        assert!(!f.template(h, 40, 105));
    }

    #[test]
    fn template_needs_pages_and_half_of_them() {
        let mut f = Freq::new(12);
        let h = host_hash("https://shop.example/");
        f.add(h, [5u32, 6].into_iter());
        f.add(h, [5u32, 7].into_iter());
        // two pages share 5, but a host of two pages says nothing yet
        assert!(!f.template(h, f.host_pages(h), 5));
        for i in 0..8u32 {
            f.add(h, [5u32, 100 + i].into_iter());
        }
        assert!(f.template(h, f.host_pages(h), 5));
        assert!(!f.filter(h)(5));
        assert!(f.filter(h)(100));
        assert!(!f.template(h, f.host_pages(h), 6));
        // another host with the same signature is not affected
        let o = host_hash("https://other.example/");
        assert!(!f.template(o, 10, 5));
    }

    #[test]
    fn the_band_applies_from_its_minimum_on_the_most_common_signatures() {
        let mut f = Freq::new(14);
        let h = host_hash("x.example");
        for i in 0..BAND_MIN_PAGES {
            // signature 1 on every page, 2 on one page in ten
            let sigs = if i % 10 == 0 {
                vec![1, 2, 1_000 + i]
            } else {
                vec![1, 1_000 + i]
            };
            f.add(h, sigs.into_iter());
            if i + 1 < BAND_MIN_PAGES {
                assert!(!f.common(1));
            }
        }
        assert!(f.common(1));
        assert!(!f.common(2));
        assert!(!f.common(1_500));
    }

    #[test]
    fn aging_halves_counts_and_keeps_ratios() {
        let mut f = Freq::new(4); // 16 counters a row: ages after 128 additions
        let h = host_hash("a.example");
        for _ in 0..42 {
            f.add(h, [1u32, 2, 3].into_iter());
        }
        // 126 additions of signatures + 0: not aged yet in the overall sketch
        assert_eq!(f.pages(), 42);
        f.add(h, [1u32, 2, 3].into_iter());
        assert!(f.pages() < 43, "aged: {}", f.pages());
        assert!(f.count(1) >= f.pages());
        assert!(f.template(h, f.host_pages(h), 1));
    }

    #[test]
    fn snapshot_round_trip_and_damage_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(SNAPSHOT);
        let mut f = Freq::new(8);
        f.add(host_hash("a.example"), [3u32, 4].into_iter());
        let stamp = Stamp {
            epoch: 42,
            next_doc: 7,
        };
        save(&f, &path, stamp).unwrap();
        let (g, s) = load(&path, 8).unwrap();
        assert_eq!((g, s), (f, stamp));
        assert!(load(&path, 9).is_err());
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[40] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        assert!(load(&path, 8).unwrap_err().to_string().contains("checksum"));
        std::fs::write(&path, &bytes[..10]).unwrap();
        assert!(load(&path, 8).is_err());
    }

    #[test]
    fn write_read_round_trip_and_width_check() {
        let mut f = Freq::new(10);
        for i in 0..300u32 {
            f.add(
                host_hash(&format!("h{}.example", i % 7)),
                [i, i / 3, 9].into_iter(),
            );
        }
        let mut buf = Vec::new();
        f.write_to(&mut buf).unwrap();
        let g = Freq::read_from(&mut buf.as_slice(), 10).unwrap();
        assert_eq!(f, g);
        assert!(Freq::read_from(&mut buf.as_slice(), 11).is_err());
        assert!(Freq::read_from(&mut &buf[..buf.len() - 1], 10).is_err());
    }
}
