//! The configuration reference, `docs/configuration.md`, generated from the command line's
//! own definitions: every setting with its flag, its `NEARDUP_*` variable, its key in the
//! file and its default, then every command's flags. A test holds the file to what the
//! definitions say, so the reference cannot fall behind the code.

use std::fmt::Write as _;

use clap::{Arg, Args, CommandFactory};

use crate::config::{
    DedupOptions, DetectOptions, KafkaOptions, MethodOptions, ReplayOptions, ServeOptions,
    SignatureOptions, StageOptions,
};

/// A section of the file and the settings it holds.
struct Section {
    name: &'static str,
    what: &'static str,
    args: Vec<Arg>,
}

fn args_of<T: Args>() -> Vec<Arg> {
    T::augment_args(clap::Command::new("section"))
        .get_arguments()
        .filter(|a| !a.is_positional())
        .cloned()
        .collect()
}

fn sections() -> Vec<Section> {
    let mut detect = args_of::<MethodOptions>();
    detect.extend(args_of::<DetectOptions>());
    vec![
        Section {
            name: "signature",
            what: "how a page is stripped and signed; stored in the index",
            args: args_of::<SignatureOptions>(),
        },
        Section {
            name: "detect",
            what: "how near-duplicates are found; stored in the index",
            args: detect,
        },
        Section {
            name: "dedup",
            what: "file mode (`neardup dedup`)",
            args: args_of::<DedupOptions>(),
        },
        Section {
            name: "kafka",
            what: "brokers, topics, group and client properties of the stage",
            args: args_of::<KafkaOptions>(),
        },
        Section {
            name: "stage",
            what: "the stage's index, HTTP listener, drain and limits",
            args: args_of::<StageOptions>(),
        },
        Section {
            name: "replay",
            what: "where a replay starts and ends",
            args: args_of::<ReplayOptions>(),
        },
        Section {
            name: "serve",
            what: "limits of the serving endpoints (`run`, `replay`, `serve`)",
            args: args_of::<ServeOptions>(),
        },
    ]
}

/// One line of help, as a table cell.
fn cell(s: &str) -> String {
    s.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
}

fn help(a: &Arg) -> String {
    let text = a
        .get_long_help()
        .or(a.get_help())
        .map(|h| h.to_string())
        .unwrap_or_default();
    let mut text = cell(&text);
    let defaults: Vec<String> = a
        .get_default_values()
        .iter()
        .map(|v| v.to_string_lossy().into_owned())
        .collect();
    if !defaults.is_empty() && !text.contains("[default") {
        let _ = write!(text, " [default: {}]", defaults.join(","));
    }
    text
}

fn flag(a: &Arg) -> String {
    let Some(long) = a.get_long() else {
        return format!("`{}`", a.get_id());
    };
    let mut s = format!("`--{long}`");
    if let Some(aliases) = a.get_visible_aliases() {
        for alias in aliases {
            let _ = write!(s, " (`--{alias}`)");
        }
    }
    s
}

fn variable(a: &Arg) -> String {
    a.get_env()
        .map(|e| format!("`{}`", e.to_string_lossy()))
        .unwrap_or_else(|| "–".into())
}

/// The reference, as Markdown.
pub fn render() -> String {
    let mut out = String::new();
    out.push_str(
        "# Configuration reference\n\n\
         Generated from the command line's definitions (`src/config.rs`, `src/cli/`); do not\n\
         edit it by hand. After changing a flag, write it again with\n\
         `NEARDUP_WRITE_REFERENCE=1 cargo test --release --lib reference`; the test suite fails\n\
         while it is not current.\n\n\
         A setting is taken, in order, from its flag, its `NEARDUP_*` variable, its key in the\n\
         TOML file given by `--config` (`NEARDUP_CONFIG`), then its default. The `[signature]`\n\
         and `[detect]` settings are stored in the index: an index opened with others is\n\
         refused ([upgrading.md](upgrading.md)).\n",
    );
    let sections = sections();
    for s in &sections {
        let _ = write!(
            out,
            "\n## `[{}]`: {}\n\n| flag | variable | key | what, and the default |\n|---|---|---|---|\n",
            s.name, s.what
        );
        for a in &s.args {
            let key = a.get_long().unwrap_or_default();
            let _ = writeln!(
                out,
                "| {} | {} | `{key}` | {} |",
                flag(a),
                variable(a),
                help(a)
            );
        }
    }
    out.push_str(
        "\n## Commands\n\nEach command's flags. Those of the sections above are named by their \
         section.\n",
    );
    let cli = crate::cli::Cli::command();
    let mut commands: Vec<(String, clap::Command)> = Vec::new();
    for c in cli.get_subcommands() {
        if c.has_subcommands() {
            for sub in c.get_subcommands() {
                commands.push((format!("{} {}", c.get_name(), sub.get_name()), sub.clone()));
            }
        } else {
            commands.push((c.get_name().to_string(), c.clone()));
        }
    }
    for (name, c) in commands {
        let about = c
            .get_about()
            .map(|a| cell(&a.to_string()))
            .unwrap_or_default();
        let _ = write!(out, "\n### `neardup {name}`\n\n{about}\n");
        let mut sections_used: Vec<&str> = Vec::new();
        let mut own = String::new();
        for a in c.get_arguments() {
            let id = a.get_id().as_str();
            if id == "help" || id == "version" || id == "config" {
                continue;
            }
            let section = sections
                .iter()
                .find(|s| s.args.iter().any(|x| x.get_id() == a.get_id()));
            if let (Some(s), Some(_)) = (section, a.get_long()) {
                if !sections_used.contains(&s.name) {
                    sections_used.push(s.name);
                }
                continue;
            }
            let what = if a.is_positional() {
                format!(
                    "`{}` (positional)",
                    a.get_value_names().map_or(id.to_uppercase(), |v| v
                        .iter()
                        .map(|n| n.to_string())
                        .collect::<Vec<_>>()
                        .join(" "))
                )
            } else {
                flag(a)
            };
            let _ = writeln!(own, "| {what} | {} | {} |", variable(a), help(a));
        }
        if !sections_used.is_empty() {
            let names: Vec<String> = sections_used.iter().map(|s| format!("`[{s}]`")).collect();
            let _ = writeln!(out, "\nSettings of {}.", names.join(", "));
        }
        if !own.is_empty() {
            out.push_str("\n| flag | variable | what, and the default |\n|---|---|---|\n");
            out.push_str(&own);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `docs/configuration.md` is what the definitions say
    /// (`NEARDUP_WRITE_REFERENCE=1` writes it).
    #[test]
    fn the_reference_is_current() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/configuration.md");
        let want = render();
        if std::env::var_os("NEARDUP_WRITE_REFERENCE").is_some() {
            std::fs::write(path, &want).unwrap();
        }
        let have = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            have == want,
            "docs/configuration.md is not current: write it with \
             NEARDUP_WRITE_REFERENCE=1 cargo test --release --lib reference"
        );
    }

    /// Every key the reference names is a key of its section in the file (the file's
    /// parser lists the keys it knows when it is given an unknown one).
    #[test]
    fn every_key_is_a_key_of_the_file() {
        for s in sections() {
            let err = toml::from_str::<crate::config::FileConfig>(&format!(
                "[{}]\nno-such-key = 1\n",
                s.name
            ))
            .unwrap_err()
            .to_string();
            for a in &s.args {
                let key = a.get_long().unwrap();
                assert!(
                    err.contains(&format!("`{key}`")),
                    "[{}] {key}: {err}",
                    s.name
                );
            }
        }
    }
}
