//! The HTTP server of `run`, `replay` and `serve`: `/metrics`, `/healthz`, `/readyz`,
//! `POST /v1/group` and `GET /v1/explain/{id}`.
//!
//! Routing and extraction come from axum, connections from hyper: keep-alive, a limit on
//! the time to read a request's header, a body size limit (413), a time limit per request
//! (408) and a graceful shutdown that lets requests in flight finish. Errors are JSON
//! (`schemas/error.v1.schema.json`) with their status code. The work itself is
//! [`crate::serving::Service`]'s.

use std::future::Future;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use metrics_exporter_prometheus::PrometheusHandle;
use tokio::net::TcpListener;

use crate::serving::{GroupRequest, ServeError, Service, Texts};
use crate::telemetry::{self as tm, Health};

/// The service, once the index is open (the server answers `/healthz` before).
pub type ServiceSlot = RwLock<Option<Arc<Service>>>;

/// Limits of the HTTP layer.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct HttpLimits {
    /// Request bodies above this many bytes get 413.
    pub max_body_bytes: usize,
    /// A request not answered within this gets 408.
    pub request_timeout: Duration,
    /// A connection that has not sent a whole request header within this is closed.
    pub header_timeout: Duration,
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            max_body_bytes: 8 << 20,
            request_timeout: Duration::from_secs(10),
            header_timeout: Duration::from_secs(10),
        }
    }
}

/// What the handlers share.
#[derive(Clone)]
pub struct AppState {
    /// Readiness.
    pub health: Arc<Health>,
    /// The Prometheus recorder.
    pub metrics: PrometheusHandle,
    /// Grouping and explaining, once the index is open.
    pub service: Arc<ServiceSlot>,
}

/// The handlers' state: the shared parts and the limits.
#[derive(Clone)]
struct Inner {
    app: AppState,
    limits: HttpLimits,
}

/// The routes.
pub fn router(state: AppState, limits: HttpLimits) -> Router {
    let state = Inner { app: state, limits };
    Router::new()
        .route("/healthz", get(healthz))
        .route("/startupz", get(startupz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route("/v1/group", post(group))
        .route("/v1/explain/{id}", get(explain))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(tower_http::timeout::TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            limits.request_timeout,
        ))
        .with_state(state)
}

/// Binds the listener.
pub async fn bind(addr: std::net::SocketAddr) -> Result<TcpListener> {
    TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))
}

/// Serves `app` on `listener` until `shutdown` completes, then lets the requests in flight
/// finish (at most `drain`) and returns.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: HttpLimits,
    shutdown: impl Future<Output = ()>,
    drain: Duration,
) {
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else {
                    // out of file descriptors and the like: back off, keep serving
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                };
                let _ = stream.set_nodelay(true);
                let conn = hyper::server::conn::http1::Builder::new()
                    .timer(TokioTimer::new())
                    .header_read_timeout(limits.header_timeout)
                    .keep_alive(true)
                    .serve_connection(TokioIo::new(stream), TowerToHyperService::new(app.clone()));
                let conn = graceful.watch(conn);
                tokio::spawn(async move {
                    let _ = conn.await;
                });
            }
            _ = &mut shutdown => break,
        }
    }
    drop(listener);
    let _ = tokio::time::timeout(drain, graceful.shutdown()).await;
}

fn text(code: StatusCode, body: String) -> Response {
    (
        code,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        body,
    )
        .into_response()
}

fn json_error(status: u16, kind: &str, message: &str) -> Response {
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let body = serde_json::json!({
        "error": { "status": status, "kind": kind, "message": message }
    });
    (code, axum::Json(body)).into_response()
}

fn serve_error(e: &ServeError) -> Response {
    json_error(e.status(), e.kind(), &e.to_string())
}

/// Liveness: 503 when the stage failed, or has records waiting and answered none for
/// [`crate::telemetry::STALL`]; 200 otherwise (also while the index opens).
async fn healthz(State(Inner { app: s, .. }): State<Inner>) -> Response {
    match s.health.stuck() {
        Some(why) => text(StatusCode::SERVICE_UNAVAILABLE, format!("{why}\n")),
        None => text(StatusCode::OK, "ok\n".into()),
    }
}

/// Start-up: 200 once the index is open (a signer at once); 503 with the progress before.
async fn startupz(State(Inner { app: s, .. }): State<Inner>) -> Response {
    if s.health.started() {
        text(StatusCode::OK, "started\n".into())
    } else {
        text(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("{}\n", s.health.reason()),
        )
    }
}

async fn readyz(State(Inner { app: s, .. }): State<Inner>) -> Response {
    s.health.publish();
    let code = if s.health.ready() {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    text(code, format!("{}\n", s.health.reason()))
}

async fn metrics(State(Inner { app: s, .. }): State<Inner>) -> Response {
    s.health.publish();
    s.metrics.run_upkeep();
    let mut r = text(StatusCode::OK, s.metrics.render());
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4"),
    );
    r
}

async fn not_found() -> Response {
    json_error(
        404,
        "not_found",
        "no such endpoint: /healthz, /startupz, /readyz, /metrics, POST /v1/group, GET /v1/explain/{id}",
    )
}

async fn method_not_allowed() -> Response {
    json_error(
        405,
        "method_not_allowed",
        "method not allowed on this endpoint",
    )
}

fn current(s: &AppState) -> Result<Arc<Service>, Box<Response>> {
    let slot = s.service.read().unwrap_or_else(|e| e.into_inner());
    slot.clone()
        .ok_or_else(|| Box::new(json_error(503, "unavailable", "the index is not open yet")))
}

fn observe(endpoint: &'static str, started: Instant, r: &Response) {
    metrics::histogram!(tm::SERVE_SECONDS, "endpoint" => endpoint)
        .record(started.elapsed().as_secs_f64());
    metrics::counter!(tm::SERVE_REQUESTS, "endpoint" => endpoint,
        "status" => r.status().as_u16().to_string())
    .increment(1);
}

async fn group(State(s): State<Inner>, req: axum::extract::Request) -> Response {
    let started = Instant::now();
    let limit = s.limits.max_body_bytes;
    let announced = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    let too_large = || {
        json_error(
            413,
            "too_large",
            &format!("the body is larger than {limit} bytes (the server's max-body-bytes)"),
        )
    };
    let r = if announced.is_some_and(|n| n > limit as u64) {
        // refused before a byte of it is read
        too_large()
    } else {
        match axum::body::to_bytes(req.into_body(), limit).await {
            // reading the index and signing inline pages block: off the async workers
            Ok(body) => {
                let app = s.app.clone();
                tokio::task::spawn_blocking(move || group_response(&app, &body))
                    .await
                    .unwrap_or_else(|e| {
                        json_error(500, "internal", &format!("the request failed: {e}"))
                    })
            }
            Err(e) => {
                let e = e.into_inner();
                if e.downcast_ref::<http_body_util::LengthLimitError>()
                    .is_some()
                {
                    too_large()
                } else {
                    json_error(400, "bad_request", &format!("cannot read the body: {e}"))
                }
            }
        }
    };
    observe("group", started, &r);
    r
}

fn group_response(s: &AppState, body: &[u8]) -> Response {
    let service = match current(s) {
        Ok(x) => x,
        Err(r) => return *r,
    };
    let req: GroupRequest = match serde_json::from_slice(body) {
        Ok(r) => r,
        Err(e) => {
            return json_error(
                400,
                "bad_request",
                &format!(
                    "the body is not a group request ({e}); expected {{\"items\": [\"id\", {{\"text\": \"…\"}}, …], \"threshold\": 0.5}}"
                ),
            )
        }
    };
    match service.group(&req) {
        Ok(answer) => axum::Json(&*answer).into_response(),
        Err(e) => serve_error(&e),
    }
}

#[derive(serde::Deserialize)]
struct ExplainQuery {
    /// A second id to compare with.
    with: Option<String>,
}

async fn explain(
    State(Inner { app: s, .. }): State<Inner>,
    Path(id): Path<String>,
    q: Result<Query<ExplainQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let started = Instant::now();
    let r = match (current(&s), q) {
        (Err(r), _) => *r,
        (_, Err(e)) => json_error(400, "bad_request", &e.body_text()),
        (Ok(service), Ok(Query(q))) => {
            let r = tokio::task::spawn_blocking(move || {
                service.explain(&id, q.with.as_deref(), &Texts::default())
            })
            .await;
            match r {
                Ok(Ok(x)) => axum::Json(x).into_response(),
                Ok(Err(e)) => serve_error(&e),
                Err(e) => json_error(500, "internal", &format!("the request failed: {e}")),
            }
        }
    };
    observe("explain", started, &r);
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::http::Request;
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    use crate::dedup::{Deduplicator, PageRef};
    use crate::index::{Index, IndexParams};
    use crate::serving::Limits;

    const RIVER: &str = include_str!("../tests/data/story-river.html");
    const RIVER_EDITED: &str = include_str!("../tests/data/story-river-edited.html");
    const SCHOOL: &str = include_str!("../tests/data/story-school.html");

    fn app(health: Health, service: Option<Arc<Service>>, limits: HttpLimits) -> Router {
        let state = AppState {
            health: Arc::new(health),
            metrics: metrics_exporter_prometheus::PrometheusBuilder::new()
                .build_recorder()
                .handle(),
            service: Arc::new(RwLock::new(service)),
        };
        router(state, limits)
    }

    async fn call(app: &Router, req: Request<Body>) -> (StatusCode, String) {
        let r = app.clone().oneshot(req).await.unwrap();
        let code = r.status();
        let body = r.into_body().collect().await.unwrap().to_bytes();
        (code, String::from_utf8_lossy(&body).into_owned())
    }

    fn get(uri: &str) -> Request<Body> {
        Request::get(uri).body(Body::empty()).unwrap()
    }

    fn post(uri: &str, body: impl Into<Body>) -> Request<Body> {
        Request::post(uri)
            .header(header::CONTENT_TYPE, "application/json")
            .body(body.into())
            .unwrap()
    }

    /// Three pages decided (one a near-duplicate of the first), and the service over them.
    fn service() -> Arc<Service> {
        let mut dd = Deduplicator::new(Index::memory(IndexParams::default()).unwrap()).unwrap();
        for (id, html) in [
            ("river", RIVER),
            ("school", SCHOOL),
            ("river-edited", RIVER_EDITED),
        ] {
            let page = PageRef {
                id,
                url: "https://t.test/",
                first_seen: 0,
            };
            dd.process(page, html).unwrap();
        }
        Arc::new(Service::new(dd.index().reader(), Limits::default()).unwrap())
    }

    /// Before the index is open the server is alive, not ready (with the reason), and has
    /// no service to group with; an unknown path and a wrong method are answered as such.
    #[tokio::test]
    async fn before_the_index_opens() {
        let app = app(Health::serving(), None, HttpLimits::default());
        assert_eq!(
            call(&app, get("/healthz")).await,
            (StatusCode::OK, "ok\n".into())
        );
        let (code, why) = call(&app, get("/readyz")).await;
        assert_eq!(code, StatusCode::SERVICE_UNAVAILABLE);
        assert!(!why.trim().is_empty() && why.trim() != "ready", "{why}");
        let (code, why) = call(&app, get("/startupz")).await;
        assert_eq!(code, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(why, "index not open\n");
        let (code, body) = call(&app, post("/v1/group", r#"{"items":["river"]}"#)).await;
        assert_eq!(code, StatusCode::SERVICE_UNAVAILABLE, "{body}");
        let (code, body) = call(&app, get("/nowhere")).await;
        assert_eq!(code, StatusCode::NOT_FOUND);
        assert!(body.contains("\"not_found\""), "{body}");
        let (code, _) = call(&app, get("/v1/group")).await;
        assert_eq!(code, StatusCode::METHOD_NOT_ALLOWED);
        let (code, body) = call(&app, get("/metrics")).await;
        assert_eq!(code, StatusCode::OK, "{body}");
    }

    /// Once open: ready, a result set folded, a decision explained, and bad requests
    /// answered with their kind (bad JSON 400, an unknown id 404, a body over the limit
    /// 413).
    #[tokio::test]
    async fn grouping_and_explaining_through_the_routes() {
        let health = Health::serving();
        health
            .index_open
            .store(true, std::sync::atomic::Ordering::Relaxed);
        let limits = HttpLimits {
            max_body_bytes: 4096,
            ..HttpLimits::default()
        };
        let app = app(health, Some(service()), limits);
        assert_eq!(
            call(&app, get("/readyz")).await,
            (StatusCode::OK, "ready\n".into())
        );
        assert_eq!(
            call(&app, get("/startupz")).await,
            (StatusCode::OK, "started\n".into())
        );

        let (code, body) = call(
            &app,
            post(
                "/v1/group",
                r#"{"items":["river","school","river-edited","gone"]}"#,
            ),
        )
        .await;
        assert_eq!(code, StatusCode::OK, "{body}");
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["items"], 4);
        assert_eq!(v["unknown"], serde_json::json!(["gone"]));
        let groups = v["groups"].as_array().unwrap();
        assert_eq!(groups.len(), 1, "{body}");
        assert_eq!(groups[0]["representative"]["id"], "river", "{body}");
        let members: Vec<&str> = groups[0]["members"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|p| p["id"].as_str())
            .collect();
        assert_eq!(members, ["river-edited"], "{body}");

        let (code, body) = call(&app, get("/v1/explain/river-edited")).await;
        assert_eq!(code, StatusCode::OK, "{body}");
        let x: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(x["decision"], "duplicate", "{body}");
        let (code, _) = call(&app, get("/v1/explain/never-seen")).await;
        assert_eq!(code, StatusCode::NOT_FOUND);

        let (code, body) = call(&app, post("/v1/group", "{not json")).await;
        assert_eq!(code, StatusCode::BAD_REQUEST, "{body}");
        let big = format!(r#"{{"items":[{{"text":"{}"}}]}}"#, "word ".repeat(2000));
        let (code, body) = call(&app, post("/v1/group", big)).await;
        assert_eq!(code, StatusCode::PAYLOAD_TOO_LARGE, "{body}");
    }
}
