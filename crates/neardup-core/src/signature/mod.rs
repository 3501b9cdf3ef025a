//! Signatures: SpotSigs, sentence shingles, fingerprints, similarity.
//!
//! Pure code: no I/O, no runtime, no metrics. The [`Signer`] runs the whole signing path
//! for one page (strip → tokens → SpotSigs or sentence shingles → fingerprint) and is
//! `Sync`, so one signer serves every worker thread.

pub mod annotate;
pub mod fingerprint;
pub mod identity;
mod set;
pub mod shingles;
pub mod similarity;
pub mod software;
pub mod spotsigs;
pub mod template;
pub mod words;

use serde::{Deserialize, Serialize};

pub use fingerprint::{fingerprint, hamming, FingerprintKind};
pub use set::Signatures;
pub use shingles::ShingleParams;
pub use similarity::{group, length_bound, mass, similarity, similarity_at_least, Measure};
pub use software::ShortBlocks;
pub use spotsigs::SpotParams;

use crate::text::{
    self, Language, StripMode, StripOptions, Stripped, Tokenizer, Tokens, WordLists,
};

/// Which text of a page is signed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Content {
    /// The main text region ([`text::main_region`]): the dense run of blocks, without
    /// menus, teasers and footers around it.
    #[default]
    Main,
    /// Every visible block.
    All,
}

/// Which signatures make a page's signature set.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Features {
    /// SpotSigs chains.
    #[default]
    Spotsigs,
    /// Sentence shingles: the bottom-k sample of the sentence hashes.
    Sentences,
}

impl Features {
    /// Name as in flags and records.
    pub fn as_str(self) -> &'static str {
        match self {
            Features::Spotsigs => "spotsigs",
            Features::Sentences => "sentences",
        }
    }

    fn is_spotsigs(&self) -> bool {
        *self == Features::Spotsigs
    }
}

fn default_short_below() -> u32 {
    10
}

fn is_default_short_below(v: &u32) -> bool {
    *v == default_short_below()
}

fn is_zero(v: &u32) -> bool {
    *v == 0
}

fn one() -> u32 {
    1
}

fn is_one(v: &u32) -> bool {
    *v == 1
}

/// The revision of the text rules new indexes are made with ([`SignatureConfig::text_rules`]).
pub const TEXT_RULES: u32 = 10;

/// From text rules 8, a page signed by its word shingles (fewer than `short-below`
/// SpotSigs) whose signed text has at least this many words is not short
/// ([`SignatureConfig::short_by_length`]). SpotSigs' spots are the index language's
/// stopwords: an English page of the dev corpus has one SpotSig every 6 to 14 words (the
/// 10th to the 90th percentile), so fewer than 10 of them means fewer than about 140
/// words. A page of 600 words with fewer than 10 spots is not short but written in a
/// language whose stopwords are not the spots; its own text, not its site's, is what it is
/// signed on, as a long page's is.
pub const LONG_WORDS: usize = 600;

/// From text rules 9, a text signed by its SpotSigs with fewer than one distinct SpotSig in
/// this many words is tried in the other languages as a short text is
/// ([`SignatureConfig::sparse_spots`]). An English page of the dev corpus has one every 6 to
/// 14 words (the 10th to the 90th percentile): one in 40 is under half the rate of the
/// sparsest tenth, the rate of a text whose few spots are the index language's stopwords
/// that happen to be words of another language too ("an", "was", "will" in German; "a" in
/// Spanish). The language guess still decides: the text is signed in another language only
/// when that language's stopwords cover a tenth of its words and twice the index
/// language's share, so an index-language text with few spots keeps its signatures.
pub const SPARSE_SPOT_WORDS: usize = 40;

fn default_sentence_sample() -> u32 {
    ShingleParams::default().k as u32
}

fn is_default_sentence_sample(k: &u32) -> bool {
    *k == default_sentence_sample()
}

/// Settings of the signing path. Changing any of them changes the signatures, so they are
/// stored in an index's metadata. The sentence settings are left out of the stored JSON at
/// their defaults, so the metadata of an index signed with SpotSigs reads as before.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignatureConfig {
    /// Language of stemmer and word lists.
    pub language: Language,
    /// Stem tokens before building chains.
    pub stem: bool,
    /// Stopwords (lowercase); `None` uses the shipped list of the language.
    pub stopwords: Option<Vec<String>>,
    /// Antecedents (lowercase); `None` uses the shipped list of the language.
    pub antecedents: Option<Vec<String>>,
    /// Spot distance `d`.
    pub spot_distance: u32,
    /// Chain length `c`.
    pub chain_len: u32,
    /// Which text is signed: the main region or every block.
    pub content: Content,
    /// Blocks whose share of link text exceeds this are left out (navigation, menus).
    pub max_link_density: f64,
    /// Stripping implementation.
    pub strip: StripMode,
    /// Bytes of HTML considered at most per page.
    pub max_page_bytes: usize,
    /// Fingerprint function.
    pub fingerprint: FingerprintKind,
    /// Fingerprint width in bits (64; 128 or 256 for minhash1).
    pub fingerprint_bits: u32,
    /// Word-shingle length `k` of the short-text family ([`words`]); 0 turns the family
    /// off (short pages then keep their few SpotSigs). Absent from the stored settings of
    /// an index made before the family existed, which read as 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub short_shingle: u32,
    /// A page with fewer distinct SpotSigs than this is signed by its word shingles.
    #[serde(
        default = "default_short_below",
        skip_serializing_if = "is_default_short_below"
    )]
    pub short_below: u32,
    /// The signature family: SpotSigs chains or sentence shingles.
    #[serde(default, skip_serializing_if = "Features::is_spotsigs")]
    pub features: Features,
    /// Sentence shingles: the sample size `k` (distinct sentence hashes kept at most).
    #[serde(
        default = "default_sentence_sample",
        skip_serializing_if = "is_default_sentence_sample"
    )]
    pub sentence_sample: u32,
    /// Revision of the text rules, which change signatures without a setting of their own:
    /// 1, links counted as nested and open to the end of the page when never closed, pages
    /// signed in the index language only; 2, links end where the HTML tree rules end them
    /// (a table cell is a scope) and a page the index language cannot sign is signed in its
    /// own ([`Signer`]); 3, ARIA roles are container hints
    /// ([`crate::text::StripOptions::aria_roles`]), and a pair with a short page (one with
    /// a template sample) is matched across hosts only ([`crate::dedup`]); 4, a container named a dialog that is not rendered weighs as layout:
    /// it counts against the region unless it holds most of the page
    /// ([`crate::text::StripOptions::hidden_dialogs`]); 5, a page carries
    /// the identity of its whole visible text ([`identity`]), and no rule keeps apart two
    /// pages of one identity ([`crate::dedup::kept_apart`]); 6, a page
    /// carries its short blocks ([`software`]), and the signatures of those that are
    /// software text (template text of several hosts, [`crate::index::software`]) are left
    /// out of matching (SpotSigs features only); 7, a page carries its
    /// long blocks too, and two pages of one host signed on the same text that show less
    /// than half of the same blocks are kept apart ([`crate::dedup::kept_apart`]; SpotSigs
    /// features only); 8 ([`TEXT_RULES`]), a page is short by the length of its signed text,
    /// not only by its number of SpotSigs ([`LONG_WORDS`]). Absent from the stored settings of
    /// an index made before revision 2, which read as 1 and keep deciding as they did.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub text_rules: u32,
}

impl Default for SignatureConfig {
    fn default() -> Self {
        SignatureConfig {
            language: Language::English,
            stem: true,
            stopwords: None,
            antecedents: None,
            spot_distance: 1,
            chain_len: 2,
            content: Content::Main,
            max_link_density: 0.5,
            strip: StripMode::Bytes,
            max_page_bytes: 16 * 1024 * 1024,
            fingerprint: FingerprintKind::Minhash1,
            fingerprint_bits: 64,
            short_shingle: 3,
            short_below: 10,
            features: Features::Spotsigs,
            sentence_sample: default_sentence_sample(),
            text_rules: TEXT_RULES,
        }
    }
}

/// A signature setting that cannot work.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum SignatureConfigError {
    /// d or c is zero.
    #[error("spot distance and chain length must be at least 1 (got d = {0}, c = {1})")]
    Chain(u32, u32),
    /// Bad fingerprint width.
    #[error(
        "fingerprint width must be 64, 128 or 256 bits, and simhash has 64 only (got {0} with {1})"
    )]
    Bits(u32, FingerprintKind),
    /// No antecedents.
    #[error("the antecedent list is empty: SpotSigs needs at least one antecedent")]
    NoAntecedents,
    /// Link density outside [0, 1].
    #[error("max link density must be within [0, 1] (got {0})")]
    LinkDensity(f64),
    /// A word-shingle length that no short text could fill.
    #[error("short-shingle must be 0 (off) to 8 words (got {0})")]
    ShortShingle(u32),
    /// A sentence sample of no sentences.
    #[error("the sentence sample must keep at least 1 sentence hash (got 0)")]
    SentenceSample,
    /// An unknown revision of the text rules.
    #[error("text-rules must be 1 to {TEXT_RULES} (got {0})")]
    TextRules(u32),
}

impl SignatureConfig {
    /// How pages are stripped: the configured path and size limit, and the rules of the
    /// revision of the text rules ([`SignatureConfig::text_rules`]).
    pub fn strip_options(&self) -> StripOptions {
        StripOptions {
            mode: self.strip,
            max_bytes: self.max_page_bytes,
            link_scopes: self.text_rules >= 2,
            aria_roles: self.text_rules >= 3,
            hidden_dialogs: self.text_rules >= 4,
        }
    }

    /// Whether a pair of which either page is short is kept apart within one host (text
    /// rules 3 and later; [`crate::dedup::kept_apart`]).
    pub fn short_pages_across_hosts_only(&self) -> bool {
        self.text_rules >= 3
    }

    /// Whether pages carry the identity of their visible text (text rules 5 and later;
    /// [`identity`]).
    pub fn identities(&self) -> bool {
        self.text_rules >= 5
    }

    /// Whether pages carry their short blocks and software text is left out of matching
    /// (text rules 6 and later, SpotSigs features; [`software`]).
    pub fn software_text(&self) -> bool {
        self.text_rules >= 6 && self.features.is_spotsigs()
    }

    /// Whether a page with few SpotSigs but [`LONG_WORDS`] words or more of signed text is
    /// taken as long: no template sample, so the rules for short pages (matched across hosts
    /// only, not with a page of its own template) leave it alone (text rules 8 and later).
    pub fn short_by_length(&self) -> bool {
        self.text_rules >= 8
    }

    /// Whether a text signed by SpotSigs too sparse for its length ([`SPARSE_SPOT_WORDS`])
    /// may be signed in another language, as a short one may (text rules 9 and later).
    pub fn sparse_spots(&self) -> bool {
        self.text_rules >= 9
    }

    /// Whether two pages of one host are matched only at [`crate::dedup::HOST_THRESHOLD`]
    /// or more (text rules 10 and later, SpotSigs features).
    pub fn host_threshold(&self) -> bool {
        self.text_rules >= 10 && self.features.is_spotsigs()
    }

    /// Whether pages carry their long blocks as well, and two pages of one host signed on
    /// the same text are matched only when they show mostly the same blocks (text rules 7
    /// and later, SpotSigs features; [`crate::dedup::kept_apart`]).
    pub fn host_text(&self) -> bool {
        self.text_rules >= 7 && self.features.is_spotsigs()
    }

    /// Checks the settings.
    pub fn validate(&self) -> Result<(), SignatureConfigError> {
        if self.spot_distance == 0 || self.chain_len == 0 {
            return Err(SignatureConfigError::Chain(
                self.spot_distance,
                self.chain_len,
            ));
        }
        let bits_ok = match self.fingerprint {
            FingerprintKind::Simhash => self.fingerprint_bits == 64,
            FingerprintKind::Minhash1 => matches!(self.fingerprint_bits, 64 | 128 | 256),
        };
        if !bits_ok {
            return Err(SignatureConfigError::Bits(
                self.fingerprint_bits,
                self.fingerprint,
            ));
        }
        if matches!(&self.antecedents, Some(a) if a.is_empty()) {
            return Err(SignatureConfigError::NoAntecedents);
        }
        if !(0.0..=1.0).contains(&self.max_link_density) {
            return Err(SignatureConfigError::LinkDensity(self.max_link_density));
        }
        if self.short_shingle > 8 {
            return Err(SignatureConfigError::ShortShingle(self.short_shingle));
        }
        if self.sentence_sample == 0 {
            return Err(SignatureConfigError::SentenceSample);
        }
        if !(1..=TEXT_RULES).contains(&self.text_rules) {
            return Err(SignatureConfigError::TextRules(self.text_rules));
        }
        Ok(())
    }
}

/// The result of signing one page.
#[derive(Clone, Debug, Default)]
pub struct Signed {
    /// The stripped text.
    pub text: Stripped,
    /// The signature set: the SpotSigs multiset, or the sentence sample.
    pub sigs: Signatures,
    /// The fingerprint, `fingerprint_bits / 64` words.
    pub fingerprint: Vec<u64>,
    /// Tokens of the text that was signed.
    pub tokens: usize,
    /// Which family the signatures are of.
    pub family: Family,
    /// The template sample of a short page ([`template`]); empty for other pages.
    pub template: Vec<u32>,
    /// The identity of the page's whole visible text ([`identity`]; text rules 5 and later).
    pub identity: Option<u64>,
    /// The hash of the page's `<title>`, numbers aside ([`identity::block`]; text rules 5
    /// and later, pages with a title).
    pub title: Option<u64>,
    /// The page's short blocks ([`software`]; text rules 6 and later).
    pub short: ShortBlocks,
}

/// The signature family of a page.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Family {
    /// SpotSigs (pages with enough stopword antecedents).
    #[default]
    Spotsigs,
    /// Word shingles of a short text ([`words`]).
    Words,
    /// Sentence shingles ([`shingles`]).
    Sentences,
    /// SpotSigs of every block of a page whose main region has almost no prose.
    Page,
}

impl Family {
    /// A family of pages with little text of their own (word shingles, or the whole page's
    /// SpotSigs): such a page keeps a template sample and is matched across templates only
    /// (and, with text rules 3 and later, across hosts only: [`crate::dedup`]).
    pub fn short(self) -> bool {
        matches!(self, Family::Words | Family::Page)
    }
}

impl Signed {
    /// The first 64 bits of the fingerprint.
    pub fn fp64(&self) -> u64 {
        self.fingerprint.first().copied().unwrap_or(0)
    }
}

/// Runs the signing path.
pub struct Signer {
    config: SignatureConfig,
    tokenizer: Tokenizer,
    strip: StripOptions,
    spot: SpotParams,
    shingles: ShingleParams,
    /// The shipped lists of every other language, for pages not in the index language.
    others: Vec<(Language, Tokenizer)>,
    /// For text in a language without shipped lists: every word is prose.
    unlisted: Tokenizer,
    /// The index language's shipped lists (the language guess counts them as its own even
    /// when the configured stopwords replace them).
    shipped: WordLists,
}

/// Words a region (or page) must have before a page that the index language cannot sign
/// is signed in another language ([`Signer::other_language`]).
pub const OTHER_LANGUAGE_MIN_WORDS: usize = 25;

/// Text in a language without lists is signed from its blocks of at least this many words
/// (sentences, not menu entries or names).
pub const UNLISTED_MIN_BLOCK_WORDS: usize = 8;

/// Words a language guess reads at most: enough for a share of stopwords to be clear, and
/// a bound on its cost on large pages.
pub const GUESS_WORDS: usize = 2_000;

/// UAX #29 words of a text.
fn word_count(text: &str) -> usize {
    let mut n = 0;
    text::for_each_word(text, |_| n += 1);
    n
}

/// Which blocks of a page [`Signer::select`] signed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SignedBlocks {
    /// Every block of the page, not the main region.
    pub(crate) whole: bool,
    /// Only blocks of at least this many words (0: all of them).
    pub(crate) min_block_words: usize,
}

impl Signer {
    /// A signer for validated settings.
    pub fn new(config: &SignatureConfig) -> Result<Signer, SignatureConfigError> {
        config.validate()?;
        let lang = config.language;
        let stop: Vec<String> = match &config.stopwords {
            Some(s) => s.clone(),
            None => lang.stopwords().into_iter().map(String::from).collect(),
        };
        let ante: Vec<String> = match &config.antecedents {
            Some(a) => a.clone(),
            None => lang.antecedents().into_iter().map(String::from).collect(),
        };
        let lists = WordLists::new(&stop, &ante);
        if lists.antecedent_count() == 0 {
            return Err(SignatureConfigError::NoAntecedents);
        }
        Ok(Signer {
            config: config.clone(),
            tokenizer: Tokenizer::new(lists, lang, config.stem),
            strip: config.strip_options(),
            spot: SpotParams {
                distance: config.spot_distance,
                chain: config.chain_len,
            },
            shingles: ShingleParams {
                k: config.sentence_sample as usize,
                ..ShingleParams::default()
            },
            others: Language::ALL
                .iter()
                .filter(|&&l| l != lang)
                .map(|&l| {
                    let lists = WordLists::for_language(l);
                    (l, Tokenizer::uncached(lists, l, config.stem))
                })
                .collect(),
            unlisted: Tokenizer::uncached(WordLists::every_word(), lang, false),
            shipped: WordLists::for_language(lang),
        })
    }

    /// The settings.
    pub fn config(&self) -> &SignatureConfig {
        &self.config
    }

    /// Tokenizes the blocks of the configured content that are not link-dominated (with
    /// sentence shingles, every sentence of a block is a block of its own).
    pub fn tokens(&self, text: &Stripped, out: &mut Tokens) {
        out.clear();
        for t in self.signed_blocks(text) {
            self.push_block(t, out);
        }
    }

    /// The texts of the blocks that are signed: the configured content, without the
    /// link-dominated blocks.
    pub fn signed_blocks<'a>(&self, text: &'a Stripped) -> impl Iterator<Item = &'a str> + 'a {
        self.blocks_of(text, self.config.content == Content::All)
    }

    /// The texts of the blocks that are not link-dominated: of the main region, or of the
    /// whole page (`all`).
    fn blocks_of<'a>(&self, text: &'a Stripped, all: bool) -> impl Iterator<Item = &'a str> + 'a {
        let range = if all {
            0..text.blocks.len()
        } else {
            text::main_region(&text.blocks)
        };
        let max_link_density = self.config.max_link_density;
        text.blocks[range]
            .iter()
            .filter(move |b| b.link_bytes as f64 <= max_link_density * (b.end - b.start) as f64)
            .map(|b| text.block_text(b))
    }

    fn push_block(&self, block: &str, out: &mut Tokens) {
        match self.config.features {
            Features::Spotsigs => self.tokenizer.push_block(block, out),
            Features::Sentences => {
                for s in shingles::sentences(block) {
                    self.tokenizer.push_block(s, out);
                }
            }
        }
    }

    /// The signature set of tokens from [`Signer::tokens`], and its family: SpotSigs, or
    /// the word shingles of a short text ([`words`]), or sentence shingles.
    pub fn signatures(&self, tokens: &Tokens) -> (Signatures, Family) {
        match self.config.features {
            Features::Spotsigs => {
                let sigs = spotsigs::spotsigs(tokens, self.spot);
                if self.is_short(sigs.set_len()) {
                    let k = self.config.short_shingle as usize;
                    (words::word_shingles(tokens, k), Family::Words)
                } else {
                    (sigs, Family::Spotsigs)
                }
            }
            Features::Sentences => (
                shingles::sentence_shingles(tokens, self.shingles),
                Family::Sentences,
            ),
        }
    }

    /// The signatures of `family` made from `tokens`, as strings, in text order.
    fn strings(&self, tokens: &Tokens, family: Family) -> Vec<String> {
        match family {
            Family::Spotsigs | Family::Page => spotsigs::spotsig_strings(tokens, self.spot),
            Family::Words => {
                words::word_shingle_strings(tokens, self.config.short_shingle as usize)
            }
            Family::Sentences => shingles::sentence_strings(tokens, self.shingles),
        }
    }

    /// Signs one page (any text; never panics).
    pub fn sign(&self, html: &str) -> Signed {
        self.sign_timed(html).0
    }

    /// Signs a page and says how long the markup stripping took (the rest of the time went
    /// to tokens, signatures and the fingerprint).
    pub fn sign_timed(&self, html: &str) -> (Signed, std::time::Duration) {
        let started = std::time::Instant::now();
        let text = text::strip(html, &self.strip);
        let strip_time = started.elapsed();
        let (tokens, sigs, family, source) = self.select(&text);
        let fp = fingerprint(&sigs, self.config.fingerprint, self.config.fingerprint_bits);
        let short = if self.config.software_text() {
            self.short_blocks(&text, &sigs, family, source)
        } else {
            ShortBlocks::default()
        };
        let long = self.config.short_by_length() && tokens.len() >= LONG_WORDS;
        let sample = if family.short() && !long {
            template::sample(&text)
        } else {
            Vec::new()
        };
        let identity = self.config.identities().then(|| identity::of(&text.text));
        let title = self
            .config
            .identities()
            .then(|| identity::title(&text))
            .flatten();
        let signed = Signed {
            text,
            sigs,
            fingerprint: fp,
            tokens: tokens.len(),
            family,
            template: sample,
            identity,
            title,
            short,
        };
        (signed, strip_time)
    }

    /// The short blocks of a page signed as `family` from the blocks `source` names, with
    /// signatures `sigs` ([`software`]): a block's own signatures are made as the page's
    /// are (SpotSigs chains, or word shingles for a page signed by them), in the index
    /// language.
    fn short_blocks(
        &self,
        text: &Stripped,
        sigs: &Signatures,
        family: Family,
        source: SignedBlocks,
    ) -> ShortBlocks {
        let signed = if source.whole {
            0..text.blocks.len()
        } else {
            text::main_region(&text.blocks)
        };
        let k = self.config.short_shingle as usize;
        software::of(
            text,
            self.config.max_link_density,
            self.config.host_text(),
            signed,
            sigs,
            |t, out| self.tokenizer.push_block(t, out),
            |tokens| match family {
                Family::Words => words::word_shingles(tokens, k).hashes().collect(),
                Family::Spotsigs | Family::Page => {
                    spotsigs::spotsigs(tokens, self.spot).hashes().collect()
                }
                Family::Sentences => Vec::new(),
            },
        )
    }

    /// The tokens a page is signed from, its signatures and their family: the main
    /// region's SpotSigs; or its word shingles when it has fewer than `short-below`
    /// SpotSigs; or, when those are fewer than `short-below` too (the region has almost no
    /// prose: the extraction missed the article, or the page has none), the SpotSigs of
    /// every block of the page, if that gives `short-below` of them.
    pub(crate) fn select(&self, text: &Stripped) -> (Tokens, Signatures, Family, SignedBlocks) {
        let (tokens, sigs, family) = self.select_in_language(text);
        if self.try_other_languages(&tokens, &sigs, family) && self.config.content == Content::Main
        {
            let signed = sigs.set_len() >= self.config.short_below as usize;
            let attempts = [
                (self.blocks_of(text, false).collect(), false),
                (self.blocks_of(text, true).collect(), true),
            ];
            if let Some(other) = self.other_language(&attempts, signed) {
                return other;
            }
        }
        let whole = family == Family::Page || self.config.content == Content::All;
        let source = SignedBlocks {
            whole,
            min_block_words: 0,
        };
        (tokens, sigs, family, source)
    }

    /// The texts of the blocks `source` names.
    pub(crate) fn source_blocks<'a>(
        &self,
        text: &'a Stripped,
        source: SignedBlocks,
    ) -> impl Iterator<Item = &'a str> + 'a {
        self.blocks_of(text, source.whole)
            .filter(move |b| source.min_block_words == 0 || word_count(b) >= source.min_block_words)
    }

    /// A page the index language signs only as a short page, or not at all (fewer than
    /// `short-below` signatures of every kind), with at least [`OTHER_LANGUAGE_MIN_WORDS`]
    /// words in its main region, else in its whole page, may be written in another
    /// language. Its language is the shipped list that covers the most of its words, if
    /// that is at least a tenth of them and twice what the index language's list covers
    /// (running text is a third to a half stopwords in every listed language; a menu or a
    /// caption in the index language is not); the text is then signed as a page of that
    /// language is (its stemmer, stopwords and antecedents; SpotSigs, or word shingles when
    /// short). When no list covers it and the index language gave nothing (Chinese,
    /// Japanese, Korean, Thai, …, or lists of product names), the text is signed by the
    /// word shingles of its blocks of at least [`UNLISTED_MIN_BLOCK_WORDS`] words (UAX #29
    /// words: a Han or kana character is a word, so these are character shingles there),
    /// every window counting as prose. Such a page is in a short family, except SpotSigs
    /// of its main region: it keeps a template sample and is matched across templates only.
    fn other_language(
        &self,
        attempts: &[(Vec<&str>, bool)],
        signed_in_language: bool,
    ) -> Option<(Tokens, Signatures, Family, SignedBlocks)> {
        let enough = self.config.short_below as usize;
        for (blocks, whole) in attempts {
            let (words, best) = self.guess_language(blocks);
            if words < OTHER_LANGUAGE_MIN_WORDS {
                continue;
            }
            let mut tokens = Tokens::default();
            let mut source = SignedBlocks {
                whole: *whole,
                min_block_words: 0,
            };
            let (sigs, family) = match best {
                Some(i) => {
                    let tok = &self.others[i].1;
                    for b in blocks {
                        tok.push_block(b, &mut tokens);
                    }
                    match self.signatures(&tokens) {
                        (sigs, Family::Spotsigs) if *whole => (sigs, Family::Page),
                        found => found,
                    }
                }
                None if signed_in_language => return None,
                None => {
                    source.min_block_words = UNLISTED_MIN_BLOCK_WORDS;
                    for b in blocks
                        .iter()
                        .filter(|b| word_count(b) >= UNLISTED_MIN_BLOCK_WORDS)
                    {
                        self.unlisted.push_block(b, &mut tokens);
                    }
                    let k = self.config.short_shingle as usize;
                    (words::word_shingles(&tokens, k), Family::Words)
                }
            };
            if sigs.set_len() >= enough {
                return Some((tokens, sigs, family, source));
            }
        }
        None
    }

    /// Whether a text the index language signed as `family` with `sigs` may be tried in
    /// other languages ([`Signer::other_language`]).
    fn try_other_languages(&self, tokens: &Tokens, sigs: &Signatures, family: Family) -> bool {
        let sparse = self.config.sparse_spots()
            && family == Family::Spotsigs
            && sigs.set_len() * SPARSE_SPOT_WORDS < tokens.len();
        (family.short() || sigs.set_len() < self.config.short_below as usize || sparse)
            && self.config.text_rules >= 2
            && self.config.short_shingle > 0
            && self.config.features.is_spotsigs()
    }

    /// The words of `blocks` (counted up to [`GUESS_WORDS`]) and the index in `others` of
    /// the language whose stopwords cover the most of them, if it covers at least a tenth
    /// and twice the index language's share (its shipped list's or the configured one's,
    /// whichever covers more).
    fn guess_language(&self, blocks: &[&str]) -> (usize, Option<usize>) {
        let mut hits = vec![0usize; self.others.len()];
        let (mut words, mut own) = (0usize, 0usize);
        let mut lower = String::new();
        let configured = self.tokenizer.lists();
        for b in blocks {
            if words >= GUESS_WORDS {
                break;
            }
            text::for_each_word(b, |w| {
                if words >= GUESS_WORDS {
                    return;
                }
                words += 1;
                lower.clear();
                text::push_lowercase(&mut lower, w);
                own +=
                    (configured.is_stopword(&lower) || self.shipped.is_stopword(&lower)) as usize;
                for (i, (_, t)) in self.others.iter().enumerate() {
                    hits[i] += t.lists().is_stopword(&lower) as usize;
                }
            });
        }
        let best = (0..hits.len())
            .max_by_key(|&i| (hits[i], std::cmp::Reverse(i)))
            .filter(|&i| hits[i] * 10 >= words && hits[i] > 2 * own && hits[i] > 0);
        (words, best)
    }

    /// The index language's choice ([`Signer::select`] before the other languages).
    fn select_in_language(&self, text: &Stripped) -> (Tokens, Signatures, Family) {
        let mut tokens = Tokens::default();
        self.tokens(text, &mut tokens);
        let (sigs, family) = self.signatures(&tokens);
        let enough = self.config.short_below as usize;
        if family == Family::Words
            && sigs.set_len() < enough
            && self.config.content == Content::Main
        {
            let mut all = Tokens::default();
            for t in self.blocks_of(text, true) {
                self.push_block(t, &mut all);
            }
            let page = spotsigs::spotsigs(&all, self.spot);
            if page.set_len() >= enough {
                return (all, page, Family::Page);
            }
        }
        (tokens, sigs, family)
    }

    /// Whether a text with `spot` distinct SpotSigs is signed by its word shingles.
    fn is_short(&self, spot: usize) -> bool {
        self.config.short_shingle > 0 && spot < self.config.short_below as usize
    }

    /// The signatures of `html` as strings, for inspection.
    pub fn signature_strings(&self, html: &str) -> Vec<String> {
        let text = text::strip(html, &self.strip);
        let (tokens, _, family, _) = self.select(&text);
        self.strings(&tokens, family)
    }

    /// Signs plain text (no markup): every non-empty line is a block, all of them signed.
    /// For texts given inline, e.g. a result set's snippets or bodies.
    pub fn sign_text(&self, plain: &str) -> Signed {
        let (tokens, sigs, family) = self.select_text(plain);
        let fp = fingerprint(&sigs, self.config.fingerprint, self.config.fingerprint_bits);
        Signed {
            text: Stripped {
                text: plain.to_string(),
                ..Stripped::default()
            },
            sigs,
            fingerprint: fp,
            tokens: tokens.len(),
            family,
            template: Vec::new(),
            identity: self.config.identities().then(|| identity::of(plain)),
            title: None,
            short: ShortBlocks::default(),
        }
    }

    /// The signatures of plain text as strings ([`Signer::sign_text`]'s blocks).
    pub fn text_signature_strings(&self, plain: &str) -> Vec<String> {
        let (tokens, _, family) = self.select_text(plain);
        self.strings(&tokens, family)
    }

    /// The tokens, signatures and family of plain text: its lines in the index language,
    /// else, as for a page, in another ([`Signer::other_language`]).
    fn select_text(&self, plain: &str) -> (Tokens, Signatures, Family) {
        let mut tokens = Tokens::default();
        self.text_tokens(plain, &mut tokens);
        let (sigs, family) = self.signatures(&tokens);
        if self.try_other_languages(&tokens, &sigs, family) {
            let lines: Vec<&str> = plain.lines().filter(|l| !l.trim().is_empty()).collect();
            let signed = sigs.set_len() >= self.config.short_below as usize;
            if let Some((t, s, f, _)) = self.other_language(&[(lines, false)], signed) {
                return (t, s, f);
            }
        }
        (tokens, sigs, family)
    }

    fn text_tokens(&self, plain: &str, out: &mut Tokens) {
        out.clear();
        for line in plain.lines().filter(|l| !l.trim().is_empty()) {
            self.push_block(line, out);
        }
    }

    /// The hash a signature string has in a signature set (`antecedent:t1:…:tc`, or a
    /// sentence's kept words joined by spaces).
    pub fn signature_hash(s: &str) -> u32 {
        crc32fast::hash(s.as_bytes())
    }
}

#[cfg(test)]
mod tests;
