//! Tokens: Unicode words, lowercased, optionally stemmed, flagged as stopword / antecedent.
//!
//! All tokens of a page live in one reusable `String` buffer with a span per token, so the
//! token loop allocates nothing per token. Words are the Unicode word segmentation's
//! (UAX #29, `unicode_words`); pure-ASCII stretches take a byte-level path that follows the
//! same rules ([`ascii_words`], held to `unicode_words` by tests). Each thread remembers
//! the words it has seen with their flags and stems (two generations of [`STEM_CACHE_WORDS`]
//! words), so a word is looked up in the lists and stemmed once, not on every page.

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

/// Words of a generation of the word cache a thread keeps: past this the generation becomes
/// the one before and a new one starts empty. Small on purpose (about half a megabyte): the
/// table looked up first must stay in the processor's caches while pages stream through
/// them; measured on the dev pages with one generation, 2^13 words re-stem too often and
/// 2^16 miss the caches on most lookups, both slower end to end (30 % when first measured;
/// 2^16 once more on 2026-11-30, 256–278 MB/s in three runs against 270–289 for 2^14 that
/// hour).
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
///
/// Two generations: once the words of this one reach [`STEM_CACHE_WORDS`], it becomes the
/// one before and this one starts again empty; a word missing here is looked up in the one
/// before and copied here, and worked out again only when missing there too. So the words
/// that keep coming (a language's common words, a site's names) stay known across the
/// change, where emptying the one table worked every word out again: 28 times over the dev
/// pages, a tenth of their 5.0M words stemmed. The table looked up first stays as small as
/// it was.
#[derive(Default)]
struct WordCache {
    /// The [`Tokenizer::id`] the entries belong to.
    owner: u64,
    now: Generation,
    before: Generation,
}

/// One generation of a [`WordCache`].
#[derive(Default)]
struct Generation {
    short: FxHashMap<u128, Short>,
    /// Words of up to 7 bytes (most words), in half the room.
    tiny: FxHashMap<u64, Short>,
    /// The stems of `short`'s and `tiny`'s entries, one after another.
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

impl Generation {
    fn clear(&mut self) {
        self.short.clear();
        self.tiny.clear();
        self.arena.clear();
        self.long.clear();
    }

    fn len(&self) -> usize {
        self.tiny.len() + self.short.len() + self.long.len()
    }

    /// Enters a short word's entry, its stem `stem` (from any arena) copied into this one's.
    fn enter_short(
        &mut self,
        tiny: Option<u64>,
        key: u128,
        flags: u8,
        stem: Option<&str>,
    ) -> Short {
        let mut e = Short {
            flags,
            stem_len: NO_STEM,
            stem_at: 0,
        };
        if let Some(stem) = stem.filter(|s| s.len() < NO_STEM as usize) {
            e.stem_len = stem.len() as u8;
            e.stem_at = self.arena.len() as u32;
            self.arena.push_str(stem);
        }
        match tiny {
            Some(k) => self.tiny.insert(k, e),
            None => self.short.insert(key, e),
        };
        e
    }

    #[inline]
    fn get_short(&self, tiny: Option<u64>, key: u128) -> Option<Short> {
        match tiny {
            Some(k) => self.tiny.get(&k).copied(),
            None => self.short.get(&key).copied(),
        }
    }

    /// The stem of a short word's entry (`None`: the word itself).
    #[inline]
    fn stem(&self, e: Short) -> Option<&str> {
        (e.stem_len != NO_STEM)
            .then(|| &self.arena[e.stem_at as usize..e.stem_at as usize + e.stem_len as usize])
    }
}

impl WordCache {
    fn clear(&mut self) {
        self.now.clear();
        self.before.clear();
    }

    /// Makes room: the words of this generation become the one before.
    fn turn(&mut self) {
        std::mem::swap(&mut self.now, &mut self.before);
        self.now.clear();
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
        if cache.now.len() >= STEM_CACHE_WORDS {
            cache.turn();
        }
        let flags = match short_key(lower.as_bytes()) {
            Some(key) => {
                // up to 7 bytes: the bytes, then the length in the last byte
                let tiny = (lower.len() <= 7)
                    .then_some((key as u64 & 0x00ff_ffff_ffff_ffff) | ((lower.len() as u64) << 56));
                let entry = match cache.now.get_short(tiny, key) {
                    Some(e) => e,
                    None => match cache.before.get_short(tiny, key) {
                        Some(e) => {
                            let WordCache { now, before, .. } = &mut *cache;
                            now.enter_short(tiny, key, e.flags, before.stem(e))
                        }
                        None => {
                            let known = self.learn(lower);
                            cache
                                .now
                                .enter_short(tiny, key, known.flags, known.stem.as_deref())
                        }
                    },
                };
                if let Some(stem) = cache.now.stem(entry) {
                    out.buf.truncate(start);
                    out.buf.push_str(stem);
                }
                entry.flags
            }
            None => {
                let WordCache { now, before, .. } = &mut *cache;
                let known = match now.long.get(lower) {
                    Some(k) => k,
                    None => {
                        let known = match before.long.get(lower) {
                            Some(k) => Known {
                                flags: k.flags,
                                stem: k.stem.clone(),
                            },
                            None => self.learn(lower),
                        };
                        now.long.entry(lower.into()).or_insert(known)
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

    /// Across the cache's generations (words found in this one, copied from the one
    /// before, worked out again once both have turned over), every word of every length
    /// class (up to 7 bytes, up to 15, longer) comes out as the uncached tokenizer gives it.
    #[test]
    fn words_are_the_same_across_the_caches_generations() {
        let lists = || WordLists::new(&["the", "was"], &["the"]);
        let cached = Tokenizer::new(lists(), Language::English, true);
        let uncached = Tokenizer::uncached(lists(), Language::English, true);
        // distinct made-up words, three times a generation, with common ones among them
        let word = |i: usize| {
            let stem = ["connect", "generous", "run", "nationalisations"][i % 4];
            match i % 3 {
                0 => format!("{stem}{i}"),
                1 => format!("ab{i}ing"),
                _ => format!("{stem}ly{i}ations"),
            }
        };
        let n = 3 * STEM_CACHE_WORDS;
        let text: String = (0..n)
            .flat_map(|i| [word(i), "the running Was".to_string(), word(i / 2)])
            .collect::<Vec<_>>()
            .join(" ");
        let words = |t: &Tokens| {
            (0..t.len())
                .map(|i| (t.get(i).to_string(), t.flags(i)))
                .collect::<Vec<_>>()
        };
        let mut want = Tokens::default();
        uncached.push_block(&text, &mut want);
        for _ in 0..2 {
            let mut got = Tokens::default();
            cached.push_block(&text, &mut got);
            assert_eq!(words(&got), words(&want));
        }
        assert_eq!(want.len(), n * 5);
    }

    /// Two tokenizers with other word lists take turns on one thread: each finds none of
    /// the other's entries in either generation (the cache belongs to one at a time).
    #[test]
    fn tokenizers_taking_turns_never_see_each_others_words() {
        let a = Tokenizer::new(
            WordLists::new(&["running"], &["running"]),
            Language::English,
            true,
        );
        let b = Tokenizer::new(WordLists::new(&["the"], &["the"]), Language::English, false);
        // enough words that the first tokenizer's cache has turned over once
        let filler: String = (0..STEM_CACHE_WORDS + 10)
            .map(|i| format!("w{i}x "))
            .collect();
        let text = "running connections the generously";
        let words = |t: &Tokens| {
            (0..t.len())
                .map(|i| (t.get(i).to_string(), t.flags(i)))
                .collect::<Vec<_>>()
        };
        for _ in 0..2 {
            let mut t = Tokens::default();
            a.push_block(&filler, &mut t);
            a.push_block(text, &mut t);
            let mut ta = Tokens::default();
            a.push_block(text, &mut ta);
            let stop = TokenFlags::STOP | TokenFlags::ANTECEDENT;
            assert_eq!(
                words(&ta),
                [
                    ("running".to_string(), stop),
                    ("connect".to_string(), 0),
                    ("the".to_string(), 0),
                    ("generous".to_string(), 0),
                ]
            );
            let mut tb = Tokens::default();
            b.push_block(text, &mut tb);
            assert_eq!(
                words(&tb),
                [
                    ("running".to_string(), 0),
                    ("connections".to_string(), 0),
                    ("the".to_string(), stop),
                    ("generously".to_string(), 0),
                ]
            );
        }
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
