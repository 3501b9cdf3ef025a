//! `neardup run` (the Kafka stage) and `neardup replay` (a bounded pass over a historical
//! topic): build the validated settings, then hand over to [`crate::stage`].

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

fn go(s: StageSettings, check: bool, shutdown: Shutdown) -> Result<Option<StageSummary>> {
    if check {
        stage::kafka::validate(&s)?;
        println!("{}", s.redacted_json());
        return Ok(None);
    }
    if s.guarantee == Guarantee::ExactlyOnce
        && matches!(s.role, Role::Decider | Role::Shard | Role::Aggregator)
    {
        // before the first thread: the deciding thread's memory on the one, huge-paged heap
        // (measured faster exactly-once; at-least-once not told apart, so left as it was)
        crate::allocator::one_heap();
    }
    crate::telemetry::init_logging(s.log_format);
    tracing::info!(config = %serde_json::to_string(&s).unwrap_or_default(), "starting");
    stage::run(s, shutdown).map(Some)
}

/// Runs `neardup run` until `shutdown` is triggered.
pub fn run(a: RunArgs, file: &FileConfig, shutdown: Shutdown) -> Result<()> {
    let s = stage_settings(Mode::Run, &a, &ReplayOptions::default(), file)?;
    if s.dry_run {
        anyhow::bail!("dry-run is a replay setting; neardup run always produces");
    }
    go(s, a.check_config, shutdown)?;
    Ok(())
}

/// Runs `neardup replay` and prints its summary as JSON.
pub fn replay(a: ReplayArgs, file: &FileConfig, shutdown: Shutdown) -> Result<()> {
    let s = stage_settings(Mode::Replay, &a.run, &a.replay, file)?;
    if let Some(summary) = go(s, a.run.check_config, shutdown)? {
        println!("{}", serde_json::to_string(&summary)?);
    }
    Ok(())
}
