//! `neardup serve`: the serving endpoints (`POST /v1/group`, `GET /v1/explain/{id}`) and
//! `/metrics`, `/healthz`, `/readyz` over an index that another process (`neardup run`,
//! `neardup dedup`) may be writing: it reads it as a RocksDB follower and catches up with
//! the writer at an interval.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;
use tracing::{info, warn};

use crate::config::{
    default_jobs, parse_duration, Config, FileConfig, LogFormat, Options, ServeOptions,
    DEFAULT_LISTEN,
};
use crate::http::{self, AppState, ServiceSlot};
use crate::index::IndexReader;
use crate::serving::Service;
use crate::shutdown::Shutdown;
use crate::telemetry::{self as tm, Health};

/// Arguments of `neardup serve`.
#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Index directory, read only (another process may be writing it)
    #[arg(long, env = "NEARDUP_INDEX")]
    pub index: PathBuf,
    /// HTTP listener, IP:PORT [default: 0.0.0.0:9464]
    #[arg(long, env = "NEARDUP_LISTEN")]
    pub listen: Option<String>,
    /// How often to read what the writer added since, e.g. 1s [default: 1s]
    #[arg(long, env = "NEARDUP_CATCH_UP", value_parser = parse_duration)]
    pub catch_up: Option<Duration>,
    /// Block cache in MiB: blocks of the index read so far, uncompressed; size it to the
    /// docs and ids families (`neardup index stats`) for reads from memory [default: 256]
    #[arg(long, env = "NEARDUP_BLOCK_CACHE_MIB")]
    pub block_cache_mib: Option<usize>,
    /// Threads for connections, and as many for the requests' work (index reads, grouping,
    /// signing inline pages) [default: the number of cores]
    #[arg(long, env = "NEARDUP_JOBS")]
    pub jobs: Option<usize>,
    /// Logs: auto (JSON unless on a terminal), json or text [default: auto]
    #[arg(long, env = "NEARDUP_LOG_FORMAT")]
    pub log_format: Option<LogFormat>,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub serve: ServeOptions,
}

/// The block cache of a reading process unless set: 256 MiB.
pub const DEFAULT_BLOCK_CACHE_MIB: usize = 256;

/// Opens `index` as a read-only follower (its own files in a temporary directory, which
/// the returned guard removes), with a block cache of `block_cache_mib` MiB.
pub fn open_follower(
    index: &std::path::Path,
    block_cache_mib: usize,
) -> Result<(IndexReader, tempfile::TempDir)> {
    if !index.join("CURRENT").exists() {
        anyhow::bail!(
            "{} is not an index directory (no RocksDB files)",
            index.display()
        );
    }
    let own = tempfile::Builder::new()
        .prefix("neardup-follower-")
        .tempdir()
        .context("cannot create the follower's directory")?;
    let reader = IndexReader::open_follower(index, own.path(), block_cache_mib << 20)
        .with_context(|| format!("cannot open index {} for reading", index.display()))?;
    Ok((reader, own))
}

/// The configuration of `serve` and `group`: their `[serve]` limits over the file's.
pub fn serve_config(serve: &ServeOptions, file: &FileConfig) -> Result<Config> {
    let o = Options {
        serve: serve.clone(),
        ..Default::default()
    };
    Config::resolve(o, file)
}

/// Runs `neardup serve` until `shutdown` is triggered (in the binary: SIGTERM / SIGINT).
pub fn run(a: ServeArgs, file: &FileConfig, shutdown: Shutdown) -> Result<()> {
    let c = serve_config(&a.serve, file)?;
    let (limits, http_limits) = (c.serving, c.http);
    let listen: std::net::SocketAddr = a
        .listen
        .as_deref()
        .unwrap_or(DEFAULT_LISTEN)
        .trim()
        .parse()
        .with_context(|| format!("invalid listen address {:?}: use IP:PORT", a.listen))?;
    let catch_up = a.catch_up.unwrap_or(Duration::from_secs(1));
    if catch_up.is_zero() {
        anyhow::bail!("catch-up must be above zero");
    }
    let jobs = a.jobs.unwrap_or_else(default_jobs);
    if jobs == 0 {
        anyhow::bail!("jobs must be at least 1");
    }
    tm::init_logging(a.log_format.unwrap_or_default());
    let (reader, own) = open_follower(
        &a.index,
        a.block_cache_mib.unwrap_or(DEFAULT_BLOCK_CACHE_MIB),
    )?;
    let service = Arc::new(Service::new(reader.clone(), limits)?);
    let health = Arc::new(Health::serving());
    health.index_open.store(true, Ordering::Relaxed);
    let slot: Arc<ServiceSlot> = Arc::new(std::sync::RwLock::new(Some(Arc::clone(&service))));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(jobs)
        // the requests' work (index reads, grouping, signing) runs on as many threads
        .max_blocking_threads(jobs)
        .thread_name("neardup-serve")
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    rt.block_on(async move {
        let state = AppState {
            health: Arc::clone(&health),
            metrics: tm::metrics_handle()?,
            service: slot,
        };
        let listener = http::bind(listen).await?;
        info!(address = %listen, index = %a.index.display(),
            method = reader.params().method.as_str(), threshold = reader.params().threshold,
            "serving /v1/group, /v1/explain, /metrics, /healthz, /readyz");
        let follower = tokio::spawn(async move {
            let mut tick = tokio::time::interval(catch_up);
            loop {
                tick.tick().await;
                let r = reader.clone();
                match tokio::task::spawn_blocking(move || r.catch_up()).await {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => warn!(error = %e, "cannot catch up with the index writer"),
                    Err(e) => warn!(error = %e, "catch-up task failed"),
                }
            }
        });
        // the signatures of the most recent pages, read while serving
        let preload = {
            let service = Arc::clone(&service);
            let stop = shutdown.clone();
            tokio::task::spawn_blocking(move || {
                let t = std::time::Instant::now();
                match service.preload(&|| stop.requested()) {
                    Ok(n) => info!(
                        pages = n,
                        seconds = t.elapsed().as_secs_f64(),
                        "signature cache filled with the most recent pages"
                    ),
                    Err(e) => warn!(error = %e, "cannot fill the signature cache"),
                }
            })
        };
        let health2 = Arc::clone(&health);
        let shutdown = async move {
            shutdown.wait().await;
            info!("stop signal: finishing the requests in flight");
            health2.draining.store(true, Ordering::Relaxed);
        };
        http::serve(
            listener,
            http::router(state, http_limits),
            http_limits,
            shutdown,
            Duration::from_secs(10),
        )
        .await;
        follower.abort();
        preload.abort();
        anyhow::Ok(())
    })?;
    rt.shutdown_timeout(Duration::from_secs(1));
    drop(own);
    Ok(())
}
