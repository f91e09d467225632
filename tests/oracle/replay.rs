//! A sample of the generated cases with the oracle's verdict, written for the e2e suite to replay
//! against the plane's real kube-apiserver (tests/e2e/oracle_replay.rs): `replay-<tag>.jsonl` in
//! the oracle directory, one case a line (`id`, `old`, `new`, `refused`, `unknown`: the fields strict
//! field validation refuses, `paths`: every field the API server's refusal names, and
//! `integer_format`: those of them named only for an integer past its format's range, which
//! kube-apiserver checks since 1.36).

use std::path::Path;

use serde_json::json;

use super::{Answer, Case, api_causes, api_paths, is_integer_format};

/// CREATEs and UPDATEs, spread evenly over the run. More UPDATEs: about two in three carry an old
/// object with edge values the API server refuses to store, which cannot be replayed.
const CREATES: usize = 60;
const UPDATES: usize = 180;

pub(crate) fn write(dir: &Path, tag: &str, cases: &[Case], answers: &[Answer]) {
    let mut lines = Vec::new();
    for update in [false, true] {
        let picked: Vec<(&Case, &Answer)> =
            cases.iter().zip(answers).filter(|(case, _)| case.old.is_some() == update).collect();
        let want = if update { UPDATES } else { CREATES };
        let step = (picked.len() / want).max(1);
        for (case, answer) in picked.into_iter().step_by(step).take(want) {
            let paths: Vec<String> =
                if answer.decode.is_some() { Vec::new() } else { api_paths(answer).into_iter().collect() };
            let causes = api_causes(answer);
            let integer_format: Vec<&String> = paths
                .iter()
                .filter(|path| {
                    let mut on_path = causes.iter().filter(|(p, _)| p == *path).peekable();
                    on_path.peek().is_some() && on_path.all(|(_, cause)| is_integer_format(&cause.detail))
                })
                .collect();
            lines.push(
                json!({"id": case.id, "old": case.old, "new": case.new, "refused": answer.refused(),
                    "unknown": answer.unknown, "paths": paths, "integer_format": integer_format})
                .to_string(),
            );
        }
    }
    let file = dir.join(format!("replay-{tag}.jsonl"));
    std::fs::write(&file, lines.join("\n") + "\n").unwrap_or_else(|e| panic!("{}: {e}", file.display()));
}
