//! The fast path of decoding a page record.
//!
//! Most of a record's bytes are its HTML, a JSON string with an escape every 7 to 40 bytes
//! (an attribute's quotes, a newline). The general JSON decoder decoded it at 0.9–1.0 GB/s
//! on this project's machine; the largest pages (2 to 6 MB) took as long to decode as to
//! strip and sign. This path parses the common shape of a page
//! record directly: an object of the known fields (`id`, `url`, `html`, `fetched_at`,
//! `headers`) with string, `null` and string-map values, its strings scanned 16 bytes at a
//! time for the bytes that end a plain run (a quote, a backslash, a control byte); any other
//! field is checked and skipped, as the general decoder ignores it.
//!
//! Anything else (a repeated field, a known field's key with an escape, another kind of
//! value for a known field, a lone surrogate, nesting deeper than 32, malformed JSON)
//! returns `None`, and the caller decodes the record with
//! the general decoder, which accepts what serde's rules accept and names the error. So this
//! path never accepts a record the general decoder refuses, and decodes what it accepts to
//! the same page: a test compares the two on the example pages and on thousands of mutated
//! records.

use std::collections::BTreeMap;

use super::page::Page;

/// The page, or `None` when the record is not of the shape this path takes.
pub(super) fn parse_page(text: &str) -> Option<Page> {
    let mut p = Parser {
        b: text.as_bytes(),
        i: 0,
    };
    let (mut id, mut url, mut html, mut fetched_at, mut headers) = (None, None, None, None, None);
    p.ws();
    p.eat(b'{')?;
    p.ws();
    if p.peek()? == b'}' {
        return None; // no url: the general decoder names it
    }
    loop {
        let key = p.key()?;
        p.ws();
        p.eat(b':')?;
        p.ws();
        // a field given twice is an error of the general decoder's: leave it to it
        match key {
            b"id" if id.is_none() => id = Some(p.opt_string()?),
            b"url" if url.is_none() => url = Some(p.string()?),
            b"html" if html.is_none() => html = Some(p.string_sized(true)?),
            b"fetched_at" if fetched_at.is_none() => fetched_at = Some(p.opt_string()?),
            b"headers" if headers.is_none() => headers = Some(p.headers()?),
            b"id" | b"url" | b"html" | b"fetched_at" | b"headers" => return None,
            _ => p.skip_value(0)?, // a field of the crawler's: ignored, as the schema says
        }
        p.ws();
        match p.next()? {
            b',' => p.ws(),
            b'}' => break,
            _ => return None,
        }
    }
    p.ws();
    if p.i != p.b.len() {
        return None;
    }
    Some(Page {
        id: id.flatten(),
        url: url?,
        html: html?,
        fetched_at: fetched_at.flatten(),
        headers: headers.flatten(),
    })
}

struct Parser<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Parser<'a> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn peek_at(&self, at: usize) -> Option<u8> {
        self.b.get(at).copied()
    }

    fn next(&mut self) -> Option<u8> {
        let c = self.peek()?;
        self.i += 1;
        Some(c)
    }

    fn eat(&mut self, c: u8) -> Option<()> {
        (self.next()? == c).then_some(())
    }

    /// JSON's whitespace: space, tab, newline, carriage return.
    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }

    /// A key without escapes or control bytes (every known field's is plain).
    fn key(&mut self) -> Option<&'a [u8]> {
        self.eat(b'"')?;
        let start = self.i;
        let n = plain_run(self.b, start);
        if self.peek_at(start + n)? != b'"' {
            return None; // an escape or a control byte
        }
        self.i = start + n + 1;
        Some(&self.b[start..start + n])
    }

    fn string(&mut self) -> Option<String> {
        self.string_sized(false)
    }

    /// A string; `whole`: sized at once for the rest of the record (the HTML).
    fn string_sized(&mut self, whole: bool) -> Option<String> {
        self.eat(b'"')?;
        let (s, used) = unescape(&self.b[self.i..], whole)?;
        self.i += used;
        Some(s)
    }

    fn null(&mut self) -> bool {
        let is = self.b[self.i..].starts_with(b"null");
        if is {
            self.i += 4;
        }
        is
    }

    fn opt_string(&mut self) -> Option<Option<String>> {
        if self.null() {
            return Some(None);
        }
        self.string().map(Some)
    }

    /// Skips any JSON value (a field the page does not use); `None` for anything the JSON
    /// grammar refuses, a string this path does not take, or nesting deeper than 32.
    fn skip_value(&mut self, depth: usize) -> Option<()> {
        match self.peek()? {
            b'"' => {
                self.i += 1;
                self.i += scan_string(&self.b[self.i..], &mut Discard)?;
            }
            b'{' | b'[' if depth < 32 => {
                let close = if self.next()? == b'{' { b'}' } else { b']' };
                self.ws();
                if self.peek()? == close {
                    self.i += 1;
                    return Some(());
                }
                loop {
                    if close == b'}' {
                        self.key_any()?;
                        self.ws();
                        self.eat(b':')?;
                        self.ws();
                    }
                    self.skip_value(depth + 1)?;
                    self.ws();
                    match self.next()? {
                        b',' => self.ws(),
                        c if c == close => break,
                        _ => return None,
                    }
                }
            }
            b't' => self.literal(b"true")?,
            b'f' => self.literal(b"false")?,
            b'n' => self.literal(b"null")?,
            b'-' | b'0'..=b'9' => self.number()?,
            _ => return None,
        }
        Some(())
    }

    /// Any key of an object being skipped.
    fn key_any(&mut self) -> Option<()> {
        self.eat(b'"')?;
        self.i += scan_string(&self.b[self.i..], &mut Discard)?;
        Some(())
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        self.b[self.i..]
            .starts_with(word)
            .then(|| self.i += word.len())
    }

    /// A number by JSON's grammar: `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`.
    fn number(&mut self) -> Option<()> {
        let digits = |p: &mut Self| {
            let from = p.i;
            while p.peek().is_some_and(|c| c.is_ascii_digit()) {
                p.i += 1;
            }
            p.i - from
        };
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        match self.peek()? {
            b'0' => self.i += 1,
            b'1'..=b'9' => {
                digits(self);
            }
            _ => return None,
        }
        if self.peek() == Some(b'.') {
            self.i += 1;
            (digits(self) > 0).then_some(())?;
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.i += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.i += 1;
            }
            (digits(self) > 0).then_some(())?;
        }
        Some(())
    }

    /// `null` or an object of strings (a key given twice keeps its last value, as the
    /// general decoder's map does).
    fn headers(&mut self) -> Option<Option<BTreeMap<String, String>>> {
        if self.null() {
            return Some(None);
        }
        self.eat(b'{')?;
        self.ws();
        let mut map = BTreeMap::new();
        if self.peek()? == b'}' {
            self.i += 1;
            return Some(Some(map));
        }
        loop {
            let k = self.string()?;
            self.ws();
            self.eat(b':')?;
            self.ws();
            let v = self.string()?;
            map.insert(k, v);
            self.ws();
            match self.next()? {
                b',' => self.ws(),
                b'}' => return Some(Some(map)),
                _ => return None,
            }
        }
    }
}

/// Where [`scan_string`] puts a string's decoded bytes: a buffer, or nowhere (a skipped
/// field's string is checked, not kept).
trait Sink {
    fn extend(&mut self, bytes: &[u8]);
}

impl Sink for Vec<u8> {
    fn extend(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

/// A string that is checked and dropped.
struct Discard;

impl Sink for Discard {
    fn extend(&mut self, _: &[u8]) {}
}

/// Decodes the body of a JSON string (`s` starts after its opening quote, `whole`: size the
/// string for all of `s` at once): the string and the bytes used up to and with its closing
/// quote; `None` for a control byte, an unknown escape, a lone surrogate or no closing
/// quote.
fn unescape(s: &[u8], whole: bool) -> Option<(String, usize)> {
    // `s` runs to the record's end: the HTML, nearly all of it, is sized for the rest at
    // once (decoded ≤ encoded), any other string grows as it goes
    let (mut out, used) = if whole {
        let mut out = Vec::with_capacity(s.len());
        let used = decode_sized(s, &mut out)?;
        (out, used)
    } else {
        let mut out = Vec::new();
        let used = scan_string(s, &mut out)?;
        (out, used)
    };
    if out.capacity() - out.len() > out.len() / 4 + 4096 {
        // escapes that shrank a lot (`\uXXXX` to a character) or fields after the HTML:
        // not kept for the page's life
        out.shrink_to_fit();
    }
    debug_assert!(std::str::from_utf8(&out).is_ok());
    // SAFETY: `s` is a slice of a `str` (the record, checked as a whole before parsing),
    // every run copied from it starts and ends at an ASCII byte (a quote, a backslash, a
    // control byte or a run's start after one), so no character is cut, and every escape
    // added a whole character (`char::encode_utf8`): the bytes are UTF-8, and checking
    // them again would be a second pass over every page's HTML
    Some((unsafe { String::from_utf8_unchecked(out) }, used))
}

/// Checks the body of a JSON string and hands its decoded bytes to `out`: the bytes used up
/// to and with the closing quote, or `None` as [`unescape`] says.
fn scan_string(s: &[u8], out: &mut impl Sink) -> Option<usize> {
    let mut i = 0;
    loop {
        let n = plain_run(s, i);
        out.extend(&s[i..i + n]);
        i += n;
        match *s.get(i)? {
            b'"' => return Some(i + 1),
            b'\\' => {}
            _ => return None, // a control byte
        }
        let c = match *s.get(i + 1)? {
            b'"' => b'"',
            b'\\' => b'\\',
            b'/' => b'/',
            b'b' => 0x08,
            b'f' => 0x0c,
            b'n' => b'\n',
            b'r' => b'\r',
            b't' => b'\t',
            b'u' => {
                let mut cp = hex4(s, i + 2)?;
                let mut used = 6;
                if (0xD800..0xDC00).contains(&cp) {
                    if s.get(i + 6..i + 8) != Some(b"\\u") {
                        return None;
                    }
                    let low = hex4(s, i + 8)?;
                    if !(0xDC00..0xE000).contains(&low) {
                        return None;
                    }
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
                    used = 12;
                }
                let ch = char::from_u32(cp)?; // a lone low surrogate is not a char
                out.extend(ch.encode_utf8(&mut [0; 4]).as_bytes());
                i += used;
                continue;
            }
            _ => return None,
        };
        out.extend(&[c]);
        i += 2;
    }
}

/// [`scan_string`] into an empty `out` with room for all of `s`: a string's bytes are
/// stored 16 at a time as they are scanned, with no copy call a run (an HTML attribute's
/// escaped quotes end a run every 17 bytes on average). Decoded bytes never outnumber the
/// encoded ones read (an escape shrinks), so every store lands inside `out`'s room.
fn decode_sized(s: &[u8], out: &mut Vec<u8>) -> Option<usize> {
    assert!(out.is_empty() && out.capacity() >= s.len());
    let dst = out.as_mut_ptr();
    let (mut i, mut o) = (0usize, 0usize);
    loop {
        // invariant: o <= i <= s.len() <= out.capacity()
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::*;
            // SAFETY: SSE2 is part of every x86_64 target; each load reads the 16 bytes
            // s[i..i + 16] and each store writes dst[o..o + 16] with o <= i, i + 16 <= s.len()
            // <= out.capacity(): inside the allocation (beyond `out.len()`, set at the end)
            unsafe {
                let quote = _mm_set1_epi8(b'"' as i8);
                let backslash = _mm_set1_epi8(b'\\' as i8);
                let ctrl_max = _mm_set1_epi8(0x1f);
                while i + 16 <= s.len() {
                    let v = _mm_loadu_si128(s.as_ptr().add(i) as *const __m128i);
                    _mm_storeu_si128(dst.add(o) as *mut __m128i, v);
                    let ctrl = _mm_cmpeq_epi8(_mm_min_epu8(v, ctrl_max), v);
                    let special = _mm_or_si128(
                        _mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash)),
                        ctrl,
                    );
                    let mask = _mm_movemask_epi8(special) as u32;
                    if mask != 0 {
                        let n = mask.trailing_zeros() as usize;
                        // a two-byte escape (nearly all of them: an attribute's quotes, a
                        // line break) is decoded here, and the scan goes on from after it
                        // (o + n + 1 <= i + n + 2: still o <= i)
                        if s[i + n] == b'\\' {
                            if let Some(&e) = s.get(i + n + 1) {
                                let d = SHORT_ESCAPE[e as usize];
                                if d != 0 {
                                    *dst.add(o + n) = d;
                                    i += n + 2;
                                    o += n + 1;
                                    continue;
                                }
                            }
                        }
                        i += n;
                        o += n;
                        break;
                    }
                    i += 16;
                    o += 16;
                }
            }
        }
        // the last bytes (or every byte off x86_64), one at a time
        while let Some(&c) = s.get(i) {
            if c == b'"' || c == b'\\' || c < 0x20 {
                break;
            }
            // SAFETY: o <= i < s.len() <= out.capacity()
            unsafe { *dst.add(o) = c };
            i += 1;
            o += 1;
        }
        match *s.get(i)? {
            b'"' => {
                // SAFETY: dst[..o] were all written above, and o <= out.capacity()
                unsafe { out.set_len(o) };
                return Some(i + 1);
            }
            b'\\' => {}
            _ => return None, // a control byte
        }
        let c = match *s.get(i + 1)? {
            b'"' => b'"',
            b'\\' => b'\\',
            b'/' => b'/',
            b'b' => 0x08,
            b'f' => 0x0c,
            b'n' => b'\n',
            b'r' => b'\r',
            b't' => b'\t',
            b'u' => {
                let mut cp = hex4(s, i + 2)?;
                let mut used = 6;
                if (0xD800..0xDC00).contains(&cp) {
                    if s.get(i + 6..i + 8) != Some(b"\\u") {
                        return None;
                    }
                    let low = hex4(s, i + 8)?;
                    if !(0xDC00..0xE000).contains(&low) {
                        return None;
                    }
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
                    used = 12;
                }
                let ch = char::from_u32(cp)?; // a lone low surrogate is not a char
                let mut buf = [0; 4];
                let bytes = ch.encode_utf8(&mut buf).as_bytes();
                // SAFETY: a character takes at most 4 bytes for the 6 or 12 read, so
                // o + bytes.len() <= i + used <= s.len() <= out.capacity()
                unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), dst.add(o), bytes.len()) };
                o += bytes.len();
                i += used;
                continue;
            }
            _ => return None,
        };
        // SAFETY: o <= i < s.len() <= out.capacity()
        unsafe { *dst.add(o) = c };
        o += 1;
        i += 2;
    }
}

/// The byte a two-byte escape `\X` stands for, by X; 0 for any other X (`\u` and the
/// invalid ones, which the general path takes).
static SHORT_ESCAPE: [u8; 256] = {
    let mut t = [0u8; 256];
    t[b'"' as usize] = b'"';
    t[b'\\' as usize] = b'\\';
    t[b'/' as usize] = b'/';
    t[b'b' as usize] = 0x08;
    t[b'f' as usize] = 0x0c;
    t[b'n' as usize] = b'\n';
    t[b'r' as usize] = b'\r';
    t[b't' as usize] = b'\t';
    t
};

fn hex4(s: &[u8], at: usize) -> Option<u32> {
    s.get(at..at + 4)?
        .iter()
        .try_fold(0u32, |v, &c| Some(v * 16 + (c as char).to_digit(16)?))
}

/// How many bytes from `from` on are plain string bytes: neither a quote, a backslash nor
/// a control byte (below 0x20).
fn plain_run(s: &[u8], from: usize) -> usize {
    let mut i = from;
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::*;
        // SAFETY: SSE2 is part of every x86_64 target; each load reads 16 bytes that are
        // inside `s` (i + 16 <= s.len()).
        unsafe {
            let quote = _mm_set1_epi8(b'"' as i8);
            let backslash = _mm_set1_epi8(b'\\' as i8);
            let ctrl_max = _mm_set1_epi8(0x1f);
            while i + 16 <= s.len() {
                let v = _mm_loadu_si128(s.as_ptr().add(i) as *const __m128i);
                // unsigned v <= 0x1f exactly when min(v, 0x1f) == v
                let ctrl = _mm_cmpeq_epi8(_mm_min_epu8(v, ctrl_max), v);
                let special = _mm_or_si128(
                    _mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash)),
                    ctrl,
                );
                let mask = _mm_movemask_epi8(special) as u32;
                if mask != 0 {
                    return i + mask.trailing_zeros() as usize - from;
                }
                i += 16;
            }
        }
    }
    i + plain_run_scalar(&s[i..]) - from
}

fn plain_run_scalar(s: &[u8]) -> usize {
    s.iter()
        .position(|&c| c == b'"' || c == b'\\' || c < 0x20)
        .unwrap_or(s.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn general(text: &str) -> Option<Page> {
        serde_json::from_str(text).ok()
    }

    /// The fast path accepts only what the general decoder accepts, and decodes it alike.
    fn check(text: &str) -> bool {
        match parse_page(text) {
            Some(p) => {
                assert_eq!(Some(&p), general(text).as_ref(), "{text:?}");
                true
            }
            None => false,
        }
    }

    #[test]
    fn takes_the_common_shapes() {
        let cases = [
            r#"{"url":"https://a.test/","html":"<p>x</p>"}"#,
            r#" { "id" : "p1" , "url":"u", "html":"", "fetched_at":"2026-11-20T08:15:00Z" } "#,
            r#"{"id":null,"url":"u","html":"a\"b\\c\/d\b\f\n\r\t","fetched_at":null,"headers":null}"#,
            r#"{"url":"u","html":"caf\u00e9 \u4e2d \ud83d\ude00 \u0000","headers":{}}"#,
            r#"{"url":"u","html":"x","headers":{"content-type":"text/html","a\u0041":"b","k":"1","k":"2"}}"#,
            r#"{"cluster":"c1","url":"u","kind":{"a":[1,-2.5e+3,true,false,null,{}],"b\n":[]},"html":"x","n":0}"#,
            r#"{"url":"u","html":"x","deep":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}"#,
            "{\"url\":\"ü€😀\",\"html\":\"tab-less but \\t-escaped; long run of plain bytes, more than sixteen of them ü€\"}",
        ];
        for c in cases {
            assert!(check(c), "not taken: {c}");
        }
    }

    #[test]
    fn leaves_the_rest_to_the_general_decoder() {
        let cases = [
            r#"{"url":"u","html":"x","extra":01}"#, // a number JSON refuses
            r#"{"url":"u","html":"x","extra":[1,]}"#, // a trailing comma in a skipped array
            r#"{"url":"u","html":"x","extra":tru}"#, // a misspelt literal
            r#"{"url":"u","html":"x","extra":"\ud800"}"#, // a lone surrogate in a skipped string
            r#"{"url":"u","url":"v","html":"x"}"#,  // a repeated field
            r#"{"ur\u006c":"u","html":"x"}"#,       // an escaped key
            r#"{"url":"u","html":"x",}"#,           // a trailing comma
            r#"{"url":"u","html":"\ud800"}"#,       // a lone high surrogate
            r#"{"url":"u","html":"\udc00x"}"#,      // a lone low surrogate
            r#"{"url":"u","html":"\ud800\u0041"}"#, // a high surrogate, then no low one
            r#"{"url":"u","html":"\x"}"#,           // an unknown escape
            r#"{"url":"u","html":"\u12g4"}"#,       // a bad hex digit
            "{\"url\":\"u\",\"html\":\"a\nb\"}",    // a raw control byte
            r#"{"url":"u"}"#,                       // no html
            r#"{"html":"x"}"#,                      // no url
            r#"{"url":"u","html":"x"} x"#,          // bytes after the object
            r#"{"url":"u","html":"x""#,             // cut short
            r#"{"url":5,"html":"x"}"#,              // a number
            r#"{"url":"u","html":"x","headers":{"a":1}}"#, // a header that is not a string
            r#"{}"#,
            r#"[]"#,
        ];
        for c in cases {
            assert!(!check(c), "taken: {c}");
        }
    }

    #[test]
    fn runs_cut_at_every_offset_of_a_chunk() {
        // a quote, a backslash and a control byte at every position around the 16-byte
        // chunks, after a multi-byte character
        for at in 0..40 {
            for special in ["\\\"", "\\\\", "\\n", "\\u00e9", "\\ud83d\\ude00"] {
                let body = format!("{}é{special}{}", "a".repeat(at), "b".repeat(40 - at));
                let text = format!(r#"{{"url":"u","html":"{body}"}}"#);
                assert!(check(&text), "{text}");
                let text = format!("{{\"url\":\"u\",\"html\":\"{}\u{1}\"}}", "a".repeat(at));
                assert!(!check(&text));
            }
        }
    }

    /// Mutated records: every one the fast path takes decodes as the general decoder does.
    #[test]
    fn agrees_with_the_general_decoder_on_mutated_records() {
        let base = [
            r#"{"id":"p1","url":"https://a.test/x","html":"<a href=\"/y\">caf\u00e9</a>\n<p>z \ud83d\ude00</p>","fetched_at":"2026-11-20T08:15:00Z","headers":{"content-type":"text/html"}}"#,
            include_str!("../../examples/pages.jsonl")
                .lines()
                .next()
                .unwrap(),
        ];
        let alphabet: &[u8] = b"\"\\u{}[]:,nulx0123dD8e.+-tf \n\t/";
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut rand = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let (mut taken, mut total) = (0, 0);
        for b in base {
            assert!(check(b));
            for _ in 0..20_000 {
                let mut m = b.as_bytes().to_vec();
                for _ in 0..1 + rand() % 3 {
                    let at = (rand() as usize) % m.len();
                    let c = alphabet[(rand() as usize) % alphabet.len()];
                    match rand() % 3 {
                        0 => m[at] = c,
                        1 => m.insert(at, c),
                        _ => {
                            m.remove(at);
                        }
                    }
                }
                if let Ok(text) = std::str::from_utf8(&m) {
                    total += 1;
                    taken += check(text) as usize;
                }
            }
        }
        // the mutations must leave enough records of the taken shape to compare
        assert!(taken > total / 10, "{taken} of {total} taken");
    }

    /// Escapes, control bytes and the closing quote at every place of the 16-byte blocks the
    /// HTML is stored by, decoded as the general decoder decodes them or refused alike.
    #[test]
    fn long_strings_agree_at_every_offset() {
        let pieces = [
            r#"\""#,
            r#"\\"#,
            r#"\/"#,
            r#"\n"#,
            r#"\u00e9"#,
            r#"\u4e2d"#,
            r#"\ud83d\ude00"#,
            "\u{1}",
            r#"\x"#,
            r#"\ud83d"#,
            "é",
            "中",
        ];
        let (mut taken, mut total) = (0, 0);
        for lead in 0..40 {
            for piece in pieces {
                for tail in [0, 1, 15, 16, 17, 40] {
                    let html = format!("{}{piece}{}", "a".repeat(lead), "b".repeat(tail));
                    let text = format!(r#"{{"url":"u","html":"{html}","id":"x"}}"#);
                    total += 1;
                    taken += check(&text) as usize;
                    // and with no closing quote
                    assert!(parse_page(&format!(r#"{{"url":"u","html":"{html}"#)).is_none());
                }
            }
        }
        assert!(taken > total / 2, "{taken} of {total} taken");
    }

    /// Every page of the evaluation corpora in `../shared/data` (skipped with a message when
    /// the folder is absent) is taken by the fast path and decoded as the general decoder
    /// decodes it.
    #[test]
    fn takes_and_agrees_on_every_real_page() {
        use std::io::BufRead;
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data");
        let files: Vec<_> = std::fs::read_dir(&dir)
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        let files: Vec<_> = files
            .into_iter()
            .filter(|p| p.to_string_lossy().ends_with(".jsonl.gz"))
            .filter(|p| !p.to_string_lossy().contains("-sample"))
            .collect();
        if files.is_empty() {
            // a CI run must not pass without the real pages it claims to check
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "CI=true and no corpus in ../shared/data: this test checks real pages; run CI \
                 from a clone beside ../shared (see its data/README.md)"
            );
            eprintln!("skipped: no corpus in ../shared/data (see its README)");
            return;
        }
        let mut n = 0;
        for f in files {
            let gz = flate2::read::GzDecoder::new(std::fs::File::open(&f).unwrap());
            for line in std::io::BufReader::new(gz).lines() {
                let line = line.unwrap();
                if !line.trim().is_empty() {
                    assert!(check(&line), "{}: a page not taken", f.display());
                    n += 1;
                }
            }
        }
        assert!(n > 0);
    }
}
