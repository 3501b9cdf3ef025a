//! Reading JSONL input: a file or stdin, plain or gzip (detected by its magic bytes).

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;

use anyhow::{Context, Result};

/// Opens `path` (`-` for stdin), decompressing gzip transparently.
pub fn open(path: &Path) -> Result<Box<dyn BufRead + Send>> {
    let raw: Box<dyn Read + Send> = if path.as_os_str() == "-" {
        Box::new(io::stdin())
    } else {
        Box::new(File::open(path).with_context(|| format!("cannot open input {}", path.display()))?)
    };
    let mut buf = BufReader::with_capacity(1 << 20, raw);
    let magic = buf.fill_buf().context("cannot read input")?;
    if magic.starts_with(&[0x1f, 0x8b]) {
        Ok(Box::new(BufReader::with_capacity(
            1 << 20,
            flate2::bufread::MultiGzDecoder::new(buf),
        )))
    } else {
        Ok(Box::new(buf))
    }
}

/// One input line: its 1-based number and bytes without the `\n` (and a `\r` before it).
pub struct Line {
    /// 1-based line number.
    pub number: u64,
    /// The bytes (only the first `max_line_bytes + 1` of a longer line).
    pub bytes: Vec<u8>,
    /// Length of the whole line in bytes.
    pub len: u64,
}

impl Line {
    /// Whether the line was longer than the limit it was read with (only its start is kept).
    pub fn cut(&self) -> bool {
        self.len > self.bytes.len() as u64
    }
}

/// Reads one line, keeping at most `keep` bytes of it (the rest is read and dropped, so
/// memory follows the limit, not the line). Returns the line's full length, 0 at the end.
fn read_line_capped(
    r: &mut dyn BufRead,
    line: &mut Vec<u8>,
    keep: usize,
) -> io::Result<(u64, bool)> {
    let mut total = 0u64;
    loop {
        let (done, used) = {
            let buf = match r.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if buf.is_empty() {
                return Ok((total, false));
            }
            let (done, used) = match memchr::memchr(b'\n', buf) {
                Some(i) => (true, i + 1),
                None => (false, buf.len()),
            };
            let room = keep.saturating_sub(line.len());
            line.extend_from_slice(&buf[..used.min(room)]);
            (done, used)
        };
        r.consume(used);
        total += used as u64;
        if done {
            return Ok((total, true));
        }
    }
}

/// Reads up to `max_lines` lines or about `max_bytes` bytes; an empty batch means the end.
/// Lines are split on `\n` only (strings may hold other Unicode line separators).
/// Lines longer than `max_line_bytes` keep only their first `max_line_bytes + 1` bytes.
pub fn read_batch(
    r: &mut dyn BufRead,
    next_number: &mut u64,
    max_lines: usize,
    max_bytes: usize,
    max_line_bytes: usize,
) -> Result<Vec<Line>> {
    let mut out = Vec::new();
    let mut bytes = 0;
    let keep = max_line_bytes.saturating_add(2); // room for a trailing \r\n
    while out.len() < max_lines && bytes < max_bytes {
        let mut line = Vec::new();
        let (n, newline) = read_line_capped(r, &mut line, keep).context("cannot read input")?;
        if n == 0 {
            break;
        }
        *next_number += 1;
        let mut len = n;
        let whole = n == line.len() as u64;
        if whole && line.last() == Some(&b'\n') {
            line.pop();
            len -= 1;
            if line.last() == Some(&b'\r') {
                line.pop();
                len -= 1;
            }
        } else if !whole && newline {
            len -= 1;
            if line.len() as u64 == n - 1 && line.last() == Some(&b'\r') {
                len -= 1;
            }
        }
        line.truncate(max_line_bytes.saturating_add(1));
        bytes += line.len();
        out.push(Line {
            number: *next_number,
            bytes: line,
            len,
        });
    }
    Ok(out)
}

/// Parses every non-blank line of a JSONL file (plain or gzip) as a `T`, in order, until
/// `visit` returns false; a line that does not parse is an error naming the file and line.
pub fn for_each_json<T: serde::de::DeserializeOwned>(
    path: &Path,
    mut visit: impl FnMut(T) -> bool,
) -> Result<()> {
    let mut reader = open(path)?;
    let mut n = 0u64;
    loop {
        let batch = read_batch(&mut reader, &mut n, 10_000, 1 << 30, usize::MAX)?;
        if batch.is_empty() {
            return Ok(());
        }
        for l in batch {
            if l.bytes.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let v: T = serde_json::from_slice(&l.bytes)
                .with_context(|| format!("{} line {}", path.display(), l.number))?;
            if !visit(v) {
                return Ok(());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_lines_keep_only_their_start_and_their_length() {
        let data = format!("short\r\n{}\nlast", "x".repeat(10_000));
        let mut r = io::BufReader::with_capacity(64, data.as_bytes());
        let mut n = 0;
        let lines = read_batch(&mut r, &mut n, 10, 1 << 20, 100).unwrap();
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[0].bytes, b"short");
        assert!(!lines[0].cut());
        assert_eq!(lines[1].bytes.len(), 101);
        assert_eq!(lines[1].len, 10_000);
        assert!(lines[1].cut());
        assert_eq!((lines[2].number, &lines[2].bytes[..]), (3, &b"last"[..]));
        assert_eq!(lines[2].len, 4);
    }
}
