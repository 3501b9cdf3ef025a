//! SpotSigs (Theobald, Siddharth, Paepcke, SIGIR 2008).
//!
//! For every antecedent token at position `i` of a block, a chain starts at `k = i + d`;
//! for each of the `c` chain positions, stopwords are skipped, `tokens[k]` is taken and
//! `k += d`. The signature is `antecedent:t1:…:tc`, hashed with CRC32. A chain cut short by
//! the end of its block is dropped. The result is a sorted multiset of `(hash, freq)`.

use crate::text::Tokens;

use super::set::Signatures;

/// Spot distance and chain length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpotParams {
    /// Spot distance `d` (≥ 1).
    pub distance: u32,
    /// Chain length `c` (≥ 1).
    pub chain: u32,
}

/// Calls `visit(antecedent, chain)` for every complete chain; `chain` holds token indices.
pub fn for_each_chain(tokens: &Tokens, p: SpotParams, mut visit: impl FnMut(usize, &[usize])) {
    let d = p.distance.max(1) as usize;
    let c = p.chain.max(1) as usize;
    let mut chain: Vec<usize> = Vec::with_capacity(c);
    // next[k - start]: the first non-stopword at or after k (or `end`), so skipping a run of
    // stopwords costs one step and a block of stopwords stays linear, not quadratic
    let mut next: Vec<u32> = Vec::new();
    for &(start, end) in tokens.blocks() {
        let (start, end) = (start as usize, end as usize);
        next.clear();
        next.resize(end - start + 1, end as u32);
        for k in (start..end).rev() {
            next[k - start] = if tokens.is_stop(k) {
                next[k + 1 - start]
            } else {
                k as u32
            };
        }
        for i in start..end {
            if !tokens.is_antecedent(i) {
                continue;
            }
            chain.clear();
            let mut k = i + d;
            while chain.len() < c {
                if k >= end {
                    break;
                }
                k = next[k - start] as usize;
                if k >= end {
                    break;
                }
                chain.push(k);
                k += d;
            }
            if chain.len() == c {
                visit(i, &chain);
            }
        }
    }
}

pub fn spotsigs(tokens: &Tokens, p: SpotParams) -> Signatures {
    let mut hashes = Vec::new();
    for_each_chain(tokens, p, |ante, chain| {
        let mut h = crc32fast::Hasher::new();
        h.update(tokens.get(ante).as_bytes());
        for &t in chain {
            h.update(b":");
            h.update(tokens.get(t).as_bytes());
        }
        hashes.push(h.finalize());
    });
    Signatures::from_hashes(hashes)
}

/// The signatures as strings before hashing (`antecedent:t1:…:tc`), in text order.
pub fn spotsig_strings(tokens: &Tokens, p: SpotParams) -> Vec<String> {
    let mut out = Vec::new();
    for_each_chain(tokens, p, |ante, chain| {
        out.push(chain_string(tokens, ante, chain))
    });
    out
}

/// The string of one chain before hashing (`antecedent:t1:…:tc`).
pub fn chain_string(tokens: &Tokens, ante: usize, chain: &[usize]) -> String {
    let mut s = tokens.get(ante).to_string();
    for &t in chain {
        s.push(':');
        s.push_str(tokens.get(t));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::{Language, Tokenizer, WordLists};

    /// The reference text of the design document.
    pub const OBAMA: &str = "At a rally to kick off a weeklong campaign for the South Carolina \
        primary, Obama tried to set the record straight from an attack circulating widely on \
        the Internet that is designed to play into prejudices against Muslims and fears of \
        terrorism.";

    fn reference_tokens() -> Tokens {
        let lists = WordLists::new(&Language::English.stopwords(), &["a", "an", "the", "is"]);
        let tok = Tokenizer::new(lists, Language::English, false);
        let mut t = Tokens::default();
        tok.push_block(OBAMA, &mut t);
        t
    }

    #[test]
    fn reference_vector() {
        let t = reference_tokens();
        let p = SpotParams {
            distance: 1,
            chain: 2,
        };
        let got = spotsig_strings(&t, p);
        assert_eq!(
            got,
            [
                "a:rally:kick",
                "a:weeklong:campaign",
                "the:south:carolina",
                "the:record:straight",
                "an:attack:circulating",
                "the:internet:designed",
                "is:designed:play",
            ]
        );
        let sigs = spotsigs(&t, p);
        assert_eq!(sigs.set_len(), 7);
        let expect: Vec<u32> = {
            let mut v: Vec<u32> = got.iter().map(|s| crc32fast::hash(s.as_bytes())).collect();
            v.sort_unstable();
            v
        };
        assert_eq!(sigs.hashes().collect::<Vec<_>>(), expect);
    }

    #[test]
    fn chains_cut_by_block_end_are_dropped() {
        let lists = WordLists::new(&["the", "of", "so"], &["the"]);
        let tok = Tokenizer::new(lists, Language::English, false);
        let mut t = Tokens::default();
        tok.push_block("news of the", &mut t);
        tok.push_block("day the river rose so high", &mut t);
        let p = SpotParams {
            distance: 2,
            chain: 2,
        };
        // "the" ends block 1: dropped; in block 2, d = 2 starts at "rose" (i + 2), then
        // lands on the stopword "so", skips it and takes "high"
        assert_eq!(spotsig_strings(&t, p), ["the:rose:high"]);
    }

    /// The definition, step by step (skipping stopwords one at a time).
    fn naive(tokens: &Tokens, p: SpotParams) -> Vec<(usize, Vec<usize>)> {
        let (d, c) = (p.distance.max(1) as usize, p.chain.max(1) as usize);
        let mut out = Vec::new();
        for &(start, end) in tokens.blocks() {
            let (start, end) = (start as usize, end as usize);
            for i in (start..end).filter(|&i| tokens.is_antecedent(i)) {
                let (mut chain, mut k) = (Vec::new(), i + d);
                while chain.len() < c {
                    while k < end && tokens.is_stop(k) {
                        k += 1;
                    }
                    if k >= end {
                        break;
                    }
                    chain.push(k);
                    k += d;
                }
                if chain.len() == c {
                    out.push((i, chain));
                }
            }
        }
        out
    }

    proptest::proptest! {
        #[test]
        fn chains_equal_the_definition(
            words in proptest::collection::vec(0usize..8, 0..200),
            d in 1u32..4, c in 1u32..4,
        ) {
            const W: [&str; 8] = ["the", "a", "of", "river", "rose", "is", "high", "town"];
            let lists = WordLists::new(&["the", "a", "of", "is"], &["the", "a", "is"]);
            let tok = Tokenizer::new(lists, Language::English, false);
            let mut t = Tokens::default();
            for block in words.chunks(37) {
                let text: Vec<&str> = block.iter().map(|&w| W[w]).collect();
                tok.push_block(&text.join(" "), &mut t);
            }
            let p = SpotParams { distance: d, chain: c };
            let mut got = Vec::new();
            for_each_chain(&t, p, |i, ch| got.push((i, ch.to_vec())));
            proptest::prop_assert_eq!(got, naive(&t, p));
        }
    }

    #[test]
    fn a_block_of_stopwords_has_no_signatures() {
        let lists = WordLists::new(&Language::English.stopwords(), &["the"]);
        let tok = Tokenizer::new(lists, Language::English, false);
        let mut t = Tokens::default();
        tok.push_block(&"the ".repeat(200_000), &mut t);
        let p = SpotParams {
            distance: 1,
            chain: 2,
        };
        assert_eq!(spotsigs(&t, p).set_len(), 0);
    }
}
