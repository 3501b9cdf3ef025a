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

/// The files a `run` / `replay` reads its settings from: the configuration file and the
/// stopwords file, each where one is given.
fn settings_files<'a>(
    config: Option<&'a Path>,
    a: &'a RunArgs,
    file: &'a FileConfig,
) -> Vec<&'a Path> {
    let stopwords = a.signature.stopwords_file.as_ref();
    let stopwords = stopwords.or(file.signature.stopwords_file.as_ref());
    config
        .into_iter()
        .chain(stopwords.map(|p| p.as_path()))
        .collect()
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
    let settings = serde_json::to_string(&s).unwrap_or_default();
    let digest = {
        // the same binary on both sides of the exec: its hasher's fixed keys suffice
        let mut h = std::hash::DefaultHasher::new();
        settings.hash(&mut h);
        format!("{:016x}", h.finish())
    };
    crate::allocator::check_settings_read_again(&digest)?;
    let deciding = s.guarantee == Guarantee::ExactlyOnce
        && matches!(s.role, Role::Decider | Role::Shard | Role::Aggregator);
    // a second start reads the configuration again: not from a pipe, which it would find empty
    let read_again = crate::allocator::can_read_again(read_from.iter().copied());
    if deciding && read_again {
        // before the first thread: the deciding thread's memory on the one, huge-paged heap
        // (measured faster exactly-once; at-least-once not told apart, so left as it was)
        crate::allocator::one_heap(&digest);
    }
    crate::telemetry::init_logging(s.log_format);
    if deciding && !read_again {
        tracing::warn!(
            files = ?read_from,
            "a heap a thread: the configuration is not all in regular files, and starting again \
             on one heap would read it a second time; the deciding thread's lists stay off huge \
             pages (give the files as regular files to decide faster)"
        );
    }
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
