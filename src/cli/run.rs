//! `neardup run` (the Kafka stage) and `neardup replay` (a bounded pass over a historical
//! topic): build the validated settings, then hand over to [`crate::stage`].

use std::hash::{Hash, Hasher};
use std::path::Path;

use anyhow::Result;
use clap::Args;

use crate::config::{
    Config, DetectOptions, FileConfig, Guarantee, KafkaOptions, MethodOptions, Options,
    ReplayOptions, Role, ServeOptions, SignatureOptions, StageOptions,
};
use crate::shutdown::Shutdown;
use crate::stage::{self, Mode, StageSettings, StageSummary};

/// Arguments of `neardup run`.
#[derive(Args, Debug)]
pub struct RunArgs {
    #[command(flatten)]
    #[allow(missing_docs)]
    pub kafka: KafkaOptions,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub stage: StageOptions,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub method: MethodOptions,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub detect: DetectOptions,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub signature: SignatureOptions,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub serve: ServeOptions,
    /// Parse and validate the configuration, print it as JSON (secrets redacted) and exit
    /// without connecting anywhere
    #[arg(long)]
    pub check_config: bool,
}

/// Arguments of `neardup replay`.
#[derive(Args, Debug)]
pub struct ReplayArgs {
    #[command(flatten)]
    #[allow(missing_docs)]
    pub run: RunArgs,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub replay: ReplayOptions,
}

/// The validated stage settings of a `run` / `replay` command line and the file.
pub fn stage_settings(
    mode: Mode,
    a: &RunArgs,
    replay: &ReplayOptions,
    file: &FileConfig,
) -> Result<StageSettings> {
    StageSettings::resolve(mode, &config(a, replay, file)?)
}

/// The configuration of a `run` / `replay` command line and the file.
pub fn config(a: &RunArgs, replay: &ReplayOptions, file: &FileConfig) -> Result<Config> {
    let o = Options {
        signature: a.signature.clone(),
        detect: a.detect.clone(),
        method: a.method.clone(),
        kafka: a.kafka.clone(),
        stage: a.stage.clone(),
        replay: replay.clone(),
        serve: a.serve.clone(),
        ..Default::default()
    };
    Config::resolve(o, file)
}

/// The files a `run` / `replay` reads its settings from, each where one is given: the
/// configuration file, the stopwords file and the Kafka properties file.
fn settings_files<'a>(
    config: Option<&'a Path>,
    a: &'a RunArgs,
    file: &'a FileConfig,
) -> Vec<&'a Path> {
    let stopwords = a.signature.stopwords_file.as_ref();
    let stopwords = stopwords.or(file.signature.stopwords_file.as_ref());
    let properties = a.kafka.kafka_properties_file.as_ref();
    let properties = properties.or(file.kafka.kafka_properties_file.as_ref());
    config
        .into_iter()
        .chain(
            [stopwords, properties]
                .into_iter()
                .flatten()
                .map(|p| p.as_path()),
        )
        .collect()
}

/// A digest of the resolved settings, secrets included (the same binary on both sides of an
/// exec: its hasher's fixed keys suffice); `None` when they cannot be written out.
fn digest(s: &StageSettings) -> Option<String> {
    let json = serde_json::to_string(s).ok()?;
    let mut h = std::hash::DefaultHasher::new();
    json.hash(&mut h);
    // written out redacted: the secrets' values hashed besides
    s.properties.hash(&mut h);
    Some(format!("{:016x}", h.finish()))
}

fn go(
    s: StageSettings,
    read_from: &[&Path],
    check: bool,
    shutdown: Shutdown,
) -> Result<Option<StageSummary>> {
    if check {
        stage::kafka::validate(&s)?;
        println!("{}", s.redacted_json());
        return Ok(None);
    }
    let digest = digest(&s);
    crate::allocator::check_settings_read_again(digest.as_deref().unwrap_or(""))?;
    let deciding = s.guarantee == Guarantee::ExactlyOnce
        && matches!(s.role, Role::Decider | Role::Shard | Role::Aggregator);
    // a second start reads the settings again: not from a pipe, which it would find empty
    let read_once = crate::allocator::not_regular_files(read_from);
    if let (true, true, Some(d)) = (deciding, read_once.is_empty(), &digest) {
        // before the first thread: the deciding thread's memory on the one, huge-paged heap
        // (measured faster exactly-once; at-least-once not told apart, so left as it was)
        crate::allocator::one_heap(d);
    }
    crate::telemetry::init_logging(s.log_format);
    if deciding && !read_once.is_empty() {
        tracing::warn!(
            files = ?read_once,
            "a heap a thread: settings read from other than regular files, which starting \
             again on one heap would read a second time; the deciding thread's lists stay off \
             huge pages (give them as regular files to decide faster)"
        );
    }
    let settings = serde_json::to_string(&s).unwrap_or_default();
    tracing::info!(config = %settings, "starting");
    stage::run(s, shutdown).map(Some)
}

/// Runs `neardup run` until `shutdown` is triggered.
pub fn run(a: RunArgs, config: Option<&Path>, file: &FileConfig, shutdown: Shutdown) -> Result<()> {
    let s = stage_settings(Mode::Run, &a, &ReplayOptions::default(), file)?;
    if s.dry_run {
        anyhow::bail!("dry-run is a replay setting; neardup run always produces");
    }
    let files = settings_files(config, &a, file);
    go(s, &files, a.check_config, shutdown)?;
    Ok(())
}

/// Runs `neardup replay` and prints its summary as JSON.
pub fn replay(
    a: ReplayArgs,
    config: Option<&Path>,
    file: &FileConfig,
    shutdown: Shutdown,
) -> Result<()> {
    let s = stage_settings(Mode::Replay, &a.run, &a.replay, file)?;
    let files = settings_files(config, &a.run, file);
    if let Some(summary) = go(s, &files, a.run.check_config, shutdown)? {
        println!("{}", serde_json::to_string(&summary)?);
    }
    Ok(())
}
