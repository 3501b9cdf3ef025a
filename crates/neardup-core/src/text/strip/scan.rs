//! The default stripping path: one pass over the bytes that tokenizes as the HTML standard's
//! tokenizer does (tags and their attributes, comments, doctypes, bogus comments, raw text
//! for `script`/`style`/`title`/…, script escapes, character references, `<plaintext>`) and
//! drives the block rules directly. No tree, no token values: text that is hidden is skipped
//! with a byte search, only the hint attributes of container elements are read (class, id, role,
//! hidden, style: a style's references are decoded only for a container named a dialog at
//! text rules 4, the only one whose style counts), and visible text is handed on as slices
//! of the input.

use memchr::{memchr, memchr2, memchr3};

use super::entities::char_ref;
use super::hints::{value_names_a_dialog, HintAttrs};
use super::options::StripOptions;
use super::output::Stripped;
use super::rules::{tag_info, Next, Raw, Rules};

/// Strips `html` in one pass over its bytes.
pub(super) fn strip(html: &str, opts: &StripOptions) -> Stripped {
    let mut s = Scanner {
        src: html,
        rules: Rules::new(opts),
        name: String::new(),
        decoded: Default::default(),
    };
    // a byte order mark at the start is not text
    let start = if html.starts_with('\u{feff}') { 3 } else { 0 };
    s.data(start);
    s.rules.finish()
}

/// Whitespace between a tag's parts (CR counts: the standard turns it into LF first).
#[inline]
fn is_tag_space(c: u8) -> bool {
    matches!(c, b'\t' | b'\n' | 0x0C | b' ' | b'\r')
}

/// Bytes that end an attribute name: whitespace, `/`, `>`, `=`.
static ENDS_NAME: [bool; 256] = {
    let mut t = [false; 256];
    t[b'\t' as usize] = true;
    t[b'\n' as usize] = true;
    t[0x0C] = true;
    t[b' ' as usize] = true;
    t[b'\r' as usize] = true;
    t[b'/' as usize] = true;
    t[b'>' as usize] = true;
    t[b'=' as usize] = true;
    t
};

/// A hint attribute's value found in a tag: its byte range and whether it holds an `&`.
#[derive(Clone, Copy)]
struct Value {
    start: usize,
    end: usize,
    amp: bool,
}

impl Value {
    /// The value in `src`, its character references decoded into `out` when it has any.
    fn read<'s>(self, src: &'s str, out: &'s mut String) -> &'s str {
        if self.amp {
            decode_value(&src[self.start..self.end], out);
            out
        } else {
            &src[self.start..self.end]
        }
    }
}

/// The attributes the container hints read ([`super::hints`]), in the order of [`Values`].
const HINT_ATTRS: [&str; 5] = ["class", "id", "role", "style", "hidden"];

/// What a tag's attributes came to.
struct TagEnd {
    /// Position after the `>`.
    end: usize,
    self_closing: bool,
}

/// The first value of each of [`HINT_ATTRS`] in a tag.
type Values = [Option<Value>; 5];

struct Scanner<'a> {
    src: &'a str,
    rules: Rules,
    /// A tag name that needed lowercasing.
    name: String,
    /// Decoded hint attribute values (only when they hold a reference), the first four of
    /// [`Values`] (the value of `hidden` is never read).
    decoded: [String; 4],
}

impl<'a> Scanner<'a> {
    /// The data state, from `at` to the end of the input.
    fn data(&mut self, mut at: usize) {
        let b = self.src.as_bytes();
        let n = b.len();
        while at < n {
            if self.rules.visible().is_none() {
                match memchr(b'<', &b[at..]) {
                    Some(o) => at += o,
                    None => return,
                }
            } else {
                let o = memchr3(b'<', b'&', 0, &b[at..]).unwrap_or(n - at);
                if o > 0 {
                    self.rules.text(&self.src[at..at + o]);
                    at += o;
                    if at >= n {
                        return;
                    }
                }
                match b[at] {
                    b'&' => {
                        at = self.reference(at);
                        continue;
                    }
                    0 => {
                        // NUL in data is dropped
                        at += 1;
                        continue;
                    }
                    _ => {}
                }
            }
            at = self.markup(at);
        }
    }

    /// An `&` at `at` in text: its characters go to the rules; returns where text goes on.
    fn reference(&mut self, at: usize) -> usize {
        match char_ref(self.src, at + 1, false) {
            Some((d, len)) => {
                self.rules.text(d.as_str());
                at + 1 + len
            }
            None => {
                self.rules.text("&");
                at + 1
            }
        }
    }

    /// Markup at a `<` (`b[at] == b'<'`); returns where the data state goes on.
    fn markup(&mut self, at: usize) -> usize {
        let b = self.src.as_bytes();
        let n = b.len();
        match b.get(at + 1) {
            None => {
                self.rules.text("<");
                n
            }
            Some(c) if c.is_ascii_alphabetic() => self.tag(at + 1, false),
            Some(b'/') => match b.get(at + 2) {
                None => {
                    self.rules.text("</");
                    n
                }
                Some(c) if c.is_ascii_alphabetic() => self.tag(at + 2, true),
                Some(b'>') => at + 3,
                Some(_) => bogus_comment(b, at + 2),
            },
            Some(b'!') => markup_declaration(b, at + 2),
            Some(b'?') => bogus_comment(b, at + 1),
            Some(_) => {
                self.rules.text("<");
                at + 1
            }
        }
    }

    /// A start or end tag whose name starts at `p`; returns where the data state goes on.
    fn tag(&mut self, p: usize, end_tag: bool) -> usize {
        let src = self.src;
        let b = src.as_bytes();
        let n = b.len();
        let mut i = p;
        let mut plain = true; // lowercase already, no NUL
        while i < n {
            let c = b[i];
            if is_tag_space(c) || c == b'/' || c == b'>' {
                break;
            }
            plain &= !c.is_ascii_uppercase() && c != 0;
            i += 1;
        }
        if i >= n {
            return n; // a tag cut by the end of the input is dropped
        }
        if plain {
            return self.tag_named(&src[p..i], i, end_tag);
        }
        let mut name = std::mem::take(&mut self.name);
        name.clear();
        for ch in src[p..i].chars() {
            match ch {
                '\0' => name.push('\u{fffd}'),
                c => name.push(c.to_ascii_lowercase()),
            }
        }
        let next = self.tag_named(&name, i, end_tag);
        self.name = name;
        next
    }

    fn tag_named(&mut self, name: &str, i: usize, end_tag: bool) -> usize {
        let b = self.src.as_bytes();
        let n = b.len();
        let info = tag_info(name);
        let want = !end_tag && info.container.is_some();
        let mut values: Values = [None; 5];
        let Some(t) = attributes(b, i, want.then_some(&mut values)) else {
            return n;
        };
        if end_tag {
            self.rules.end_tag(name, info);
            return t.end;
        }
        let src = self.src;
        let mut attrs = HintAttrs {
            hidden: values[4].is_some(),
            ..HintAttrs::default()
        };
        if want {
            let [class, id, role, style, _] = values;
            let [d_class, d_id, d_role, d_style] = &mut self.decoded;
            attrs.class = class.map(|v| v.read(src, d_class));
            attrs.id = id.map(|v| v.read(src, d_id));
            attrs.role = role.map(|v| v.read(src, d_role));
            // a style is a slice of the input, read by the hints only for a container named
            // a dialog; one with a reference is decoded only where it can count
            attrs.style = style
                .filter(|v| {
                    !v.amp
                        || self.rules.hidden_dialogs()
                            && [attrs.class, attrs.id]
                                .into_iter()
                                .flatten()
                                .any(value_names_a_dialog)
                })
                .map(|v| v.read(src, d_style));
        }
        let next = self.rules.start_tag(name, info, t.self_closing, &attrs);
        match next {
            Next::Data => t.end,
            Next::Raw(kind) => self.raw(t.end, kind, name),
            Next::Plaintext => {
                self.plaintext(t.end);
                n
            }
        }
    }

    /// Raw text after the start tag of `name`, up to and including its end tag.
    fn raw(&mut self, from: usize, kind: Raw, name: &str) -> usize {
        let b = self.src.as_bytes();
        let n = b.len();
        if kind == Raw::Script {
            // script content is always hidden: only its end matters
            return match script_end(b, from) {
                Some((_, after_name)) => self.raw_end(after_name, name),
                None => n,
            };
        }
        let visible = self.rules.visible().is_some();
        let mut at = from;
        let mut run = from; // start of text not yet handed on
        loop {
            let o = if visible {
                if kind == Raw::Rcdata {
                    memchr3(b'<', b'&', 0, &b[at..])
                } else {
                    memchr2(b'<', 0, &b[at..])
                }
            } else {
                memchr(b'<', &b[at..])
            };
            let Some(o) = o else {
                if visible {
                    self.rules.text(&self.src[run..n]);
                }
                return n;
            };
            at += o;
            match b[at] {
                b'&' => {
                    self.rules.text(&self.src[run..at]);
                    at = self.reference(at);
                    run = at;
                }
                0 => {
                    self.rules.text(&self.src[run..at]);
                    self.rules.text("\u{fffd}");
                    at += 1;
                    run = at;
                }
                _ => match appropriate_end_tag(b, at, name) {
                    EndTag::Yes(after_name) => {
                        if visible {
                            self.rules.text(&self.src[run..at]);
                        }
                        return self.raw_end(after_name, name);
                    }
                    EndTag::No(next) => at = next,
                },
            }
        }
    }

    /// The end tag of a raw-text element, its name ending at `after_name`.
    fn raw_end(&mut self, after_name: usize, name: &str) -> usize {
        let b = self.src.as_bytes();
        match attributes(b, after_name, None) {
            Some(t) => {
                self.rules.end_tag(name, tag_info(name));
                t.end
            }
            None => b.len(),
        }
    }

    /// Text from `from` to `to` with NUL read as U+FFFD (`<plaintext>`).
    fn plaintext(&mut self, from: usize) {
        let b = self.src.as_bytes();
        let to = b.len();
        let mut at = from;
        while let Some(o) = memchr(0, &b[at..to]) {
            self.rules.text(&self.src[at..at + o]);
            self.rules.text("\u{fffd}");
            at += o + 1;
        }
        self.rules.text(&self.src[at..to]);
    }
}

/// An attribute value with its character references decoded, into `out`.
fn decode_value(raw: &str, out: &mut String) {
    out.clear();
    let mut at = 0;
    while let Some(o) = memchr(b'&', &raw.as_bytes()[at..]) {
        out.push_str(&raw[at..at + o]);
        at += o;
        match char_ref(raw, at + 1, true) {
            Some((d, len)) => {
                out.push_str(d.as_str());
                at += 1 + len;
            }
            None => {
                out.push('&');
                at += 1;
            }
        }
    }
    out.push_str(&raw[at..]);
}

/// Whether `</name` at `lt` closes the raw-text element `name` (ASCII case-insensitive,
/// followed by whitespace, `/` or `>`).
enum EndTag {
    /// It does; the name ends here.
    Yes(usize),
    /// It does not; raw text goes on here.
    No(usize),
}

fn appropriate_end_tag(b: &[u8], lt: usize, name: &str) -> EndTag {
    if b.get(lt + 1) != Some(&b'/') {
        return EndTag::No(lt + 1);
    }
    let p = lt + 2;
    match tag_word(b, p) {
        (j, _) if j == p => EndTag::No(p),
        (j, true) if b[p..j].eq_ignore_ascii_case(name.as_bytes()) => EndTag::Yes(j),
        (j, _) => EndTag::No(j),
    }
}

/// The ASCII letters from `p` as a tag name inside raw text: where they end, and whether a
/// byte that ends a tag name follows (whitespace, `/` or `>`).
fn tag_word(b: &[u8], p: usize) -> (usize, bool) {
    let j = p + b[p..]
        .iter()
        .take_while(|c| c.is_ascii_alphabetic())
        .count();
    let ends = b
        .get(j)
        .is_some_and(|&c| is_tag_space(c) || c == b'/' || c == b'>');
    (j, ends)
}

/// Script data from `from`: finds the `</script` that ends it, following the standard's
/// script escape states (`<!--` … `-->`, and `<script>` inside them). Returns the position
/// of its `<` and of the byte after the name, or `None` when the input ends first.
fn script_end(b: &[u8], from: usize) -> Option<(usize, usize)> {
    #[derive(Clone, Copy, PartialEq)]
    enum S {
        Data,
        Escaped,
        EscapedDash,
        EscapedDashDash,
        Double,
        DoubleDash,
        DoubleDashDash,
    }
    let n = b.len();
    let mut st = S::Data;
    let mut i = from;
    // the escaped less-than sign: `<` consumed, `i` after it
    let escaped_lt = |i: usize| -> Result<(usize, S), (usize, usize)> {
        match b.get(i) {
            Some(b'/') => match appropriate_end_tag(b, i - 1, "script") {
                EndTag::Yes(j) => Err((i - 1, j)),
                EndTag::No(j) => Ok((j, S::Escaped)),
            },
            Some(c) if c.is_ascii_alphabetic() => match tag_word(b, i) {
                (j, true) if b[i..j].eq_ignore_ascii_case(b"script") => Ok((j + 1, S::Double)),
                (j, true) => Ok((j + 1, S::Escaped)),
                (j, false) => Ok((j, S::Escaped)),
            },
            _ => Ok((i, S::Escaped)),
        }
    };
    // the double-escaped less-than sign: `<` consumed, `i` after it
    let double_lt = |i: usize| -> (usize, S) {
        if b.get(i) != Some(&b'/') {
            return (i, S::Double);
        }
        match tag_word(b, i + 1) {
            (j, true) if b[i + 1..j].eq_ignore_ascii_case(b"script") => (j + 1, S::Escaped),
            (j, true) => (j + 1, S::Double),
            (j, false) => (j, S::Double),
        }
    };
    while i < n {
        match st {
            S::Data => {
                i += memchr(b'<', &b[i..])? + 1;
                match b.get(i) {
                    Some(b'/') => match appropriate_end_tag(b, i - 1, "script") {
                        EndTag::Yes(j) => return Some((i - 1, j)),
                        EndTag::No(j) => i = j,
                    },
                    Some(b'!') => {
                        if b.get(i + 1) == Some(&b'-') {
                            if b.get(i + 2) == Some(&b'-') {
                                i += 3;
                                st = S::EscapedDashDash;
                            } else {
                                i += 2;
                            }
                        } else {
                            i += 1;
                        }
                    }
                    _ => {}
                }
            }
            S::Escaped | S::Double => {
                let o = memchr2(b'-', b'<', &b[i..])?;
                i += o;
                let dash = b[i] == b'-';
                i += 1;
                match (st, dash) {
                    (S::Escaped, true) => st = S::EscapedDash,
                    (S::Escaped, false) => match escaped_lt(i) {
                        Ok((j, s)) => (i, st) = (j, s),
                        Err(end) => return Some(end),
                    },
                    (_, true) => st = S::DoubleDash,
                    (_, false) => (i, st) = double_lt(i),
                }
            }
            S::EscapedDash | S::EscapedDashDash | S::DoubleDash | S::DoubleDashDash => {
                let double = matches!(st, S::DoubleDash | S::DoubleDashDash);
                let dashdash = matches!(st, S::EscapedDashDash | S::DoubleDashDash);
                let c = b[i];
                i += 1;
                match c {
                    b'-' => {
                        st = if double {
                            S::DoubleDashDash
                        } else {
                            S::EscapedDashDash
                        }
                    }
                    b'<' if double => (i, st) = double_lt(i),
                    b'<' => match escaped_lt(i) {
                        Ok((j, s)) => (i, st) = (j, s),
                        Err(end) => return Some(end),
                    },
                    b'>' if dashdash => st = S::Data,
                    _ => st = if double { S::Double } else { S::Escaped },
                }
            }
        }
    }
    None
}

/// The attributes of a tag from `i` (just after its name) to its `>`; the first value of
/// each of [`HINT_ATTRS`] into `values` when given. `None` when the input ends inside the
/// tag (the tag is dropped).
fn attributes(b: &[u8], mut i: usize, mut values: Option<&mut Values>) -> Option<TagEnd> {
    #[derive(Clone, Copy, PartialEq)]
    enum S {
        BeforeName,
        Name,
        AfterName,
        BeforeValue,
        AfterQuoted,
        SelfClosing,
    }
    let n = b.len();
    let mut st = S::BeforeName;
    let mut t = TagEnd {
        end: 0,
        self_closing: false,
    };
    let mut name_start = 0;
    // which attribute the current one is: 1 + its index in HINT_ATTRS, 0 other or a repeat
    let mut which = 0u8;
    let set = |values: &mut Option<&mut Values>, which: u8, start: usize, end: usize| {
        if let Some(v) = values {
            v[which as usize - 1] = Some(Value {
                start,
                end,
                amp: memchr(b'&', &b[start..end]).is_some(),
            });
        }
    };
    let classify = |values: &Option<&mut Values>, name: &[u8]| -> u8 {
        let Some(values) = values else {
            return 0;
        };
        // most attributes are none of these: one length test rejects them
        let k = match name.len() {
            2 => 1,
            4 => 2,
            5 if (name[0] | 0x20) == b'c' => 0,
            5 => 3,
            6 => 4,
            _ => return 0,
        };
        if values[k].is_none() && name.eq_ignore_ascii_case(HINT_ATTRS[k].as_bytes()) {
            k as u8 + 1
        } else {
            0
        }
    };
    while i < n {
        let c = b[i];
        match st {
            S::BeforeName => match c {
                _ if is_tag_space(c) => i += 1,
                b'/' => {
                    st = S::SelfClosing;
                    i += 1
                }
                b'>' => {
                    t.end = i + 1;
                    return Some(t);
                }
                _ => {
                    name_start = i;
                    st = S::Name;
                    i += 1
                }
            },
            S::Name => match c {
                _ if !ENDS_NAME[c as usize] => {
                    // the rest of the name in one loop
                    i += 1;
                    while i < n && !ENDS_NAME[b[i] as usize] {
                        i += 1;
                    }
                }
                _ => {
                    which = classify(&values, &b[name_start..i]);
                    // an attribute without a value is empty
                    if which != 0 {
                        set(&mut values, which, i, i);
                    }
                    st = match c {
                        b'/' => S::SelfClosing,
                        b'>' => {
                            t.end = i + 1;
                            return Some(t);
                        }
                        b'=' => S::BeforeValue,
                        _ => S::AfterName,
                    };
                    i += 1;
                }
            },
            S::AfterName => match c {
                _ if is_tag_space(c) => i += 1,
                b'=' => {
                    st = S::BeforeValue;
                    i += 1
                }
                // anything else reads as before an attribute name
                _ => st = S::BeforeName,
            },
            S::BeforeValue => match c {
                _ if is_tag_space(c) => i += 1,
                b'"' | b'\'' => {
                    let q = memchr(c, &b[i + 1..])? + i + 1;
                    if which != 0 {
                        set(&mut values, which, i + 1, q);
                    }
                    st = S::AfterQuoted;
                    i = q + 1;
                }
                b'>' => {
                    t.end = i + 1;
                    return Some(t);
                }
                _ => {
                    // unquoted: up to whitespace or '>'
                    let start = i;
                    while i < n && !is_tag_space(b[i]) && b[i] != b'>' {
                        i += 1;
                    }
                    if i >= n {
                        return None;
                    }
                    if which != 0 {
                        set(&mut values, which, start, i);
                    }
                    if b[i] == b'>' {
                        t.end = i + 1;
                        return Some(t);
                    }
                    st = S::BeforeName;
                    i += 1;
                }
            },
            S::AfterQuoted => match c {
                _ if is_tag_space(c) => {
                    st = S::BeforeName;
                    i += 1
                }
                b'/' => {
                    st = S::SelfClosing;
                    i += 1
                }
                b'>' => {
                    t.end = i + 1;
                    return Some(t);
                }
                _ => st = S::BeforeName,
            },
            S::SelfClosing => match c {
                b'>' => {
                    t.self_closing = true;
                    t.end = i + 1;
                    return Some(t);
                }
                _ => st = S::BeforeName,
            },
        }
    }
    None
}

/// After `<!` at `p`: a comment, a doctype or a bogus comment; returns where data goes on.
fn markup_declaration(b: &[u8], p: usize) -> usize {
    if b[p..].starts_with(b"--") {
        return comment(b, p + 2);
    }
    if b.len() >= p + 7 && b[p..p + 7].eq_ignore_ascii_case(b"doctype") {
        // every doctype state ends at the first '>'
        return bogus_comment(b, p + 7);
    }
    bogus_comment(b, p)
}

/// A bogus comment (or a doctype) from `p`: up to and including the next `>`.
fn bogus_comment(b: &[u8], p: usize) -> usize {
    match memchr(b'>', &b[p..]) {
        Some(o) => p + o + 1,
        None => b.len(),
    }
}

/// A comment whose content starts at `p` (after `<!--`): it ends at `-->` or `--!>`, or
/// at once with `<!-->` and `<!--->`.
fn comment(b: &[u8], p: usize) -> usize {
    let n = b.len();
    if b.get(p) == Some(&b'>') {
        return p + 1;
    }
    if b[p..].starts_with(b"->") {
        return p + 2;
    }
    let mut i = p;
    while let Some(o) = memchr(b'-', &b[i..]) {
        i += o;
        if b.get(i + 1) == Some(&b'-') {
            match b.get(i + 2) {
                Some(b'>') => return i + 3,
                Some(b'!') if b.get(i + 3) == Some(&b'>') => return i + 4,
                _ => {}
            }
        }
        i += 1;
    }
    n
}
