//! The identity of a page: a 64-bit hash of its whole visible text, numbers aside, its
//! blocks in any order.
//!
//! **Principle.** Two pages whose whole visible text is the same, word for word, are one
//! page under two URLs (a re-fetch, a URL parameter, a session id, a print link, an
//! aggregator's copy, a mirror), whatever their length, host or template. No rule that
//! keeps pages apart applies to them ([`crate::dedup::kept_apart`]).
//!
//! "Visible text" is everything a reader sees, not only the signed region: navigation,
//! teasers, the footer. The signed region of a short page can be its site's own text (a
//! notice the main region picks up), so two different short pages of one site can share
//! every signature. They still differ somewhere else on the page, in the text that makes
//! them two pages, and the template rules go on keeping them apart.
//!
//! **Numbers aside.** Between two fetches of one page, what changes without changing the
//! page is its counters, clocks and dates: a view count, "3 hours ago", a timestamp, a
//! copyright year. A copy that differs from another only in its digits is the same page,
//! so the digits are left out of the hash. Two pages whose words are all the same and whose
//! figures differ (two sizes of one product, one story at two times) are one page too.
//!
//! **Blocks in any order.** Teaser lists (most read, related stories, latest news) and
//! menus are shuffled between two fetches of one page; what a reader sees is the same
//! blocks. So the identity is a hash of the multiset of the page's blocks (the lines of its
//! stripped text): the sum of the blocks' own hashes. A block added or taken away, or a
//! word changed, makes another identity.
//!
//! **The same item.** The title of a page names the item it is about. Two pages with the
//! same title and the same signed text are that item again, even when the rest of the page
//! changed between two fetches (a teaser list, a counter line): their shared text is not
//! the site's alone, since a page about another item has another title. So a page also
//! carries the hash of its `<title>` ([`title`]), and two pages of one title and one
//! signature set are not kept apart either.
//!
//! A block's hash reads its text eight bytes at a time and looks at single bytes only in
//! words that hold a digit, so it costs a fraction of a microsecond per kilobyte. Its values are
//! stored in the index ([`crate::index::DocRecord::identity`]): the function must never
//! change without a new revision of the text rules.

const K: u64 = 0x9E37_79B9_7F4A_7C15;

/// The identity of a text whose blocks are its lines (a stripped page's text): the sum of
/// the hashes of its lines ([`block`]; trimmed of spaces and digits, and left out when
/// nothing else is left), and their count, mixed.
pub fn of(text: &str) -> u64 {
    let mut sum = 0u64;
    let mut n = 0u64;
    let edge = |c: char| c.is_whitespace() || c.is_ascii_digit();
    for line in text
        .split('\n')
        .map(|l| l.trim_matches(edge))
        .filter(|l| !l.is_empty())
    {
        sum = sum.wrapping_add(block(line));
        n += 1;
    }
    fmix(sum ^ n.wrapping_mul(K))
}

/// The hash of a page's `<title>` ([`block`]), if it has one with text.
pub fn title(text: &crate::text::Stripped) -> Option<u64> {
    let edge = |c: char| c.is_whitespace() || c.is_ascii_digit();
    text.iter()
        .find(|(b, _)| b.kind == crate::text::BlockKind::Title)
        .map(|(_, t)| t.trim_matches(edge))
        .filter(|t| !t.is_empty())
        .map(block)
}

/// The hash of one block: its bytes with every ASCII digit left out.
pub fn block(text: &str) -> u64 {
    let mut h = Stream::default();
    let bytes = text.as_bytes();
    let mut words = bytes.chunks_exact(8);
    for w in &mut words {
        let w = u64::from_le_bytes(w.try_into().expect("8 bytes"));
        if has_digit(w) {
            for b in w.to_le_bytes() {
                if !b.is_ascii_digit() {
                    h.byte(b);
                }
            }
        } else {
            h.word(w);
        }
    }
    for &b in words.remainder() {
        if !b.is_ascii_digit() {
            h.byte(b);
        }
    }
    h.finish()
}

/// Whether any byte of `w` is an ASCII digit (0x30–0x39).
fn has_digit(w: u64) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // bytes 0x30..=0x39 become 0..=9; a byte below 10 is found by the borrow of `x - 10`
    // into its high bit where `x` had none (exact for bytes below 0x80; a byte of 0x80 or
    // more never becomes a false digit because `!x` clears its high bit)
    let x = w ^ (0x30 * ONES);
    (x.wrapping_sub(10 * ONES) & !x & HIGH) != 0
}

/// The bytes of a text as a stream of little-endian words, whatever their alignment.
#[derive(Default)]
struct Stream {
    h: u64,
    acc: u64,
    /// Bytes in `acc`, 0 to 7.
    n: u32,
    len: u64,
}

impl Stream {
    fn mix(&mut self, w: u64) {
        self.h = (self.h.rotate_left(5) ^ w).wrapping_mul(K);
    }

    fn byte(&mut self, b: u8) {
        self.acc |= u64::from(b) << (8 * self.n);
        self.n += 1;
        self.len += 1;
        if self.n == 8 {
            let w = self.acc;
            self.mix(w);
            self.acc = 0;
            self.n = 0;
        }
    }

    fn word(&mut self, w: u64) {
        self.len += 8;
        if self.n == 0 {
            self.mix(w);
        } else {
            let s = 8 * self.n;
            let full = self.acc | (w << s);
            self.mix(full);
            self.acc = w >> (64 - s);
        }
    }

    fn finish(mut self) -> u64 {
        let last = self.acc;
        self.mix(last);
        fmix(self.h ^ self.len.wrapping_mul(K))
    }
}

/// The finaliser of MurmurHash3: every input bit reaches every output bit.
fn fmix(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The simple form: every non-digit byte, one at a time.
    fn oracle(text: &str) -> u64 {
        let mut h = Stream::default();
        for &b in text.as_bytes() {
            if !b.is_ascii_digit() {
                h.byte(b);
            }
        }
        h.finish()
    }

    #[test]
    fn digit_test_is_exact_for_every_byte() {
        for b in 0..=255u8 {
            for at in 0..8 {
                let mut w = [b'a'; 8];
                w[at] = b;
                assert_eq!(
                    has_digit(u64::from_le_bytes(w)),
                    b.is_ascii_digit(),
                    "{b:#x}"
                );
            }
        }
    }

    #[test]
    fn reference_values_stay() {
        // stored in indexes: a change here is a change of the text rules
        assert_eq!(of("Posted 3 hours ago"), of("Posted 12 hours ago"));
        assert_ne!(of("Posted 3 hours ago"), of("Posted 3 days ago"));
        assert_eq!(of("Most read\nA\nB"), of("Most read\nB\nA\n"));
        assert_ne!(of("A\nB"), of("A B"));
        assert_ne!(of("A\nB"), of("A\nB\nB"));
        assert_eq!(of("The quick brown fox\njumps"), 0x6189_01ca_30e7_8c12);
        assert_eq!(of(""), of(" 12\n\n"));
    }

    proptest! {
        #[test]
        fn word_at_a_time_equals_byte_at_a_time(text in "(?s).{0,200}") {
            prop_assert_eq!(block(&text), oracle(&text));
        }

        #[test]
        fn blocks_count_in_any_order(lines in prop::collection::vec("[a-z ]{1,30}", 0..12), seed in any::<u64>()) {
            let mut shuffled = lines.clone();
            let n = shuffled.len();
            for i in (1..n).rev() {
                shuffled.swap(i, (seed.wrapping_mul(i as u64 + 7) % (i as u64 + 1)) as usize);
            }
            prop_assert_eq!(of(&lines.join("\n")), of(&shuffled.join("\n")));
        }

        #[test]
        fn only_digits_are_left_out(
            text in "[a-z 0-9,.]{0,120}",
            at in 0usize..120,
            digit in 0u8..10,
            letter in "[a-z]",
        ) {
            let at = at.min(text.len());
            let with = |s: &str| format!("{}{}{}", &text[..at], s, &text[at..]);
            prop_assert_eq!(of(&text), of(&with(&digit.to_string())));
            prop_assert_ne!(of(&text), of(&with(&letter)));
        }
    }
}
