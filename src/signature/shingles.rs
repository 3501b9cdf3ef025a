//! Sentence shingles: the realtime news-dedup method.
//!
//! Text is split into sentences (block boundaries and `.`, `!`, `?`, `…`, `。` followed by
//! whitespace or the end), each sentence is lowercased, stemmed, stripped of punctuation and
//! of words shorter than `min_word_chars`, hashed with CRC32; the `k` smallest distinct
//! hashes are kept sorted (a bottom-k sample, consistent across documents). Two samples are
//! compared with the merge of [`super::similarity`].

use unicode_segmentation::UnicodeSegmentation;

use crate::text::Stripped;

/// Parameters of the sentence shingles.
#[derive(Clone, Copy, Debug)]
pub struct ShingleParams {
    /// Sample size `k`.
    pub k: usize,
    /// Words shorter than this (in chars) are dropped.
    pub min_word_chars: usize,
}

impl Default for ShingleParams {
    fn default() -> Self {
        ShingleParams {
            k: 64,
            min_word_chars: 3,
        }
    }
}

fn sentences(block: &str) -> impl Iterator<Item = &str> {
    let mut rest = block;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut cut = rest.len();
        let mut it = rest.char_indices().peekable();
        while let Some((i, c)) = it.next() {
            if matches!(c, '.' | '!' | '?' | '…' | '。') {
                match it.peek() {
                    None => break,
                    Some(&(j, n)) if n.is_whitespace() => {
                        cut = j;
                        let _ = i;
                        break;
                    }
                    _ => {}
                }
            }
        }
        let (s, r) = rest.split_at(cut);
        rest = r;
        Some(s)
    })
}

/// The bottom-k sentence hashes of `text`, sorted ascending.
pub fn sentence_shingles(
    text: &Stripped,
    stemmer: Option<&rust_stemmers::Stemmer>,
    p: ShingleParams,
) -> Vec<u32> {
    let mut hashes = Vec::new();
    let mut buf = String::new();
    let mut lower = String::new();
    for (_, block) in text.iter() {
        for sentence in sentences(block) {
            buf.clear();
            for word in sentence.unicode_words() {
                if word.chars().count() < p.min_word_chars {
                    continue;
                }
                lower.clear();
                lower.extend(word.chars().flat_map(char::to_lowercase));
                if !buf.is_empty() {
                    buf.push(' ');
                }
                match stemmer {
                    Some(s) => buf.push_str(&s.stem(&lower)),
                    None => buf.push_str(&lower),
                }
            }
            if !buf.is_empty() {
                hashes.push(crc32fast::hash(buf.as_bytes()));
            }
        }
    }
    hashes.sort_unstable();
    hashes.dedup();
    hashes.truncate(p.k);
    hashes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::{strip, Language, StripOptions};

    #[test]
    fn splits_stems_and_samples() {
        let a = strip(
            "<p>The river rose. Barriers were built!</p><p>Officials said so?</p>",
            &StripOptions::default(),
        );
        let b = strip(
            "<div>the RIVER rose ... Barrier were built!</div><p>Officials said so?</p>",
            &StripOptions::default(),
        );
        let st = Language::English.stemmer();
        let p = ShingleParams {
            k: 10,
            min_word_chars: 3,
        };
        let sa = sentence_shingles(&a, Some(&st), p);
        let sb = sentence_shingles(&b, Some(&st), p);
        assert_eq!(sa.len(), 3);
        assert!(sa.windows(2).all(|w| w[0] < w[1]));
        // "the river rose" and "officials said so" are shared; "barriers were built" is
        // "barrier built" in both after stemming and dropping short words
        assert_eq!(sa, sb);
        let p1 = ShingleParams { k: 1, ..p };
        assert_eq!(sentence_shingles(&a, Some(&st), p1), vec![sa[0]]);
    }
}
