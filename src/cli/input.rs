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
    /// The bytes.
    pub bytes: Vec<u8>,
}

/// Reads up to `max_lines` lines or about `max_bytes` bytes; an empty batch means the end.
/// Lines are split on `\n` only (strings may hold other Unicode line separators).
pub fn read_batch(
    r: &mut dyn BufRead,
    next_number: &mut u64,
    max_lines: usize,
    max_bytes: usize,
) -> Result<Vec<Line>> {
    let mut out = Vec::new();
    let mut bytes = 0;
    while out.len() < max_lines && bytes < max_bytes {
        let mut line = Vec::new();
        let n = r
            .read_until(b'\n', &mut line)
            .context("cannot read input")?;
        if n == 0 {
            break;
        }
        *next_number += 1;
        if line.last() == Some(&b'\n') {
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
        }
        bytes += line.len();
        out.push(Line {
            number: *next_number,
            bytes: line,
        });
    }
    Ok(out)
}
