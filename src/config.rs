//! One validated configuration from flags, `NEARDUP_*` environment variables and an
//! optional TOML file, with the same names everywhere.
//!
//! A flag `--spot-distance` is the variable `NEARDUP_SPOT_DISTANCE` and the key
//! `spot-distance` in the file's section for its group (`[signature]`, `[detect]`,
//! `[dedup]`, `[kafka]`, `[stage]`, `[replay]`, `[serve]`). Unknown keys in the file are
//! rejected with the file name and the key.
//!
//! A command line's option groups ([`Options`]; clap fills each from its flag, then its
//! variable) are laid over the file once, in [`Config::resolve`], which fills the defaults
//! and validates: precedence flag, variable, file, default. Each layer owns its settings
//! type and its defaults: the core its [`IndexParams`] and [`SignatureConfig`], serving its
//! [`crate::serving::Limits`], the HTTP server its [`crate::http::HttpLimits`], file mode
//! its [`DedupSettings`] (here), and the stage its `StageSettings`, which it builds from the
//! resolved [`Config`]. Defaults shared by several commands are the named constants below.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;
use serde::{Deserialize, Serialize};

use crate::index::{IndexParams, Method};
use crate::signature::{Content, Features, FingerprintKind, Measure, SignatureConfig};
/// How logs are written (the telemetry layer's setting).
pub use crate::telemetry::LogFormat;
use crate::text::{Language, StripMode};

use neardup_core::impl_from_str_serde;

/// Index directory of `dedup`, `run` and `replay`.
pub const DEFAULT_INDEX: &str = "neardup-index";
/// Largest input record, bytes (`dedup`, `run`, `replay`): larger ones are dead letters.
pub const DEFAULT_MAX_RECORD_BYTES: usize = 64 << 20;
/// The HTTP listener of `run` and `serve`.
pub const DEFAULT_LISTEN: &str = "0.0.0.0:9464";
/// `dedup`'s unique output (`-`: stdout).
pub const DEFAULT_UNIQUE_OUTPUT: &str = "-";
/// `dedup`'s dead letters, created on the first one.
pub const DEFAULT_DEAD_LETTER_FILE: &str = "neardup-dead-letter.jsonl";

/// Signing threads when none are set: one a core this process may use.
pub fn default_jobs() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get())
}

/// Environment variables renamed with their flags (old, new): the old name is still read when
/// the new one is not set.
pub const RENAMED_VARIABLES: [(&str, &str); 2] = [
    ("NEARDUP_RH", "NEARDUP_HAMMING_RADIUS"),
    ("NEARDUP_M", "NEARDUP_FINGERPRINT_BLOCKS"),
];

/// Sets each renamed variable's new name from its old one where only the old one is set;
/// called by `main` before the command line is parsed, while the process has one thread.
pub fn read_renamed_variables() {
    for (old, new) in RENAMED_VARIABLES {
        if std::env::var_os(new).is_none() {
            if let Some(v) = std::env::var_os(old) {
                std::env::set_var(new, v);
            }
        }
    }
}

/// Fills every `None` field of `self` from `other`.
macro_rules! or_fields {
    ($self:ident, $other:ident; $($f:ident),* $(,)?) => {
        $( if $self.$f.is_none() { $self.$f = $other.$f; } )*
    };
}

/// Signing settings (`[signature]` in the file).
#[derive(Args, Deserialize, Debug, Clone, Default)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct SignatureOptions {
    /// Language of the stemmer and the stopword lists
    #[arg(long, env = "NEARDUP_LANGUAGE")]
    pub language: Option<Language>,
    /// Stem tokens before building signatures [default: true]
    #[arg(long, env = "NEARDUP_STEM", num_args = 0..=1, default_missing_value = "true")]
    pub stem: Option<bool>,
    /// Antecedents, comma-separated [default: the language's list; English: a,an,the,is,was,are,were,be,been,has,have,had,will,would,said,that,this]
    #[arg(long, env = "NEARDUP_ANTECEDENTS", value_delimiter = ',')]
    pub antecedents: Option<Vec<String>>,
    /// File with one stopword per line replacing the language's list
    #[arg(long, env = "NEARDUP_STOPWORDS_FILE")]
    pub stopwords_file: Option<PathBuf>,
    /// Spot distance d [default: 1]
    #[arg(long, env = "NEARDUP_SPOT_DISTANCE")]
    pub spot_distance: Option<u32>,
    /// Chain length c [default: 2]
    #[arg(long, env = "NEARDUP_CHAIN_LEN")]
    pub chain_len: Option<u32>,
    /// Signed text: main (the dense text region) or all (every block) [default: main]
    #[arg(long, env = "NEARDUP_CONTENT")]
    pub content: Option<Content>,
    /// Leave out blocks whose share of link text exceeds this [default: 0.5]
    #[arg(long, env = "NEARDUP_MAX_LINK_DENSITY")]
    pub max_link_density: Option<f64>,
    /// Markup stripping: bytes (one pass over the bytes), tokens (html5ever's tokenizer, the
    /// reference) or tree (the HTML5 tree) [default: bytes]
    #[arg(long, env = "NEARDUP_STRIP")]
    pub strip: Option<StripMode>,
    /// Bytes of HTML considered per page [default: 16777216]
    #[arg(long, env = "NEARDUP_MAX_PAGE_BYTES")]
    pub max_page_bytes: Option<usize>,
    /// Fingerprint: minhash1 or simhash [default: minhash1]
    #[arg(long, env = "NEARDUP_FINGERPRINT")]
    pub fingerprint: Option<FingerprintKind>,
    /// Fingerprint bits: 64, 128 or 256 (alg-h) [default: 64]
    #[arg(long, env = "NEARDUP_FINGERPRINT_BITS")]
    pub fingerprint_bits: Option<u32>,
    /// Word-shingle length of the short-text family, 0 = off [default: 3]
    #[arg(long, env = "NEARDUP_SHORT_SHINGLE")]
    pub short_shingle: Option<u32>,
    /// Pages with fewer distinct SpotSigs than this are signed by word shingles [default: 10]
    #[arg(long, env = "NEARDUP_SHORT_BELOW")]
    pub short_below: Option<u32>,
    /// Method sentences only: distinct sentence hashes kept per page, the smallest
    /// [default: 64]
    #[arg(long, env = "NEARDUP_SENTENCE_SAMPLE")]
    pub sentence_sample: Option<u32>,
    /// Revision of the text rules: 10 (two pages of one host are matched at similarity 0.7
    /// or more, unless they are one page), 9 (a long text with under one SpotSig in 40 words is
    /// signed in the language whose stopwords cover it, as a short one is), 8 (a page of 600
    /// words or more is not short, however few SpotSigs its language gives it), 7 (two pages of one host signed on the same text that
    /// show less than half of the same blocks are kept apart), 6 (a page carries its short
    /// blocks, and those that are template text of 3 hosts are software text, left out of
    /// matching), 5 (a page carries
    /// the identity of its whole visible text; two pages of one identity are never kept
    /// apart), 4 (a container named a dialog that
    /// is not rendered counts against the main region), 3 (ARIA roles are container hints; a
    /// short page matches across hosts only), 2 (link scopes of the HTML tree rules, pages in
    /// other languages signed in their language) or 1 (as indexes made before them, which
    /// read as 1) [default: 10]
    #[arg(long, env = "NEARDUP_TEXT_RULES")]
    pub text_rules: Option<u32>,
}

impl SignatureOptions {
    /// Fills every field left open here from `o` (the config file).
    fn or(mut self, o: SignatureOptions) -> SignatureOptions {
        or_fields!(self, o; language, stem, antecedents, stopwords_file, spot_distance,
            chain_len, content, max_link_density, strip, max_page_bytes, fingerprint, fingerprint_bits,
            short_shingle, short_below, sentence_sample, text_rules);
        self
    }

    /// The signing settings, defaults filled in (SpotSigs; [`Config::resolve`] sets the family
    /// of the method).
    pub fn resolve(&self) -> Result<SignatureConfig> {
        let d = SignatureConfig::default();
        let stopwords = match &self.stopwords_file {
            None => None,
            Some(p) => {
                let text = std::fs::read_to_string(p)
                    .with_context(|| format!("cannot read stopwords file {}", p.display()))?;
                Some(
                    text.lines()
                        .map(str::trim)
                        .filter(|l| !l.is_empty() && !l.starts_with('#'))
                        .map(str::to_lowercase)
                        .collect(),
                )
            }
        };
        let c = SignatureConfig {
            language: self.language.unwrap_or(d.language),
            stem: self.stem.unwrap_or(d.stem),
            stopwords,
            antecedents: self.antecedents.clone(),
            spot_distance: self.spot_distance.unwrap_or(d.spot_distance),
            chain_len: self.chain_len.unwrap_or(d.chain_len),
            content: self.content.unwrap_or(d.content),
            max_link_density: self.max_link_density.unwrap_or(d.max_link_density),
            strip: self.strip.unwrap_or(d.strip),
            max_page_bytes: self.max_page_bytes.unwrap_or(d.max_page_bytes),
            fingerprint: self.fingerprint.unwrap_or(d.fingerprint),
            fingerprint_bits: self.fingerprint_bits.unwrap_or(d.fingerprint_bits),
            short_shingle: self.short_shingle.unwrap_or(d.short_shingle),
            short_below: self.short_below.unwrap_or(d.short_below),
            features: d.features,
            sentence_sample: self.sentence_sample.unwrap_or(d.sentence_sample),
            text_rules: self.text_rules.unwrap_or(d.text_rules),
        };
        c.validate()?;
        Ok(c)
    }
}

/// Detection settings (`[detect]` in the file), except method and threshold.
#[derive(Args, Deserialize, Debug, Clone, Default)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct DetectOptions {
    /// Similarity measure: jaccard (sets) or weighted (multisets) [default: jaccard]
    #[arg(long, env = "NEARDUP_MEASURE")]
    pub measure: Option<Measure>,
    /// Hamming radius of alg-g / alg-h: fingerprints at most this many bits apart are
    /// candidates (formerly --rh) [default: 3]
    #[arg(
        long = "hamming-radius",
        visible_alias = "rh",
        value_name = "BITS",
        env = "NEARDUP_HAMMING_RADIUS"
    )]
    #[serde(rename = "hamming-radius", alias = "rh")]
    pub rh: Option<u32>,
    /// Blocks (alg-g) or groups (alg-h) the fingerprint is cut into; 0 picks the fewest whose
    /// prefixes fill the tables' directory (formerly --m) [default: 0]
    #[arg(
        long = "fingerprint-blocks",
        visible_alias = "m",
        value_name = "N",
        env = "NEARDUP_FINGERPRINT_BLOCKS"
    )]
    #[serde(rename = "fingerprint-blocks", alias = "m")]
    pub m: Option<u32>,
    /// Pages with fewer distinct signatures are skipped [default: 10; method sentences: 5]
    #[arg(long, env = "NEARDUP_MIN_SIGNATURES")]
    pub min_signatures: Option<u32>,
    /// Count document frequencies and match only on informative signatures (IDF band,
    /// host template text): true or false [default: false]
    #[arg(long, env = "NEARDUP_FREQUENCIES", num_args = 0..=1, default_missing_value = "true")]
    pub frequencies: Option<bool>,
    /// Remove index entries first seen longer ago than this, e.g. 7d, a twentieth of it at a
    /// time (default: keep)
    #[arg(long, env = "NEARDUP_RETENTION", value_parser = parse_duration)]
    #[serde(default, deserialize_with = "de_duration")]
    pub retention: Option<Duration>,
    /// Keep at most this many pages: past it, every 10,000 decisions the oldest are removed
    /// down to 95 % of it, which bounds the index's memory (default: no cap)
    #[arg(long, value_name = "N", env = "NEARDUP_MAX_PAGES")]
    pub max_pages: Option<u64>,
}

impl DetectOptions {
    fn or(mut self, o: DetectOptions) -> DetectOptions {
        or_fields!(self, o; measure, rh, m, min_signatures, frequencies, retention, max_pages);
        self
    }
}

/// Parses `7d`, `36h`, `90m`, `1w`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s).map_err(|e| format!("invalid duration {s:?}: {e}"))
}

fn de_duration<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    let s: Option<String> = Option::deserialize(d)?;
    s.map(|s| parse_duration(&s).map_err(serde::de::Error::custom))
        .transpose()
}

/// Method and threshold of one run (a single value each).
#[derive(Args, Deserialize, Debug, Clone, Default)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct MethodOptions {
    /// Candidate index: alg-g, alg-h, spotsigs, chain or sentences [default: spotsigs]
    #[arg(long, env = "NEARDUP_METHOD")]
    pub method: Option<Method>,
    /// Similarity threshold τ in (0, 1] [default: 0.5]
    #[arg(long, env = "NEARDUP_THRESHOLD")]
    pub threshold: Option<f64>,
}

/// The optional TOML file.
#[derive(Deserialize, Debug, Clone, Default)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct FileConfig {
    /// `[signature]`
    #[serde(default)]
    pub signature: SignatureOptions,
    /// `[detect]`: detection settings, method and threshold.
    #[serde(default)]
    pub detect: DetectFile,
    /// `[dedup]`: file-mode settings.
    #[serde(default)]
    pub dedup: DedupOptions,
    /// `[kafka]`: brokers, topics, group and client properties of the stage.
    #[serde(default)]
    pub kafka: KafkaOptions,
    /// `[stage]`: the stage's index, HTTP listener, drain and limits.
    #[serde(default)]
    pub stage: StageOptions,
    /// `[replay]`: where a replay starts, dry run.
    #[serde(default)]
    pub replay: ReplayOptions,
    /// `[serve]`: limits of the serving endpoints (`run`, `replay`, `serve`).
    #[serde(default)]
    pub serve: ServeOptions,
}

/// `[detect]` in the file: [`DetectOptions`] plus method and threshold.
#[derive(Deserialize, Debug, Clone, Default)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct DetectFile {
    /// Candidate index.
    pub method: Option<Method>,
    /// Similarity threshold τ.
    pub threshold: Option<f64>,
    /// Similarity measure.
    pub measure: Option<Measure>,
    /// Hamming radius (`hamming-radius`, formerly `rh`).
    #[serde(rename = "hamming-radius", alias = "rh")]
    pub rh: Option<u32>,
    /// Blocks or groups (`fingerprint-blocks`, formerly `m`).
    #[serde(rename = "fingerprint-blocks", alias = "m")]
    pub m: Option<u32>,
    /// Minimum distinct signatures.
    pub min_signatures: Option<u32>,
    /// Document frequencies on or off.
    pub frequencies: Option<bool>,
    /// Retention window, e.g. "7d".
    #[serde(default, deserialize_with = "de_duration")]
    pub retention: Option<Duration>,
    /// The most pages the index keeps.
    pub max_pages: Option<u64>,
}

/// File-mode settings (`[dedup]` in the file).
#[derive(Args, Deserialize, Debug, Clone, Default)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct DedupOptions {
    /// Index directory [default: neardup-index]
    #[arg(long, env = "NEARDUP_INDEX")]
    pub index: Option<PathBuf>,
    /// Output of unique and skipped records, JSONL; - is stdout [default: -]
    #[arg(long, env = "NEARDUP_UNIQUE")]
    pub unique: Option<PathBuf>,
    /// Output of duplicate records, JSONL [default: the unique output]
    #[arg(long, env = "NEARDUP_DUPLICATES")]
    pub duplicates: Option<PathBuf>,
    /// Output of dead letters, JSONL [default: neardup-dead-letter.jsonl, created on the first bad record]
    #[arg(long, env = "NEARDUP_DEAD_LETTER")]
    pub dead_letter: Option<PathBuf>,
    /// Leave the stripped text out of tagged records
    #[arg(long, env = "NEARDUP_NO_TEXT", num_args = 0..=1, default_missing_value = "true")]
    pub no_text: Option<bool>,
    /// Largest input record in bytes; larger ones are dead letters [default: 67108864]
    #[arg(long, env = "NEARDUP_MAX_RECORD_BYTES")]
    pub max_record_bytes: Option<usize>,
    /// Signing threads [default: the number of cores]
    #[arg(long, env = "NEARDUP_JOBS")]
    pub jobs: Option<usize>,
}

impl DedupOptions {
    fn or(mut self, o: DedupOptions) -> DedupOptions {
        or_fields!(self, o; index, unique, duplicates, dead_letter, no_text, max_record_bytes, jobs);
        self
    }
}

/// Kafka settings of `neardup run` and `neardup replay` (`[kafka]` in the file).
#[derive(Args, Deserialize, Debug, Clone, Default)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct KafkaOptions {
    /// Bootstrap brokers, host:port,host:port [default: 127.0.0.1:9092]
    #[arg(long, env = "NEARDUP_BROKERS")]
    pub brokers: Option<String>,
    /// Consumer group [default: neardup; replay: neardup-replay]
    #[arg(long, env = "NEARDUP_GROUP_ID")]
    pub group_id: Option<String>,
    /// Static group membership: this member's stable identity (group.instance.id), e.g. the
    /// pod name; a restarted member with the same id takes its partitions back at once.
    /// "off" for dynamic membership [default: an id kept in the index directory]
    #[arg(long, env = "NEARDUP_INSTANCE_ID")]
    pub instance_id: Option<String>,
    /// Input topics, comma-separated [default: pages]
    #[arg(long, env = "NEARDUP_INPUT_TOPICS", value_delimiter = ',')]
    pub input_topics: Option<Vec<String>>,
    /// Topic of unique and skipped records [default: pages-unique]
    #[arg(long, env = "NEARDUP_UNIQUE_TOPIC")]
    pub unique_topic: Option<String>,
    /// Topic of duplicate records [default: pages-duplicate]
    #[arg(long, env = "NEARDUP_DUPLICATE_TOPIC")]
    pub duplicate_topic: Option<String>,
    /// Topic of dead letters [default: pages-dead-letter]
    #[arg(long, env = "NEARDUP_DEAD_LETTER_TOPIC")]
    pub dead_letter_topic: Option<String>,
    /// Internal topic of signed pages, written by signers and read by the decider
    /// [default: pages-signed]
    #[arg(long, env = "NEARDUP_SIGNED_TOPIC")]
    pub signed_topic: Option<String>,
    /// Internal topic of a sharded decider's votes, one partition a shard, written by the
    /// shards and read by the aggregator [default: pages-votes]
    #[arg(long, env = "NEARDUP_VOTES_TOPIC")]
    pub votes_topic: Option<String>,
    /// Compacted topic of the decider's index mutations, from which a lost index is
    /// restored; "off" for none [default: decider pages-index-changelog, all off]
    #[arg(long, env = "NEARDUP_CHANGELOG_TOPIC")]
    pub changelog_topic: Option<String>,
    /// A client property KEY=VALUE passed to the Kafka client (repeatable; in the variable,
    /// separated by ';'), e.g. security.protocol=SASL_SSL
    #[arg(long, env = "NEARDUP_KAFKA_PROPERTY", value_delimiter = ';')]
    pub kafka_property: Option<Vec<String>>,
    /// A file of KEY=VALUE client properties, one per line (# comments), e.g. mounted from a
    /// secret with sasl.username and sasl.password
    #[arg(long, env = "NEARDUP_KAFKA_PROPERTIES_FILE")]
    pub kafka_properties_file: Option<PathBuf>,
    /// at-least-once (an input may be answered again after a crash, with the same bytes) or
    /// exactly-once (outputs and input offsets in Kafka transactions: a read_committed
    /// consumer sees each input answered once; needs brokers 2.5 or later)
    /// [default: at-least-once]
    #[arg(long, env = "NEARDUP_GUARANTEE")]
    pub guarantee: Option<Guarantee>,
    /// Exactly-once: how long a transaction collects outputs before it commits, e.g. 250ms;
    /// a read_committed consumer sees an output at the latest this long after it was decided
    /// [default: 250ms]
    #[arg(long, env = "NEARDUP_TRANSACTION_INTERVAL", value_parser = parse_duration)]
    #[serde(default, deserialize_with = "de_duration")]
    pub transaction_interval: Option<Duration>,
}

impl KafkaOptions {
    fn or(mut self, o: KafkaOptions) -> KafkaOptions {
        or_fields!(self, o; brokers, group_id, instance_id, input_topics, unique_topic, duplicate_topic,
            dead_letter_topic, signed_topic, votes_topic, changelog_topic, kafka_property, kafka_properties_file,
            guarantee, transaction_interval);
        self
    }
}

/// What a `neardup run` process does (docs/dev/architecture.md §6).
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    /// Both: sign and decide in one process (the single-process stage).
    #[default]
    All,
    /// Stateless: decode, strip and sign input pages into the signed topic (any number of
    /// replicas).
    Signer,
    /// Stateful: decide the signed topic's pages in order against the index (one per index).
    Decider,
    /// One of `shards` shards of a decider split by owned pages: reads every signed page in
    /// order, holds the pages whose id hashes to it and writes its votes for every page to
    /// the votes topic (docs/scale-out.md, "Past one decider").
    Shard,
    /// The aggregator of a sharded decider: decides every signed page in order from every
    /// shard's votes and writes the tagged records.
    Aggregator,
}
impl_from_str_serde!(Role);

/// What a consumer of the stage's outputs can rely on after a crash.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Guarantee {
    /// Every input is answered; after a crash some may be answered again (byte-identical).
    #[default]
    AtLeastOnce,
    /// Every input is answered once, as a `read_committed` consumer sees the outputs: outputs,
    /// dead letters, changelog records and input offsets are committed in one transaction.
    ExactlyOnce,
}
impl_from_str_serde!(Guarantee);

impl Guarantee {
    /// The guarantee's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Guarantee::AtLeastOnce => "at-least-once",
            Guarantee::ExactlyOnce => "exactly-once",
        }
    }
}

impl Role {
    /// The role's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::All => "all",
            Role::Signer => "signer",
            Role::Decider => "decider",
            Role::Shard => "shard",
            Role::Aggregator => "aggregator",
        }
    }
}

/// Settings of the stage process (`[stage]` in the file).
#[derive(Args, Deserialize, Debug, Clone, Default)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct StageOptions {
    /// all (sign and decide), signer (sign into the signed topic, any number of replicas),
    /// decider (decide the signed topic, one per index), or shard and aggregator (a decider
    /// split by owned pages: `shards` shards and one aggregator) [default: all]
    #[arg(long, env = "NEARDUP_ROLE")]
    pub role: Option<Role>,
    /// Index directory [default: neardup-index]
    #[arg(long, env = "NEARDUP_INDEX")]
    pub index: Option<PathBuf>,
    /// HTTP listener for /metrics, /healthz and /readyz; "off" for none [default: run 0.0.0.0:9464, replay off]
    #[arg(long, env = "NEARDUP_LISTEN")]
    pub listen: Option<String>,
    /// Time to drain in-flight records on SIGTERM / SIGINT, e.g. 30s [default: 30s]
    #[arg(long, env = "NEARDUP_GRACE_PERIOD", value_parser = parse_duration)]
    #[serde(default, deserialize_with = "de_duration")]
    pub grace_period: Option<Duration>,
    /// After a fatal error (the index cannot be opened or written, an output cannot be
    /// produced), how long /readyz and /metrics keep reporting it before the process exits
    /// with status 2 (3 when an exactly-once transaction cannot commit after a broker fault);
    /// SIGTERM ends the wait, e.g. 30s [default: 30s]
    #[arg(long, env = "NEARDUP_FAILURE_HOLD", value_parser = parse_duration)]
    #[serde(default, deserialize_with = "de_duration")]
    pub failure_hold: Option<Duration>,
    /// Records consumed but not yet acknowledged, at most [default: 512]
    #[arg(long, env = "NEARDUP_MAX_IN_FLIGHT")]
    pub max_in_flight: Option<usize>,
    /// Leave the stripped text out of tagged records
    #[arg(long, env = "NEARDUP_NO_TEXT", num_args = 0..=1, default_missing_value = "true")]
    pub no_text: Option<bool>,
    /// Largest input record in bytes; larger ones are dead letters [default: 67108864]
    #[arg(long, env = "NEARDUP_MAX_RECORD_BYTES")]
    pub max_record_bytes: Option<usize>,
    /// Signing threads [default: the number of cores]
    #[arg(long, env = "NEARDUP_JOBS")]
    pub jobs: Option<usize>,
    /// Logs: auto (JSON unless on a terminal), json or text [default: auto]
    #[arg(long, env = "NEARDUP_LOG_FORMAT")]
    pub log_format: Option<LogFormat>,
    /// A standby (needs exactly-once; the group session is 10 s unless set). A decider: two
    /// decider processes of one index, each with its own index directory; the one holding
    /// the lease (a group of its own) subscribes to the signed topic and decides, the other
    /// follows the changelog into its index and takes over when the first is gone (needs a
    /// changelog). A shard or the aggregator: two processes of the role read its topics; the
    /// one holding the lease writes, the other reads up to the committed offset and takes
    /// over when the first is gone
    #[arg(long, env = "NEARDUP_STANDBY", num_args = 0..=1, default_missing_value = "true")]
    pub standby: Option<bool>,
    /// A decider split by owned pages: how many shards (every shard and the aggregator
    /// take the same number; the votes topic has one partition a shard)
    #[arg(long, env = "NEARDUP_SHARDS")]
    pub shards: Option<usize>,
    /// Which shard this process is, 0 to shards − 1 (role shard; a StatefulSet's pod
    /// ordinal); with a standby also shards to 2 × shards − 1, K + shards being the other
    /// process of shard K
    #[arg(long, env = "NEARDUP_SHARD")]
    pub shard: Option<usize>,
}

impl StageOptions {
    fn or(mut self, o: StageOptions) -> StageOptions {
        or_fields!(self, o; role, index, listen, grace_period, failure_hold, max_in_flight, no_text,
            max_record_bytes, jobs, log_format, standby, shards, shard);
        self
    }
}

/// Limits of the serving endpoints `/v1/group` and `/v1/explain` (`[serve]` in the file),
/// for `run`, `replay` and `serve`.
#[derive(Args, Deserialize, Debug, Clone, Default)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ServeOptions {
    /// Items of one /v1/group request at most; more get 413 [default: 1000]
    #[arg(long, env = "NEARDUP_MAX_GROUP_ITEMS")]
    pub max_group_items: Option<usize>,
    /// Answers to repeated result sets kept in memory; 0 for none [default: 10000]
    #[arg(long, env = "NEARDUP_GROUP_CACHE_ENTRIES")]
    pub group_cache_entries: Option<usize>,
    /// How long a cached answer is used, e.g. 60s [default: 60s]
    #[arg(long, env = "NEARDUP_GROUP_CACHE_TTL", value_parser = parse_duration)]
    #[serde(default, deserialize_with = "de_duration")]
    pub group_cache_ttl: Option<Duration>,
    /// Pages whose signatures a serving process keeps in memory once read (about 0.6 kB
    /// each; size it to the index to serve every page from memory); 0 reads every page from
    /// the index every time [default: 100000]
    #[arg(long, env = "NEARDUP_SIGNATURE_CACHE_ENTRIES")]
    pub signature_cache_entries: Option<usize>,
    /// Largest HTTP request body in bytes; larger ones get 413 [default: 8388608]
    #[arg(long, env = "NEARDUP_MAX_BODY_BYTES")]
    pub max_body_bytes: Option<usize>,
    /// Time limit of one HTTP request, e.g. 10s; past it the answer is 408 [default: 10s]
    #[arg(long, env = "NEARDUP_REQUEST_TIMEOUT", value_parser = parse_duration)]
    #[serde(default, deserialize_with = "de_duration")]
    pub request_timeout: Option<Duration>,
}

impl ServeOptions {
    fn or(mut self, o: ServeOptions) -> ServeOptions {
        or_fields!(self, o; max_group_items, group_cache_entries, group_cache_ttl,
            signature_cache_entries, max_body_bytes, request_timeout);
        self
    }
}

/// Settings of `neardup replay` (`[replay]` in the file).
#[derive(Args, Deserialize, Debug, Clone, Default)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ReplayOptions {
    /// Where to start: earliest, an RFC 3339 time, or topic:partition:offset,… [default: earliest]
    #[arg(long, env = "NEARDUP_START")]
    pub start: Option<String>,
    /// Decide and count, produce nothing and leave the index unchanged
    #[arg(long, env = "NEARDUP_DRY_RUN", num_args = 0..=1, default_missing_value = "true")]
    pub dry_run: Option<bool>,
}

impl ReplayOptions {
    fn or(mut self, o: ReplayOptions) -> ReplayOptions {
        or_fields!(self, o; start, dry_run);
        self
    }
}

/// Every option group of a command line as clap filled it (flag, then variable); a command
/// leaves the groups it does not take at their defaults (all open).
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// `[signature]`
    pub signature: SignatureOptions,
    /// `[detect]`, except method and threshold
    pub detect: DetectOptions,
    /// Method and threshold (`[detect]`)
    pub method: MethodOptions,
    /// `[dedup]`
    pub dedup: DedupOptions,
    /// `[kafka]`
    pub kafka: KafkaOptions,
    /// `[stage]`
    pub stage: StageOptions,
    /// `[replay]`
    pub replay: ReplayOptions,
    /// `[serve]`
    pub serve: ServeOptions,
}

impl Options {
    /// The options with the file's values under every one left open: the one place the
    /// layers meet.
    fn over(self, file: &FileConfig) -> Options {
        let fd = &file.detect;
        Options {
            signature: self.signature.or(file.signature.clone()),
            detect: self.detect.or(DetectOptions {
                measure: fd.measure,
                rh: fd.rh,
                m: fd.m,
                min_signatures: fd.min_signatures,
                frequencies: fd.frequencies,
                retention: fd.retention,
                max_pages: fd.max_pages,
            }),
            method: MethodOptions {
                method: self.method.method.or(fd.method),
                threshold: self.method.threshold.or(fd.threshold),
            },
            dedup: self.dedup.or(file.dedup.clone()),
            kafka: self.kafka.or(file.kafka.clone()),
            stage: self.stage.or(file.stage.clone()),
            replay: self.replay.or(file.replay.clone()),
            serve: self.serve.or(file.serve.clone()),
        }
    }
}

/// File-mode settings (`neardup dedup`), resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct DedupSettings {
    /// Index directory.
    pub index: PathBuf,
    /// Unique and skipped records (`-`: stdout).
    pub unique: PathBuf,
    /// Duplicates, when not with the unique records.
    pub duplicates: Option<PathBuf>,
    /// Dead letters.
    pub dead_letter: PathBuf,
    /// Keep the stripped text in tagged records.
    pub keep_text: bool,
    /// Largest input record.
    pub max_record_bytes: usize,
    /// Signing threads.
    pub jobs: usize,
}

/// The one validated configuration of a command: its options laid over the file, the
/// defaults filled in. The stage's groups stay as options, laid over the file, for the
/// stage to build its settings from (`StageSettings::resolve`).
#[derive(Debug, Clone)]
pub struct Config {
    /// Signature and detection settings.
    pub params: IndexParams,
    /// Retention window (none: keep).
    pub retention: Option<Duration>,
    /// The most pages the index keeps (none: no cap).
    pub max_pages: Option<u64>,
    /// File mode.
    pub dedup: DedupSettings,
    /// Limits of `/v1/group` and `/v1/explain`.
    pub serving: crate::serving::Limits,
    /// Limits of the HTTP server.
    pub http: crate::http::HttpLimits,
    /// `[kafka]`, flags over the file.
    pub kafka: KafkaOptions,
    /// `[stage]`, flags over the file.
    pub stage: StageOptions,
    /// `[replay]`, flags over the file.
    pub replay: ReplayOptions,
}

impl Config {
    /// Lays `flags` over the file, fills the defaults and validates.
    pub fn resolve(flags: Options, file: &FileConfig) -> Result<Config> {
        let o = flags.over(file);
        let params = index_params(&o)?;
        let (serving, http) = serve_limits(&o.serve)?;
        let d = &o.dedup;
        let dedup = DedupSettings {
            index: d.index.clone().unwrap_or_else(|| DEFAULT_INDEX.into()),
            unique: d
                .unique
                .clone()
                .unwrap_or_else(|| DEFAULT_UNIQUE_OUTPUT.into()),
            duplicates: d.duplicates.clone(),
            dead_letter: d
                .dead_letter
                .clone()
                .unwrap_or_else(|| DEFAULT_DEAD_LETTER_FILE.into()),
            keep_text: !d.no_text.unwrap_or(false),
            max_record_bytes: d.max_record_bytes.unwrap_or(DEFAULT_MAX_RECORD_BYTES),
            jobs: d.jobs.unwrap_or_else(default_jobs),
        };
        if dedup.max_record_bytes == 0 {
            bail!("max-record-bytes must be at least 1");
        }
        if dedup.jobs == 0 {
            bail!("jobs must be at least 1");
        }
        if o.detect.max_pages == Some(0) {
            bail!("max-pages must be at least 1 (leave it out for no cap)");
        }
        Ok(Config {
            params,
            retention: o.detect.retention,
            max_pages: o.detect.max_pages,
            dedup,
            serving,
            http,
            kafka: o.kafka,
            stage: o.stage,
            replay: o.replay,
        })
    }
}

/// Reads the TOML file, if one is given.
pub fn load_file(path: Option<&Path>) -> Result<FileConfig> {
    let Some(path) = path else {
        return Ok(FileConfig::default());
    };
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read config file {}", path.display()))?;
    toml::from_str(&text).with_context(|| format!("invalid config file {}", path.display()))
}

/// The index parameters of laid-over options.
fn index_params(o: &Options) -> Result<IndexParams> {
    let det = &o.detect;
    let d = IndexParams::default();
    let method = o.method.method.unwrap_or(d.method);
    let mut signature = o.signature.resolve()?;
    signature.features = method.features();
    if signature.features != Features::Sentences {
        // a setting of the sentence family only; not kept in another index's parameters
        signature.sentence_sample = SignatureConfig::default().sentence_sample;
    }
    let p = IndexParams {
        method,
        measure: det.measure.unwrap_or(d.measure),
        threshold: o.method.threshold.unwrap_or(d.threshold),
        rh: det.rh.unwrap_or(d.rh),
        m: det.m.unwrap_or(d.m),
        min_signatures: det
            .min_signatures
            .unwrap_or(method.default_min_signatures()),
        signature,
        frequencies: det.frequencies.unwrap_or(d.frequencies),
    };
    if !(p.threshold > 0.0 && p.threshold <= 1.0) {
        bail!("threshold must be within (0, 1] (got {})", p.threshold);
    }
    Ok(p)
}

/// The serving limits of laid-over options, validated.
fn serve_limits(o: &ServeOptions) -> Result<(crate::serving::Limits, crate::http::HttpLimits)> {
    let d = crate::serving::Limits::default();
    let h = crate::http::HttpLimits::default();
    let limits = crate::serving::Limits {
        max_items: o.max_group_items.unwrap_or(d.max_items),
        cache_entries: o.group_cache_entries.unwrap_or(d.cache_entries),
        cache_ttl: o.group_cache_ttl.unwrap_or(d.cache_ttl),
        signature_cache_entries: o
            .signature_cache_entries
            .unwrap_or(d.signature_cache_entries),
    };
    let http = crate::http::HttpLimits {
        max_body_bytes: o.max_body_bytes.unwrap_or(h.max_body_bytes),
        request_timeout: o.request_timeout.unwrap_or(h.request_timeout),
        ..h
    };
    if limits.max_items == 0 {
        anyhow::bail!("max-group-items must be at least 1");
    }
    if http.max_body_bytes == 0 {
        anyhow::bail!("max-body-bytes must be at least 1");
    }
    if http.request_timeout.is_zero() {
        anyhow::bail!("request-timeout must be above zero");
    }
    Ok((limits, http))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(o: Options, file: &FileConfig) -> Result<IndexParams> {
        Config::resolve(o, file).map(|c| c.params)
    }

    #[test]
    fn file_fills_what_flags_leave_open_and_rejects_unknown_keys() {
        let file: FileConfig = toml::from_str(
            "[signature]\nspot-distance = 2\nchain-len = 3\n[detect]\nthreshold = 0.6\n\
             method = \"spotsigs\"\nretention = \"7d\"\n[dedup]\nno-text = true\n\
             [serve]\nmax-group-items = 7\n[stage]\nmax-in-flight = 9\n",
        )
        .unwrap();
        let flags = Options {
            signature: SignatureOptions {
                chain_len: Some(1),
                ..Default::default()
            },
            dedup: DedupOptions {
                jobs: Some(3),
                ..Default::default()
            },
            ..Default::default()
        };
        let c = Config::resolve(flags, &file).unwrap();
        assert_eq!(c.params.signature.spot_distance, 2);
        assert_eq!(c.params.signature.chain_len, 1, "a flag wins over the file");
        assert_eq!(c.params.threshold, 0.6);
        assert_eq!(c.params.method, Method::Spotsigs);
        assert_eq!(c.retention, Some(Duration::from_secs(7 * 86400)));
        assert!(!c.dedup.keep_text);
        assert_eq!(c.dedup.jobs, 3);
        assert_eq!(c.serving.max_items, 7);
        assert_eq!(
            c.stage.max_in_flight,
            Some(9),
            "the stage's group, laid over the file"
        );
        let err = toml::from_str::<FileConfig>("[detect]\nthreshhold = 0.5\n").unwrap_err();
        assert!(err.to_string().contains("threshhold"), "{err}");
        let bad = Options {
            method: MethodOptions {
                threshold: Some(1.5),
                ..Default::default()
            },
            ..Default::default()
        };
        assert!(params(bad, &FileConfig::default()).is_err());
    }

    /// With nothing set, every setting is its named default.
    #[test]
    fn defaults_are_the_named_constants() {
        let c = Config::resolve(Options::default(), &FileConfig::default()).unwrap();
        assert_eq!(c.params, IndexParams::default());
        assert_eq!(c.retention, None);
        assert_eq!(
            c.dedup,
            DedupSettings {
                index: DEFAULT_INDEX.into(),
                unique: DEFAULT_UNIQUE_OUTPUT.into(),
                duplicates: None,
                dead_letter: DEFAULT_DEAD_LETTER_FILE.into(),
                keep_text: true,
                max_record_bytes: DEFAULT_MAX_RECORD_BYTES,
                jobs: default_jobs(),
            }
        );
        assert_eq!(c.serving, crate::serving::Limits::default());
        for zero in [
            Options {
                dedup: DedupOptions {
                    jobs: Some(0),
                    ..Default::default()
                },
                ..Default::default()
            },
            Options {
                serve: ServeOptions {
                    max_group_items: Some(0),
                    ..Default::default()
                },
                ..Default::default()
            },
        ] {
            assert!(Config::resolve(zero, &FileConfig::default()).is_err());
        }
    }

    /// The fingerprint flags have names that say what they set; the old ones still work, on
    /// the command line and in the file.
    #[test]
    fn fingerprint_flags_keep_their_old_names() {
        use clap::Parser;
        #[derive(Parser)]
        struct T {
            #[command(flatten)]
            d: DetectOptions,
        }
        for args in [
            ["t", "--hamming-radius", "4", "--fingerprint-blocks", "6"],
            ["t", "--rh", "4", "--m", "6"],
        ] {
            let t = T::try_parse_from(args).unwrap();
            assert_eq!((t.d.rh, t.d.m), (Some(4), Some(6)), "{args:?}");
        }
        for text in [
            "[detect]\nhamming-radius = 4\nfingerprint-blocks = 6\n",
            "[detect]\nrh = 4\nm = 6\n",
        ] {
            let file: FileConfig = toml::from_str(text).unwrap();
            assert_eq!(
                (file.detect.rh, file.detect.m),
                (Some(4), Some(6)),
                "{text}"
            );
        }
        assert_eq!(RENAMED_VARIABLES.len(), 2);
    }

    #[test]
    fn method_sentences_picks_the_sentence_family_and_its_minimum() {
        let file: FileConfig = toml::from_str(
            "[signature]\nsentence-sample = 128\n[detect]\nmethod = \"sentences\"\n",
        )
        .unwrap();
        let p = params(Options::default(), &file).unwrap();
        assert_eq!(p.method, Method::Sentences);
        assert_eq!(p.signature.features, Features::Sentences);
        assert_eq!(p.signature.sentence_sample, 128);
        assert_eq!(p.min_signatures, 5);
        // a flag's method wins, and brings its own family and minimum
        let spotsigs = Options {
            method: MethodOptions {
                method: Some(Method::Spotsigs),
                ..Default::default()
            },
            ..Default::default()
        };
        let p = params(spotsigs, &file).unwrap();
        assert_eq!(p.signature.features, Features::Spotsigs);
        assert_eq!(p.min_signatures, 10);
        assert_eq!(
            p,
            IndexParams::default(),
            "the sample is not a SpotSigs setting"
        );
        // a minimum given is kept whatever the method
        let det = DetectOptions {
            min_signatures: Some(2),
            ..Default::default()
        };
        let two = Options {
            detect: det.clone(),
            ..Default::default()
        };
        assert_eq!(params(two, &file).unwrap().min_signatures, 2);
        let zero = Options {
            signature: SignatureOptions {
                sentence_sample: Some(0),
                ..Default::default()
            },
            detect: det,
            ..Default::default()
        };
        assert!(params(zero, &file).is_err());
    }
}
