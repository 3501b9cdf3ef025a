//! The stage benchmark against a real broker (Apache Kafka, started by the tests' harness
//! shared with the product's broker tests).

#[path = "../../../tests/common/mod.rs"]
mod common;

use std::path::Path;
use std::process::Command;

use common::*;

/// `neardup-lab --stage-only` against the broker, at-least-once and exactly-once: the stage
/// reads every record of the corpus (it fails otherwise) and reports its rates and latency.
#[test]
fn bench_stage_only_runs_against_the_broker_with_either_guarantee() {
    let _g = serial();
    let b = Broker::start();
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/pages.jsonl");
    for guarantee in ["at-least-once", "exactly-once"] {
        let out = output_ok(
            Command::new(lab_binary())
                .arg("--corpus")
                .arg(&corpus)
                .args(["--brokers", &b.addr(), "--stage-only", "--json"])
                .args(["--guarantee", guarantee]),
            &format!("neardup-lab --stage-only --guarantee {guarantee}"),
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
        let stage = if v["stage"].is_object() {
            &v["stage"]
        } else {
            &v
        };
        assert_eq!(stage["records"], 13, "{v}");
        assert!(
            stage["stage_records_per_second"].as_f64().unwrap() > 0.0,
            "{v}"
        );
        assert!(stage["latency_p99_ms"].as_f64().unwrap() > 0.0, "{v}");
    }
}
