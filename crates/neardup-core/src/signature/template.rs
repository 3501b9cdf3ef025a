//! Template samples: which site template a page is laid out in, for judging short pages.
//!
//! A short page (signed by its word shingles, [`super::words`]) has a few dozen words of its
//! own at most, and two short pages of one site share their template's text: a notice, a
//! promo paragraph, an "about" box that the main region picks up when the article is short.
//! With so few words nothing in the text separates the article from the site's own text,
//! so a short page is matched only with pages laid out in **another** template: a wire
//! brief or a photo caption republished by another site is exactly that, and a page of the
//! same template is not evidence of a copy.
//!
//! The template of a page is the set of its visible blocks (menus, headers, footers, the
//! title, the text): each block's text, trimmed, hashed with CRC32. Two pages of one
//! template share most of their blocks; a page and its republication elsewhere share only
//! the article's few blocks. The sample kept is the [`SAMPLE`] smallest distinct hashes (a
//! bottom-k sample, consistent across pages), and two samples estimate the Jaccard
//! similarity of the block sets by the share of the `k` smallest hashes of their union that
//! both hold.

use crate::text::Stripped;

/// Hashes kept per page.
pub const SAMPLE: usize = 32;

/// Two pages whose block sets reach this estimated Jaccard similarity are laid out in the
/// same template. Pages of one site share their navigation, header and footer blocks (a
/// half or more of the blocks of a short page); a page republished in another site's
/// template shares its article's blocks only, a few of the tens or hundreds a page has.
pub const SAME_TEMPLATE: f64 = 0.3;

/// The hash of a block's text: the CRC-32 of its trimmed text (the template sample's, and
/// a short block's, [`super::software`]).
pub fn block_hash(text: &str) -> u32 {
    crc32fast::hash(text.trim().as_bytes())
}

/// The template sample of a stripped page: the smallest distinct block hashes, ascending.
pub fn sample(text: &Stripped) -> Vec<u32> {
    let mut hashes: Vec<u32> = text
        .blocks
        .iter()
        .map(|b| text.block_text(b))
        .filter(|t| !t.trim().is_empty())
        .map(block_hash)
        .collect();
    hashes.sort_unstable();
    hashes.dedup();
    hashes.truncate(SAMPLE);
    hashes
}

/// The estimated Jaccard similarity of the block sets of two samples (ascending, distinct):
/// of the `k` smallest hashes of their union (`k` = [`SAMPLE`]), the share both samples
/// hold; exact when both pages have fewer blocks than that. 0 when either is empty.
pub fn similarity(a: &[u32], b: &[u32]) -> f64 {
    // a full sample holds SAMPLE hashes; two samples of fewer are whole block sets, and the
    // whole union is then looked at (an exact Jaccard)
    let k = SAMPLE.max(a.len()).max(b.len());
    if a.is_empty() || b.is_empty() {
        return 0.0;
    }
    let (mut i, mut j, mut seen, mut both) = (0, 0, 0, 0);
    while seen < k && (i < a.len() || j < b.len()) {
        match (a.get(i), b.get(j)) {
            (Some(x), Some(y)) if x == y => {
                both += 1;
                i += 1;
                j += 1;
            }
            (Some(x), Some(y)) if x < y => i += 1,
            (Some(_), Some(_)) => j += 1,
            (Some(_), None) => i += 1,
            (None, _) => j += 1,
        }
        seen += 1;
    }
    both as f64 / seen as f64
}

/// Whether two samples are of the same template ([`SAME_TEMPLATE`]).
pub fn same(a: &[u32], b: &[u32]) -> bool {
    similarity(a, b) >= SAME_TEMPLATE
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(blocks: &[&str]) -> Vec<u32> {
        let html: String = blocks.iter().map(|b| format!("<p>{b}</p>")).collect();
        sample(&crate::text::strip(&html, &Default::default()))
    }

    #[test]
    fn samples_are_the_smallest_distinct_block_hashes() {
        let s = page(&["Home", "News", "Home", "  News  "]);
        let mut want = vec![crc32fast::hash(b"Home"), crc32fast::hash(b"News")];
        want.sort_unstable();
        assert_eq!(s, want);
        let many: Vec<String> = (0..100).map(|i| format!("block {i}")).collect();
        let refs: Vec<&str> = many.iter().map(String::as_str).collect();
        let s = page(&refs);
        assert_eq!(s.len(), SAMPLE);
        assert!(s.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn same_site_pages_are_one_template_and_republications_are_not() {
        let nav: Vec<String> = (0..30).map(|i| format!("Section {i}")).collect();
        let mut a: Vec<&str> = nav.iter().map(String::as_str).collect();
        let mut b = a.clone();
        a.push("The ferry returned to the harbor on Sunday.");
        b.push("A new bridge opens in the spring, the council said.");
        let (sa, sb) = (page(&a), page(&b));
        assert!(same(&sa, &sb), "{}", similarity(&sa, &sb));
        let other: Vec<String> = (0..30).map(|i| format!("Menu item {i}")).collect();
        let mut c: Vec<&str> = other.iter().map(String::as_str).collect();
        c.push("The ferry returned to the harbor on Sunday.");
        let sc = page(&c);
        assert!(!same(&sa, &sc), "{}", similarity(&sa, &sc));
        assert_eq!(similarity(&sa, &sa), 1.0);
        // small samples are whole sets: the exact Jaccard
        assert_eq!(similarity(&[1, 2, 3, 4], &[1, 2, 3, 5]), 0.6);
        assert_eq!(similarity(&sa, &[]), 0.0);
    }
}
