//! Tokens: Unicode words, lowercased, optionally stemmed, flagged as stopword / antecedent.
//!
//! All tokens of a page live in one reusable `String` buffer with a span per token, so the
//! token loop allocates nothing per token (a stemmer that changes a word allocates once).

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
}

impl Tokenizer {
    /// A tokenizer with the given word lists; `stem` selects the stemmer of `language`.
    pub fn new(lists: WordLists, language: Language, stem: bool) -> Tokenizer {
        Tokenizer {
            lists,
            stemmer: stem.then(|| language.stemmer()),
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
        for word in text.unicode_words() {
            let start = out.buf.len();
            for c in word.chars() {
                if c == '\u{2019}' {
                    out.buf.push('\''); // typographic apostrophe: isn’t = isn't
                } else if c.is_lowercase() || !c.is_uppercase() {
                    out.buf.push(c);
                } else {
                    out.buf.extend(c.to_lowercase());
                }
            }
            let lower = &out.buf[start..];
            let mut flags = 0;
            if self.lists.is_stopword(lower) {
                flags |= TokenFlags::STOP;
                if self.lists.is_antecedent(lower) {
                    flags |= TokenFlags::ANTECEDENT;
                }
            } else if let Some(stemmer) = &self.stemmer {
                if let std::borrow::Cow::Owned(stemmed) = stemmer.stem(lower) {
                    out.buf.truncate(start);
                    out.buf.push_str(&stemmed);
                }
            }
            out.spans.push((start as u32, out.buf.len() as u32));
            out.flags.push(flags);
        }
        let last = out.spans.len() as u32;
        if last > first {
            out.blocks.push((first, last));
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
