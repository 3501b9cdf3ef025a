//! Tokens: Unicode words, lowercased, optionally stemmed, flagged as stopword / antecedent.
//!
//! All tokens of a page live in one reusable `String` buffer with a span per token, so the
//! token loop allocates nothing per token. Words are the Unicode word segmentation's
//! (UAX #29, `unicode_words`); pure-ASCII stretches take a byte-level path that follows the
//! same rules ([`ascii_words`], held to `unicode_words` by tests). Each thread remembers
//! the words it has seen with their flags and stems ([`STEM_CACHE_WORDS`] words), so a word
//! is looked up in the lists and stemmed once, not on every page.

use std::cell::RefCell;

use rustc_hash::FxHashMap;
use unicode_segmentation::UnicodeSegmentation;

use super::lang::{Language, WordLists};

/// Per-token flags.
pub struct TokenFlags;

impl TokenFlags {
    /// The token is a stopword.
    pub const STOP: u8 = 1;
    /// The token is an antecedent (always also a stopword).
    pub const ANTECEDENT: u8 = 2;
}

/// The tokens of a text, grouped in blocks.
#[derive(Clone, Debug, Default)]
pub struct Tokens {
    buf: String,
    spans: Vec<(u32, u32)>,
    flags: Vec<u8>,
    blocks: Vec<(u32, u32)>,
}

impl Tokens {
    /// Removes every token, keeping the buffers.
    pub fn clear(&mut self) {
        self.buf.clear();
        self.spans.clear();
        self.flags.clear();
        self.blocks.clear();
    }

    /// Number of tokens.
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    /// Whether there are no tokens.
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// Token `i` (lowercased, stemmed if stemming is on).
    pub fn get(&self, i: usize) -> &str {
        let (s, e) = self.spans[i];
        &self.buf[s as usize..e as usize]
    }

    /// Flags of token `i` ([`TokenFlags`]).
    pub fn flags(&self, i: usize) -> u8 {
        self.flags[i]
    }

    /// Whether token `i` is a stopword.
    pub fn is_stop(&self, i: usize) -> bool {
        self.flags[i] & TokenFlags::STOP != 0
    }

    /// Whether token `i` is an antecedent.
    pub fn is_antecedent(&self, i: usize) -> bool {
        self.flags[i] & TokenFlags::ANTECEDENT != 0
    }

    /// Token index ranges `[start, end)` of the blocks.
    pub fn blocks(&self) -> &[(u32, u32)] {
        &self.blocks
    }
}

/// Turns text into [`Tokens`].
pub struct Tokenizer {
    lists: WordLists,
    stemmer: Option<rust_stemmers::Stemmer>,
    /// Names this tokenizer's entries in the per-thread word cache.
    id: u64,
    /// Whether words go through the per-thread word cache.
    cached: bool,
}

/// Words a thread remembers with their flags and stems; past this the memory starts again
/// empty. Small on purpose (about half a megabyte): the table must stay in the processor's
/// caches while pages stream through them; measured on the dev pages, 2^13 words re-stem
/// too often and 2^16 miss the caches on most lookups, both about 30 % slower end to end.
pub const STEM_CACHE_WORDS: usize = 1 << 14;

/// What a word (lowercase) comes to: its flags and its stem (`None`: itself).
struct Known {
    flags: u8,
    stem: Option<Box<str>>,
}

/// The words a thread has seen with one tokenizer: one hash lookup a word instead of a
/// stopword lookup, an antecedent lookup and a stemmer run. Words of up to 15 bytes are
/// keyed by their bytes packed in an integer (no string comparison) with an 8-byte entry
/// whose stem lives in one arena, so the table stays small in the caches; longer words are
/// keyed by string.
#[derive(Default)]
struct WordCache {
    /// The [`Tokenizer::id`] the entries belong to.
    owner: u64,
    short: FxHashMap<u128, Short>,
    /// Words of up to 7 bytes (most words), in half the room.
    tiny: FxHashMap<u64, Short>,
    /// The stems of `short`'s entries, one after another.
    arena: String,
    long: FxHashMap<Box<str>, Known>,
}

/// A short word's flags and where its stem is in the arena.
#[derive(Clone, Copy)]
struct Short {
    flags: u8,
    /// [`NO_STEM`]: the word is its own stem.
    stem_len: u8,
    stem_at: u32,
}

const NO_STEM: u8 = u8::MAX;

impl WordCache {
    fn clear(&mut self) {
        self.short.clear();
        self.tiny.clear();
        self.arena.clear();
        self.long.clear();
    }
}

/// A word of up to 15 bytes as an integer: the bytes, then the length in the last byte.
#[inline]
fn short_key(word: &[u8]) -> Option<u128> {
    if word.len() > 15 {
        return None;
    }
    let mut k = [0u8; 16];
    k[..word.len()].copy_from_slice(word);
    k[15] = word.len() as u8;
    Some(u128::from_le_bytes(k))
}

thread_local! {
    static WORDS: RefCell<WordCache> = RefCell::new(WordCache::default());
}

/// Tokenizer ids: a thread's word cache belongs to one tokenizer at a time.
static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

impl Tokenizer {
    /// A tokenizer with the given word lists; `stem` selects the stemmer of `language`.
    pub fn new(lists: WordLists, language: Language, stem: bool) -> Tokenizer {
        Tokenizer {
            lists,
            stemmer: stem.then(|| language.stemmer()),
            id: NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            cached: true,
        }
    }

    /// A tokenizer that looks every word up and stems it each time, leaving the thread's
    /// word cache to the main tokenizer: for the rare pages of another language, which
    /// would otherwise empty the cache of the index language's words.
    pub fn uncached(lists: WordLists, language: Language, stem: bool) -> Tokenizer {
        Tokenizer {
            cached: false,
            ..Tokenizer::new(lists, language, stem)
        }
    }

    /// The word lists in use.
    pub fn lists(&self) -> &WordLists {
        &self.lists
    }

    /// Appends the tokens of `text` as one block. Stopword and antecedent tests use the
    /// lowercased word before stemming (the lists hold unstemmed words).
    pub fn push_block(&self, text: &str, out: &mut Tokens) {
        let first = out.spans.len() as u32;
        if !self.cached {
            for_each_word(text, |word| {
                let start = out.buf.len();
                push_lowercase(&mut out.buf, word);
                let known = self.learn(&out.buf[start..]);
                if let Some(stem) = &known.stem {
                    out.buf.truncate(start);
                    out.buf.push_str(stem);
                }
                out.spans.push((start as u32, out.buf.len() as u32));
                out.flags.push(known.flags);
            });
        } else {
            self.push_cached(text, out);
        }
        let last = out.spans.len() as u32;
        if last > first {
            out.blocks.push((first, last));
        }
    }

    fn push_cached(&self, text: &str, out: &mut Tokens) {
        WORDS.with(|cache| {
            let mut cache = cache.borrow_mut();
            if cache.owner != self.id {
                cache.clear();
                cache.owner = self.id;
            }
            for_each_word(text, |word| self.push_word(word, out, &mut cache));
        });
    }

    fn push_word(&self, word: &str, out: &mut Tokens, cache: &mut WordCache) {
        let start = out.buf.len();
        push_lowercase(&mut out.buf, word);
        let lower = &out.buf[start..];
        if cache.tiny.len() + cache.short.len() + cache.long.len() >= STEM_CACHE_WORDS {
            cache.clear();
        }
        let flags = match short_key(lower.as_bytes()) {
            Some(key) => {
                let tiny = lower.len() <= 7;
                // up to 7 bytes: the bytes, then the length in the last byte
                let tiny_key = (key as u64 & 0x00ff_ffff_ffff_ffff) | ((lower.len() as u64) << 56);
                let found = if tiny {
                    cache.tiny.get(&tiny_key)
                } else {
                    cache.short.get(&key)
                };
                let entry = match found {
                    Some(&e) => e,
                    None => {
                        let known = self.learn(lower);
                        let mut e = Short {
                            flags: known.flags,
                            stem_len: NO_STEM,
                            stem_at: 0,
                        };
                        if let Some(stem) = known.stem.filter(|s| s.len() < NO_STEM as usize) {
                            e.stem_len = stem.len() as u8;
                            e.stem_at = cache.arena.len() as u32;
                            cache.arena.push_str(&stem);
                        }
                        if tiny {
                            cache.tiny.insert(tiny_key, e);
                        } else {
                            cache.short.insert(key, e);
                        }
                        e
                    }
                };
                if entry.stem_len != NO_STEM {
                    let at = entry.stem_at as usize;
                    out.buf.truncate(start);
                    out.buf
                        .push_str(&cache.arena[at..at + entry.stem_len as usize]);
                }
                entry.flags
            }
            None => {
                let known = match cache.long.get(lower) {
                    Some(k) => k,
                    None => {
                        let known = self.learn(lower);
                        cache.long.entry(lower.into()).or_insert(known)
                    }
                };
                if let Some(stem) = &known.stem {
                    out.buf.truncate(start);
                    out.buf.push_str(stem);
                }
                known.flags
            }
        };
        out.spans.push((start as u32, out.buf.len() as u32));
        out.flags.push(flags);
    }

    /// A word's flags and stem, worked out (stopwords are not stemmed).
    fn learn(&self, lower: &str) -> Known {
        let mut flags = 0;
        let mut stem = None;
        if self.lists.is_stopword(lower) {
            flags |= TokenFlags::STOP;
            if self.lists.is_antecedent(lower) {
                flags |= TokenFlags::ANTECEDENT;
            }
        } else if let Some(stemmer) = &self.stemmer {
            if let std::borrow::Cow::Owned(s) = stemmer.stem(lower) {
                stem = Some(s.into_boxed_str());
            }
        }
        Known { flags, stem }
    }
}

/// Appends `word` lowercased, with the typographic apostrophe as `'` (isn’t = isn't).
pub fn push_lowercase(buf: &mut String, word: &str) {
    let start = buf.len();
    if word.is_ascii() {
        buf.push_str(word);
        buf[start..].make_ascii_lowercase();
    } else {
        for c in word.chars() {
            if c == '\u{2019}' {
                buf.push('\'');
            } else if c.is_lowercase() || !c.is_uppercase() {
                buf.push(c);
            } else {
                buf.extend(c.to_lowercase());
            }
        }
    }
}

/// Calls `f` with each word of `text` in order, as `text.unicode_words()` yields them:
/// space-separated stretches of ASCII go through [`ascii_words`], the others through the
/// Unicode segmentation. (A word never spans an ASCII space: UAX #29 breaks on both sides.)
pub fn for_each_word<'a>(text: &'a str, mut f: impl FnMut(&'a str)) {
    if text.is_ascii() {
        return ascii_words(text, f);
    }
    let b = text.as_bytes();
    let mut at = 0;
    while at < b.len() {
        let end = memchr::memchr(b' ', &b[at..]).map_or(b.len(), |o| at + o);
        let chunk = &text[at..end];
        if chunk.is_ascii() {
            ascii_words(chunk, &mut f);
        } else {
            chunk.unicode_words().for_each(&mut f);
        }
        at = end + 1;
    }
}

/// The words of ASCII text by the rules of UAX #29 restricted to ASCII: letters, digits and
/// `_` join (WB5, WB8–WB10, WB13a/b); `:` joins two letters (WB6/7, MidLetter), `,` and `;`
/// two digits (WB11/12, MidNum), `.` and `'` either (MidNumLet); everything else breaks;
/// a segment is a word when it holds a letter or a digit.
pub fn ascii_words<'a>(text: &'a str, mut f: impl FnMut(&'a str)) {
    const LETTER: u8 = 1;
    const DIGIT: u8 = 2;
    const UNDERSCORE: u8 = 3;
    fn class(c: u8) -> u8 {
        match c {
            b'a'..=b'z' | b'A'..=b'Z' => LETTER,
            b'0'..=b'9' => DIGIT,
            b'_' => UNDERSCORE,
            _ => 0,
        }
    }
    let b = text.as_bytes();
    let n = b.len();
    let mut i = 0;
    while i < n {
        if class(b[i]) == 0 {
            i += 1;
            continue;
        }
        let start = i;
        let mut alnum = false;
        loop {
            let c = class(b[i]);
            alnum |= c == LETTER || c == DIGIT;
            i += 1;
            if i >= n {
                break;
            }
            if class(b[i]) != 0 {
                continue;
            }
            // a middle character joins when the same kind stands on both sides
            let (prev, mid) = (c, b[i]);
            let next = match b.get(i + 1) {
                Some(&x) => class(x),
                None => break,
            };
            let joins = match mid {
                b':' => prev == LETTER && next == LETTER,
                b',' | b';' => prev == DIGIT && next == DIGIT,
                b'.' | b'\'' => (prev == LETTER || prev == DIGIT) && next == prev,
                _ => false,
            };
            if !joins {
                break;
            }
            i += 1;
        }
        if alnum {
            f(&text[start..i]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_lowercased_and_flagged() {
        let lists = WordLists::new(&["the", "is", "of"], &["the", "is"]);
        let tok = Tokenizer::new(lists, Language::English, false);
        let mut t = Tokens::default();
        tok.push_block("The CAFÉ is open, isn't it? Ünïcode—words of 2026.", &mut t);
        let words: Vec<&str> = (0..t.len()).map(|i| t.get(i)).collect();
        assert_eq!(
            words,
            [
                "the",
                "café",
                "is",
                "open",
                "isn't",
                "it",
                "ünïcode",
                "words",
                "of",
                "2026"
            ]
        );
        assert!(t.is_antecedent(0) && t.is_stop(0));
        assert!(!t.is_stop(1));
        assert!(t.is_stop(8) && !t.is_antecedent(8));
        assert_eq!(t.blocks(), &[(0, 10)]);
    }

    fn unicode(text: &str) -> Vec<&str> {
        text.unicode_words().collect()
    }

    fn ours(text: &str) -> Vec<&str> {
        let mut v = Vec::new();
        for_each_word(text, |w| v.push(w));
        v
    }

    #[test]
    fn ascii_words_follow_the_unicode_rules() {
        for text in [
            "The U.S. economy grew 3.5% in Q3, to $1,234.56; isn't it? e.g. a:b a::b 1;2 x_y __",
            "3.14.15 1'000 a'b' 'a a. .a a1.b 1.a _a_ a_1 1_a mid-word foo--bar",
            "tabs\tand\nnewlines\r\n here  double  spaces :a: ;1; ,2,",
            "caf\u{e9} na\u{ef}ve \u{201c}quoted\u{201d} isn\u{2019}t \u{2014}dash\u{2014} 10\u{a0}km",
            "",
            "   ",
        ] {
            assert_eq!(ours(text), unicode(text), "{text:?}");
        }
    }

    proptest::proptest! {
        #[test]
        fn ascii_words_match_unicode_words(text in "[a-zA-Z0-9_.,;:'\\- \t\n!?\u{e9}\u{2019}\u{301}]{0,40}") {
            proptest::prop_assert_eq!(ours(&text), unicode(&text));
        }
    }

    #[test]
    fn stems_are_the_same_from_the_cache() {
        let lists = WordLists::new(&["the"], &["the"]);
        let tok = Tokenizer::new(lists, Language::English, true);
        let text = "running connections the running connections generously";
        let (mut a, mut b) = (Tokens::default(), Tokens::default());
        tok.push_block(text, &mut a);
        tok.push_block(text, &mut b);
        let words = |t: &Tokens| {
            (0..t.len())
                .map(|i| t.get(i).to_string())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            words(&a),
            ["run", "connect", "the", "run", "connect", "generous"]
        );
        assert_eq!(words(&a), words(&b));
    }

    #[test]
    fn stemming_leaves_stopwords_alone() {
        let lists = WordLists::new(&["was"], &["was"]);
        let tok = Tokenizer::new(lists, Language::English, true);
        let mut t = Tokens::default();
        tok.push_block("was running", &mut t);
        tok.push_block("", &mut t);
        tok.push_block("connections", &mut t);
        assert_eq!(t.get(0), "was");
        assert_eq!(t.get(1), "run");
        assert_eq!(t.get(2), "connect");
        assert_eq!(t.blocks(), &[(0, 2), (2, 3)]);
    }
}
