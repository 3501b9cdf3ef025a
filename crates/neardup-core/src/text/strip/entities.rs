//! Character references (`&amp;`, `&eacute`, `&#233;`, `&#xE9;`) as the HTML standard
//! decodes them: the longest named reference of the standard's table (legacy ones without a
//! semicolon included), numeric references with the standard's replacements (NUL, surrogates
//! and values past U+10FFFF become U+FFFD, C1 controls their Windows-1252 characters).

use html5ever::data::{C1_REPLACEMENTS, NAMED_ENTITIES};

/// A decoded reference: one or two characters, as UTF-8.
#[derive(Clone, Copy, Debug)]
pub(super) struct Decoded {
    buf: [u8; 8],
    len: u8,
}

impl Decoded {
    fn new(chars: &[char]) -> Decoded {
        let mut d = Decoded {
            buf: [0; 8],
            len: 0,
        };
        for c in chars {
            let n = c.encode_utf8(&mut d.buf[d.len as usize..]).len();
            d.len += n as u8;
        }
        d
    }

    /// The characters.
    pub(super) fn as_str(&self) -> &str {
        // built from chars only
        std::str::from_utf8(&self.buf[..self.len as usize]).unwrap_or("\u{fffd}")
    }
}

/// The longest reference name in the table, with its semicolon.
const MAX_NAME: usize = 32;

/// Decodes the character reference that starts at `s[at..]`, just after an `&`. Returns the
/// characters and the bytes consumed after the `&`, or `None` when the `&` is literal.
/// `in_attribute`: inside an attribute value a legacy reference followed by `=` or an
/// alphanumeric stays literal (`?a=1&copy=2`).
pub(super) fn char_ref(s: &str, at: usize, in_attribute: bool) -> Option<(Decoded, usize)> {
    let b = s.as_bytes();
    match b.get(at)? {
        b'#' => numeric(b, at + 1).map(|(d, n)| (d, n + 1)),
        c if c.is_ascii_alphanumeric() => named(s, at, in_attribute),
        _ => None,
    }
}

fn numeric(b: &[u8], at: usize) -> Option<(Decoded, usize)> {
    let (base, mut i) = match b.get(at) {
        Some(b'x' | b'X') => (16, at + 1),
        _ => (10, at),
    };
    let digits_start = i;
    let (mut num, mut too_big) = (0u32, false);
    while let Some(d) = b.get(i).and_then(|&c| (c as char).to_digit(base)) {
        num = num.wrapping_mul(base);
        if num > 0x10FFFF {
            too_big = true;
        }
        num = num.wrapping_add(d);
        i += 1;
    }
    if i == digits_start {
        return None;
    }
    if b.get(i) == Some(&b';') {
        i += 1;
    }
    let c = match num {
        n if n > 0x10FFFF || too_big => '\u{fffd}',
        0x00 | 0xD800..=0xDFFF => '\u{fffd}',
        0x80..=0x9F => C1_REPLACEMENTS[(num - 0x80) as usize]
            .unwrap_or_else(|| char::from_u32(num).unwrap_or('\u{fffd}')),
        n => char::from_u32(n).unwrap_or('\u{fffd}'),
    };
    Some((Decoded::new(&[c]), i - at))
}

fn decoded(m: (u32, u32)) -> Decoded {
    let c1 = char::from_u32(m.0).unwrap_or('\u{fffd}');
    match m.1 {
        0 => Decoded::new(&[c1]),
        c2 => Decoded::new(&[c1, char::from_u32(c2).unwrap_or('\u{fffd}')]),
    }
}

fn named(s: &str, at: usize, in_attribute: bool) -> Option<(Decoded, usize)> {
    let b = s.as_bytes();
    // Fast path: an alphanumeric name closed by ';' that is in the table is the longest
    // match (a name holds no ';' before its end).
    let alnum = b[at..]
        .iter()
        .take(MAX_NAME)
        .take_while(|c| c.is_ascii_alphanumeric())
        .count();
    if b.get(at + alnum) == Some(&b';') {
        if let Some(&m) = NAMED_ENTITIES.get(&s[at..at + alnum + 1]) {
            if m.0 != 0 {
                return Some((decoded(m), alnum + 1));
            }
        }
    }
    // The standard's way: extend the name while it is a prefix of some reference name,
    // keeping the longest full match.
    let mut best: Option<((u32, u32), usize)> = None;
    let mut end = at;
    for c in s[at..].chars() {
        end += c.len_utf8();
        match NAMED_ENTITIES.get(&s[at..end]) {
            Some(&m) => {
                if m.0 != 0 {
                    best = Some((m, end - at));
                }
            }
            None => break,
        }
    }
    let (m, len) = best?;
    let last = b[at + len - 1];
    if in_attribute && last != b';' {
        if let Some(&next) = b.get(at + len) {
            if next == b'=' || next.is_ascii_alphanumeric() {
                return None;
            }
        }
    }
    Some((decoded(m), len))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dec(s: &str, attr: bool) -> Option<(String, usize)> {
        char_ref(s, 0, attr).map(|(d, n)| (d.as_str().to_string(), n))
    }

    #[test]
    fn references_decode_as_the_standard_says() {
        assert_eq!(dec("amp;x", false), Some(("&".into(), 4)));
        assert_eq!(dec("eacute", false), Some(("é".into(), 6)));
        // legacy name without ';', longest match, the rest stays
        assert_eq!(dec("notit;", false), Some(("¬".into(), 3)));
        assert_eq!(dec("notin;", false), Some(("∉".into(), 6)));
        assert_eq!(dec("copy=2", true), None);
        assert_eq!(dec("copy 2", true), Some(("©".into(), 4)));
        assert_eq!(dec("copy=2", false), Some(("©".into(), 4)));
        assert_eq!(dec("bogus;", false), None);
        assert_eq!(dec("#233;", false), Some(("é".into(), 5)));
        assert_eq!(dec("#xE9", false), Some(("é".into(), 4)));
        assert_eq!(dec("#x;", false), None);
        assert_eq!(dec("#0;", false), Some(("\u{fffd}".into(), 3)));
        assert_eq!(dec("#x80;", false), Some(("€".into(), 5)));
        assert_eq!(dec("#xD800;", false), Some(("\u{fffd}".into(), 7)));
        assert_eq!(dec("#99999999999;", false), Some(("\u{fffd}".into(), 13)));
        assert_eq!(
            dec("NotNestedGreaterGreater;", false),
            Some(("⪢\u{338}".into(), 24))
        );
        assert_eq!(dec(" x", false), None);
    }
}
