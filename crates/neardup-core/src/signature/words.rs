//! Word shingles: the signature family of short texts.
//!
//! SpotSigs need stopword antecedents, and a caption or a news brief of a few dozen words
//! has only a handful of them: too few signatures to judge (a Jaccard over five signatures
//! moves in steps of a fifth, and two or three shared phrases decide it). Such a text is
//! signed by its word `k`-shingles instead: every run of `k` consecutive tokens (lowercased,
//! stemmed, stopwords kept) inside one block, hashed with CRC32 after a marker byte that no
//! SpotSigs string starts with, so the two families never share a hash by construction of
//! the strings. As in SpotSigs, stopwords mark prose: a shingle is kept only if one of its
//! words is a stopword, so a menu ("Home About Contact"), a product list or a row of tags,
//! which have none, gives no shingles, while a sentence gives nearly all of its windows. A
//! 25-word brief has about 20, enough for a Jaccard estimate to mean something, and one
//! edited word changes at most `k` of them.

use crate::text::Tokens;

use super::set::Signatures;

/// The byte every word-shingle string starts with (SpotSigs strings start with a word).
pub const MARKER: u8 = b'#';

/// Calls `visit(first, last)` (token indices, inclusive) for every `k`-shingle of prose:
/// inside one block, with at least one stopword among its words.
pub fn for_each_shingle(tokens: &Tokens, k: usize, mut visit: impl FnMut(usize, usize)) {
    let k = k.max(1);
    for &(start, end) in tokens.blocks() {
        let (start, end) = (start as usize, end as usize);
        if end - start < k {
            continue;
        }
        for i in start..=end - k {
            if (i..i + k).any(|t| tokens.is_stop(t)) {
                visit(i, i + k - 1);
            }
        }
    }
}

/// The word `k`-shingles of `tokens` as a signature multiset.
pub fn word_shingles(tokens: &Tokens, k: usize) -> Signatures {
    let mut hashes = Vec::with_capacity(tokens.len());
    for_each_shingle(tokens, k, |a, b| {
        let mut h = crc32fast::Hasher::new();
        h.update(&[MARKER]);
        for t in a..=b {
            if t > a {
                h.update(b" ");
            }
            h.update(tokens.get(t).as_bytes());
        }
        hashes.push(h.finalize());
    });
    Signatures::from_hashes(hashes)
}

/// The string of the shingle of tokens `first..=last` before hashing (`#w1 w2 w3`).
pub fn shingle_string(tokens: &Tokens, first: usize, last: usize) -> String {
    let mut s = String::from(MARKER as char);
    for t in first..=last {
        if t > first {
            s.push(' ');
        }
        s.push_str(tokens.get(t));
    }
    s
}

/// The shingles as strings before hashing, in text order.
pub fn word_shingle_strings(tokens: &Tokens, k: usize) -> Vec<String> {
    let mut out = Vec::new();
    for_each_shingle(tokens, k, |a, b| out.push(shingle_string(tokens, a, b)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::{Language, Tokenizer, WordLists};

    fn tokens(text: &str) -> Tokens {
        let lang = Language::English;
        let lists = WordLists::new(&lang.stopwords(), &lang.antecedents());
        let t = Tokenizer::new(lists, lang, true);
        let mut out = Tokens::default();
        t.push_block(text, &mut out);
        out
    }

    #[test]
    fn shingles_are_consecutive_stemmed_words_and_hash_their_strings() {
        let t = tokens("Police said the bridges were closed.");
        let s = word_shingle_strings(&t, 3);
        assert_eq!(
            s,
            [
                "#polic said the",
                "#said the bridg",
                "#the bridg were",
                "#bridg were close"
            ]
        );
        let sigs = word_shingles(&t, 3);
        assert_eq!(sigs.set_len(), 4);
        let mut want: Vec<u32> = s.iter().map(|x| crc32fast::hash(x.as_bytes())).collect();
        want.sort_unstable();
        assert_eq!(sigs.hashes().collect::<Vec<_>>(), want);
    }

    #[test]
    fn too_few_words_give_no_shingle_and_repeats_count() {
        assert_eq!(word_shingles(&tokens("two words"), 3).set_len(), 0);
        let rep = word_shingles(&tokens("the go the go the go"), 3);
        assert_eq!(rep.set_len(), 2);
        assert_eq!(rep.total(), 4);
    }

    #[test]
    fn menus_without_stopwords_give_none_and_blocks_are_not_crossed() {
        assert_eq!(
            word_shingles(&tokens("Home News Sports Weather Contact Advertise"), 3).set_len(),
            0
        );
        let lang = Language::English;
        let t = Tokenizer::new(
            WordLists::new(&lang.stopwords(), &lang.antecedents()),
            lang,
            true,
        );
        let mut two = Tokens::default();
        t.push_block("Home News", &mut two);
        t.push_block("the storm", &mut two);
        // "news the storm" would cross the blocks
        assert_eq!(word_shingles(&two, 3).set_len(), 0);
    }

    #[test]
    fn one_edited_word_changes_at_most_k_shingles() {
        let a = word_shingles(
            &tokens("The council approved the new budget for the city schools on Monday"),
            3,
        );
        let b = word_shingles(
            &tokens("The council approved the new budget for the city schools on Tuesday"),
            3,
        );
        let shared = a.hashes().filter(|h| b.hashes().any(|x| x == *h)).count();
        assert_eq!(a.set_len(), 10);
        assert_eq!(shared, 9);
    }
}
