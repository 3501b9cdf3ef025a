//! Where signatures come from: the signed text of a page with each token's place in it and
//! each signature's tokens, so a pair's shared signatures can be shown in their texts.

use crate::text::tokens::for_each_word;
use crate::text::Stripped;

use super::spotsigs::{chain_string, for_each_chain};
use super::Signer;

/// The signed text of a page, its words and its signatures.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Annotated {
    /// The texts of the signed blocks, one a line.
    pub text: String,
    /// Byte range `[start, end)` in `text` of each token, in token order.
    pub words: Vec<(u32, u32)>,
    /// Every signature occurrence, in text order.
    pub spots: Vec<Spot>,
}

/// One signature occurrence.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Spot {
    /// The signature as a string (`antecedent:t1:…:tc`).
    pub string: String,
    /// Its hash, as in [`super::Signatures`].
    pub hash: u32,
    /// Its tokens (indices into [`Annotated::words`]): the antecedent, then the chain.
    pub tokens: Vec<u32>,
}

impl Signer {
    /// The signed text of a stripped page with each signature's words: the same blocks,
    /// tokens and chains as [`Signer::sign`], so the spots' hashes are the page's signatures.
    pub fn annotate(&self, text: &Stripped) -> Annotated {
        let mut out = Annotated::default();
        let (tokens, _, family, source) = self.select(text);
        for block in self.source_blocks(text, source) {
            if !out.text.is_empty() {
                out.text.push('\n');
            }
            let base = out.text.len();
            out.text.push_str(block);
            // one token a word, in the order the tokenizer takes them
            for_each_word(block, |w| {
                let at = base + (w.as_ptr() as usize - block.as_ptr() as usize);
                out.words.push((at as u32, (at + w.len()) as u32));
            });
        }
        debug_assert_eq!(out.words.len(), tokens.len());
        if family == super::Family::Sentences {
            super::shingles::sentence_spots(&tokens, self.shingles, |hash, string, tokens| {
                out.spots.push(Spot {
                    hash,
                    string,
                    tokens,
                });
            });
            return out;
        }
        if family == super::Family::Words {
            let k = self.config.short_shingle as usize;
            super::words::for_each_shingle(&tokens, k, |first, last| {
                let string = super::words::shingle_string(&tokens, first, last);
                out.spots.push(Spot {
                    hash: Signer::signature_hash(&string),
                    string,
                    tokens: (first as u32..=last as u32).collect(),
                });
            });
            return out;
        }
        for_each_chain(&tokens, self.spot, |ante, chain| {
            let string = chain_string(&tokens, ante, chain);
            out.spots.push(Spot {
                hash: Signer::signature_hash(&string),
                string,
                tokens: std::iter::once(ante)
                    .chain(chain.iter().copied())
                    .map(|t| t as u32)
                    .collect(),
            });
        });
        out
    }
}

#[cfg(test)]
mod tests {
    use super::super::SignatureConfig;
    use super::*;

    const PAGE: &str = "<html><body><nav><a href=/>Home</a> <a href=/news>News</a></nav>\
        <article><h1>Ferries return</h1><p>The harbor ferries were running again on Sunday \
        after the storm, and the operator said the winter timetable would start in a week.</p>\
        <p>Passengers at the pier welcomed the news; the caf\u{e9} reopened as the first boat \
        came in from the island.</p></article><footer>Contact us</footer></body></html>";

    fn words_of<'a>(a: &'a Annotated, spot: &Spot) -> Vec<&'a str> {
        spot.tokens
            .iter()
            .map(|&t| {
                let (s, e) = a.words[t as usize];
                &a.text[s as usize..e as usize]
            })
            .collect()
    }

    #[test]
    fn spots_are_the_page_signatures_and_point_at_their_words() {
        let signer = Signer::new(&SignatureConfig::default()).unwrap();
        let signed = signer.sign(PAGE);
        let a = signer.annotate(&signed.text);
        // the main region only, one line a block: no menu, no footer
        assert!(
            a.text.contains("The harbor ferries were running"),
            "{}",
            a.text
        );
        assert!(a.text.contains("after the storm, and the operator said the winter timetable would start in a week.\nPassengers at the pier"));
        assert!(!a.text.contains("Contact") && !a.text.contains("Home"));
        assert_eq!(a.words.len(), signed.tokens);
        let mut hashes: Vec<u32> = a.spots.iter().map(|s| s.hash).collect();
        hashes.sort_unstable();
        hashes.dedup();
        assert_eq!(hashes, signed.sigs.hashes().collect::<Vec<_>>());
        let strings: Vec<&str> = a.spots.iter().map(|s| s.string.as_str()).collect();
        let mut expected = signer.signature_strings(PAGE);
        let mut got: Vec<String> = strings.iter().map(|s| s.to_string()).collect();
        expected.sort();
        got.sort();
        assert_eq!(got, expected);
        // stemmed signatures point back at the words as written, across non-ASCII text
        let spot = a
            .spots
            .iter()
            .find(|s| s.string == "the:harbor:ferri")
            .unwrap();
        assert_eq!(words_of(&a, spot), ["The", "harbor", "ferries"]);
        let spot = a
            .spots
            .iter()
            .find(|s| s.string == "the:caf\u{e9}:reopen")
            .unwrap();
        assert_eq!(words_of(&a, spot), ["the", "caf\u{e9}", "reopened"]);
        // every token is the word at its range, lowercased and stemmed
        for spot in &a.spots {
            let words = words_of(&a, spot);
            assert_eq!(words.len(), 3, "{}", spot.string);
            assert!(words[0].eq_ignore_ascii_case(spot.string.split(':').next().unwrap()));
        }
    }

    #[test]
    fn an_empty_page_has_nothing() {
        let signer = Signer::new(&SignatureConfig::default()).unwrap();
        let a = signer.annotate(&signer.sign("").text);
        assert_eq!(a, Annotated::default());
    }
}
