//! Sentence shingles: the realtime news-dedup method (docs/dev/architecture.md §2).
//!
//! The signed blocks are split into sentences ([`sentences`]); each sentence is tokenized
//! like the rest of the signing path (Unicode words, lowercased, stemmed), words shorter than
//! `min_word_chars` after stemming are dropped (punctuation never is a word), and the words
//! left, joined by single spaces, are hashed with CRC32. The `k` smallest distinct hashes
//! are kept sorted: a bottom-k sample, consistent across documents, compared with the merge
//! of [`super::similarity`] like any signature set.

use crate::text::Tokens;

use super::set::Signatures;

/// Parameters of the sentence shingles.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShingleParams {
    /// Sample size `k`: distinct sentence hashes kept at most.
    pub k: usize,
    /// Words shorter than this (in chars, after stemming) are dropped.
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

/// Ends a sentence when followed by whitespace or the end of the block.
fn is_stop(c: char) -> bool {
    matches!(c, '.' | '!' | '?' | '…')
}

/// Ends a sentence wherever it stands (scripts written without spaces).
fn is_wide_stop(c: char) -> bool {
    matches!(c, '。' | '！' | '？' | '｡')
}

/// Closing quotes and brackets that stay with the sentence they close.
fn is_closer(c: char) -> bool {
    matches!(
        c,
        '"' | '\'' | ')' | ']' | '”' | '’' | '»' | '›' | '」' | '』' | '）'
    )
}

/// Byte length of the first sentence of `s`: up to and including a run of terminators and
/// closing quotes that is followed by whitespace or the end (`.`, `!`, `?`, `…`; so `3.5`,
/// `e.g.x` and `U.S.-led` do not end one), or that holds a full-width stop (`。`).
fn sentence_len(s: &str) -> usize {
    let mut it = s.char_indices().peekable();
    while let Some((i, c)) = it.next() {
        if !is_stop(c) && !is_wide_stop(c) {
            continue;
        }
        let mut wide = is_wide_stop(c);
        let mut end = i + c.len_utf8();
        while let Some(&(j, n)) = it.peek() {
            if !(is_stop(n) || is_wide_stop(n) || is_closer(n)) {
                break;
            }
            wide |= is_wide_stop(n);
            end = j + n.len_utf8();
            it.next();
        }
        match it.peek() {
            None => return s.len(),
            Some(&(_, n)) if wide || n.is_whitespace() => return end,
            Some(_) => {}
        }
    }
    s.len()
}

/// The sentences of one block, in order; together they are the whole block (whitespace
/// between sentences starts the next one).
pub fn sentences(block: &str) -> impl Iterator<Item = &str> {
    let mut rest = block;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let (s, r) = rest.split_at(sentence_len(rest));
        rest = r;
        Some(s)
    })
}

/// Calls `f` with the kept words of each sentence (every block of `tokens` is one sentence)
/// that keeps any.
fn for_each_sentence<'t>(tokens: &'t Tokens, p: ShingleParams, mut f: impl FnMut(&[&'t str])) {
    let mut words: Vec<&str> = Vec::new();
    for &(start, end) in tokens.blocks() {
        words.clear();
        for i in start as usize..end as usize {
            let w = tokens.get(i);
            if kept(w, p) {
                words.push(w);
            }
        }
        if !words.is_empty() {
            f(&words);
        }
    }
}

/// Whether a word is kept in a sentence (not shorter than `min_word_chars` characters).
fn kept(w: &str, p: ShingleParams) -> bool {
    if w.is_ascii() {
        w.len() >= p.min_word_chars
    } else {
        w.chars().nth(p.min_word_chars.saturating_sub(1)).is_some()
    }
}

/// Each sentence in the sample of [`sentence_shingles`] once, in text order: its hash, its
/// string (as [`sentence_strings`]) and the token indices of its kept words.
pub fn sentence_spots(tokens: &Tokens, p: ShingleParams, mut f: impl FnMut(u32, String, Vec<u32>)) {
    let sample = sentence_shingles(tokens, p);
    let mut seen = std::collections::HashSet::new();
    for &(start, end) in tokens.blocks() {
        let ids: Vec<u32> = (start..end)
            .filter(|&i| kept(tokens.get(i as usize), p))
            .collect();
        if ids.is_empty() {
            continue;
        }
        let words: Vec<&str> = ids.iter().map(|&i| tokens.get(i as usize)).collect();
        let h = sentence_hash(&words);
        if sample.contains(h) && seen.insert(h) {
            f(h, words.join(" "), ids);
        }
    }
}

/// The hash of a sentence's kept words: CRC32 of the words joined by single spaces, equal
/// to `crc32(sentence string)` of [`sentence_strings`].
fn sentence_hash(words: &[&str]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    for (i, w) in words.iter().enumerate() {
        if i > 0 {
            h.update(b" ");
        }
        h.update(w.as_bytes());
    }
    h.finalize()
}

/// The bottom-k sample of the sentence hashes of `tokens` (one sentence a block), ascending,
/// every hash once.
pub fn sentence_shingles(tokens: &Tokens, p: ShingleParams) -> Signatures {
    let mut hashes = Vec::with_capacity(tokens.blocks().len());
    for_each_sentence(tokens, p, |words| hashes.push(sentence_hash(words)));
    hashes.sort_unstable();
    hashes.dedup();
    hashes.truncate(p.k);
    Signatures::from_hashes(hashes)
}

/// The sentences in the sample of [`sentence_shingles`] as the strings that are hashed
/// (kept words joined by spaces), each once, in text order.
pub fn sentence_strings(tokens: &Tokens, p: ShingleParams) -> Vec<String> {
    let sample = sentence_shingles(tokens, p);
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    for_each_sentence(tokens, p, |words| {
        let h = sentence_hash(words);
        if sample.contains(h) && seen.insert(h) {
            out.push(words.join(" "));
        }
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::{Language, Tokenizer, WordLists};

    fn tokens(blocks: &[&str], stem: bool) -> Tokens {
        let t = Tokenizer::new(
            WordLists::for_language(Language::English),
            Language::English,
            stem,
        );
        let mut out = Tokens::default();
        for b in blocks {
            for s in sentences(b) {
                t.push_block(s, &mut out);
            }
        }
        out
    }

    fn strings(blocks: &[&str]) -> Vec<String> {
        let p = ShingleParams {
            k: usize::MAX,
            ..ShingleParams::default()
        };
        sentence_strings(&tokens(blocks, true), p)
    }

    #[test]
    fn splits_at_terminators_followed_by_space_or_end() {
        let s: Vec<&str> = sentences("The river rose. Barriers were built! Why? Wait… ok")
            .map(str::trim)
            .collect();
        assert_eq!(
            s,
            [
                "The river rose.",
                "Barriers were built!",
                "Why?",
                "Wait…",
                "ok"
            ]
        );
        // no break inside numbers, abbreviations run together, or ellipses mid-sentence
        let s: Vec<&str> = sentences("It cost 3.5 million in the U.S.-led plan... so they said.")
            .map(str::trim)
            .collect();
        assert_eq!(
            s,
            [
                "It cost 3.5 million in the U.S.-led plan...",
                "so they said."
            ]
        );
        // closing quotes and brackets stay with their sentence
        let s: Vec<&str> = sentences("He said \"no.\" Then (it ended.) Next?” she asked.")
            .map(str::trim)
            .collect();
        assert_eq!(
            s,
            [
                "He said \"no.\"",
                "Then (it ended.)",
                "Next?”",
                "she asked."
            ]
        );
        // full-width stops end a sentence without a space after them
        let s: Vec<&str> = sentences("河水上涨。堤坝已建成！谁？").collect();
        assert_eq!(s, ["河水上涨。", "堤坝已建成！", "谁？"]);
        // the sentences are the whole block, nothing lost or repeated
        for b in ["", "no stop", "a. b. ", ". . .", "x.\u{a0}y", "”。", "?!?"] {
            assert_eq!(sentences(b).collect::<String>(), b);
        }
    }

    #[test]
    fn sentences_are_lowercased_stemmed_without_short_words_and_punctuation() {
        assert_eq!(
            strings(&["The RIVER rose, quickly!  Barriers were built (again)."]),
            ["the river rose quick", "barrier were built again"]
        );
        // "it", "is", "a", "of", "42", "to" and "do" are shorter than three characters;
        // numbers are words
        assert_eq!(
            strings(&["It is a test of 42 or 420 things to do."]),
            ["test 420 thing"]
        );
        // a sentence of short words only leaves no shingle
        assert!(strings(&["It is so. Go on."]).is_empty());
        // typographic and plain apostrophes are one word form
        assert_eq!(strings(&["Isn’t it?"]), strings(&["isn't it?"]));
    }

    #[test]
    fn hashes_are_crc32_of_the_sentence_strings_and_the_k_smallest_distinct() {
        let blocks = [
            "The river rose. Barriers were built! Officials said so.",
            "The river rose. A second block follows here. And a third sentence ends it.",
        ];
        let t = tokens(&blocks, true);
        let all = sentence_shingles(
            &t,
            ShingleParams {
                k: usize::MAX,
                ..ShingleParams::default()
            },
        );
        let mut expected: Vec<u32> = strings(&blocks)
            .iter()
            .map(|s| crc32fast::hash(s.as_bytes()))
            .collect();
        expected.sort_unstable();
        assert_eq!(all.hashes().collect::<Vec<_>>(), expected);
        // "the river rose" twice counts once
        assert_eq!(all.set_len(), 5);
        assert!(all.entries().iter().all(|e| e.1 == 1));
        for k in [0, 1, 3, 5, 64] {
            let s = sentence_shingles(
                &t,
                ShingleParams {
                    k,
                    ..ShingleParams::default()
                },
            );
            let want: Vec<u32> = expected.iter().copied().take(k).collect();
            assert_eq!(s.hashes().collect::<Vec<_>>(), want, "k = {k}");
            assert_eq!(
                sentence_strings(
                    &t,
                    ShingleParams {
                        k,
                        ..ShingleParams::default()
                    }
                )
                .len(),
                want.len()
            );
        }
    }

    #[test]
    fn word_forms_and_markup_of_a_copy_give_the_same_sample() {
        let a = tokens(
            &["The river rose. Barriers were built!", "Officials said so?"],
            true,
        );
        let b = tokens(
            &[
                "the RIVER rose ... Barrier were built!",
                "Officials said so?",
            ],
            true,
        );
        let p = ShingleParams::default();
        assert_eq!(sentence_shingles(&a, p), sentence_shingles(&b, p));
        assert_eq!(sentence_shingles(&a, p).set_len(), 3);
        // unstemmed, the plural is another sentence
        let (a, b) = (
            tokens(&["Barriers were built."], false),
            tokens(&["Barrier were built."], false),
        );
        assert_ne!(sentence_shingles(&a, p), sentence_shingles(&b, p));
    }
}
