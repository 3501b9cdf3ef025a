//! The record types against `schemas/*.v1.schema.json`, in both directions: what neardup
//! writes validates, documented inputs validate and decode, and what the schema rejects the
//! decoder rejects too.

use std::path::{Path, PathBuf};

use neardup::record::{decode_page, DeadLetter, Tagged};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn validator(name: &str) -> jsonschema::Validator {
    let schema: serde_json::Value =
        serde_json::from_slice(&std::fs::read(root().join("schemas").join(name)).unwrap()).unwrap();
    jsonschema::validator_for(&schema).unwrap()
}

fn lines(p: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(p)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn documented_inputs_validate_and_decode() {
    let page = validator("page.v1.schema.json");
    let text = std::fs::read_to_string(root().join("examples/pages.jsonl")).unwrap();
    let mut n = 0;
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        assert!(
            page.is_valid(&v),
            "example does not follow the page schema: {line:.80}"
        );
        decode_page(line.as_bytes(), 1 << 24).expect("a valid example decodes");
        n += 1;
    }
    assert_eq!(n, 13);
    // what the schema rejects, the decoder rejects
    for bad in [
        r#"{"html":"<p>x</p>"}"#,
        r#"{"url":"https://a.test/"}"#,
        r#"{"url":5,"html":"x"}"#,
        r#"{"url":"https://a.test/","html":"x","headers":{"a":1}}"#,
        r#"[1,2]"#,
    ] {
        let v: serde_json::Value = serde_json::from_str(bad).unwrap();
        assert!(!page.is_valid(&v), "schema accepts {bad}");
        assert!(
            decode_page(bad.as_bytes(), 1 << 20).is_err(),
            "decoder accepts {bad}"
        );
    }
}

#[test]
fn file_mode_outputs_validate_and_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.jsonl");
    let mut all = std::fs::read(root().join("examples/pages.jsonl")).unwrap();
    all.extend(std::fs::read(root().join("examples/bad.jsonl")).unwrap());
    std::fs::write(&input, all).unwrap();
    let (unique, dups, dead) = (
        dir.path().join("u.jsonl"),
        dir.path().join("d.jsonl"),
        dir.path().join("x.jsonl"),
    );
    let st = std::process::Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args(["dedup", "--input"])
        .arg(&input)
        .arg("--index")
        .arg(dir.path().join("index"))
        .arg("--unique")
        .arg(&unique)
        .arg("--duplicates")
        .arg(&dups)
        .arg("--dead-letter")
        .arg(&dead)
        .status()
        .unwrap();
    assert!(st.success());
    let tagged = validator("tagged.v1.schema.json");
    let dead_v = validator("dead-letter.v1.schema.json");
    let mut records = lines(&unique);
    records.extend(lines(&dups));
    assert!(records.len() >= 13);
    for v in records {
        if let Err(e) = tagged.validate(&v) {
            panic!("{e}: {v}");
        }
        let t: Tagged = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(serde_json::to_value(&t).unwrap(), v, "tagged round trip");
    }
    let letters = lines(&dead);
    assert!(letters.len() >= 3);
    for v in letters {
        if let Err(e) = dead_v.validate(&v) {
            panic!("{e}: {v}");
        }
        let d: DeadLetter = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(
            serde_json::to_value(&d).unwrap(),
            v,
            "dead letter round trip"
        );
    }
    // and the schema is strict: an unknown field or a wrong decision is rejected
    let mut v = lines(&unique).remove(0);
    v["dedup"]["decision"] = "maybe".into();
    assert!(!tagged.is_valid(&v));
    let mut w = lines(&unique).remove(0);
    w["extra"] = 1.into();
    assert!(!tagged.is_valid(&w));
}

/// `neardup dedup --method sentences`: the records name the method and the lists that found
/// each duplicate, and follow the schema.
#[test]
fn sentence_method_outputs_validate() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("all.jsonl");
    let st = std::process::Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args(["dedup", "--method", "sentences", "--input"])
        .arg(root().join("examples/pages.jsonl"))
        .arg("--index")
        .arg(dir.path().join("index"))
        .arg("--unique")
        .arg(&out)
        .status()
        .unwrap();
    assert!(st.success());
    let tagged = validator("tagged.v1.schema.json");
    let records = lines(&out);
    assert_eq!(records.len(), 13);
    let mut duplicates = 0;
    for v in &records {
        if let Err(e) = tagged.validate(v) {
            panic!("{e}: {v}");
        }
        assert_eq!(v["dedup"]["method"], "sentences");
        if v["dedup"]["decision"] == "duplicate" {
            assert_eq!(v["dedup"]["found_by"], "sentences");
            duplicates += 1;
        }
    }
    // at least the mirror of the school story
    assert!(duplicates >= 1);
    // the index says how it was signed: reopening it as SpotSigs is refused
    let st = std::process::Command::new(env!("CARGO_BIN_EXE_neardup"))
        .args(["dedup", "--input"])
        .arg(root().join("examples/pages.jsonl"))
        .arg("--index")
        .arg(dir.path().join("index"))
        .arg("--unique")
        .arg(dir.path().join("again.jsonl"))
        .output()
        .unwrap();
    assert!(!st.status.success());
    let err = String::from_utf8_lossy(&st.stderr);
    assert!(
        err.contains("method: \"sentences\" → \"spotsigs\""),
        "{err}"
    );
}
