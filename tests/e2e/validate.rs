//! `trainguard validate` against the API server's own answer: every case under
//! tests/data/validate/rows that the cluster can hold (no `state.yaml`: the JobSet, Job and pod
//! evidence those rows describe is the running job's own here) goes through `validate` and through
//! the API server (`kubectl create --dry-run=server` for a CREATE; for an UPDATE the old object is
//! created for real, the controllers bring it to the state it describes, then
//! `kubectl replace --dry-run=server` sends the new one). Verdicts must agree, except for the
//! documented differences listed in `KNOWN`.

use std::path::Path;
use std::process::Command;

use crate::cluster::{eventually, plane, wait_jobset_active};

/// Rows where `validate` and the API server disagree on purpose, with the reason (docs/ci.md).
const KNOWN: &[(&str, &str)] = &[(
    "u5-suspend-and-change",
    "suspend and change in one commit of a running job: the cluster denies it (its JobSet is still \
     active when the change arrives); validate allows it with a warning",
)];

fn rows() -> Vec<std::path::PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/validate/rows");
    let mut rows: Vec<_> = std::fs::read_dir(&dir)
        .expect("rows")
        .map(|e| e.expect("entry").path())
        .filter(|p| !p.join("state.yaml").exists())
        .collect();
    rows.sort();
    rows
}

/// The manifest with its namespace removed (the test's namespace is given to kubectl), and the
/// same for validate's namespace flag.
fn without_namespace(path: &Path) -> String {
    std::fs::read_to_string(path)
        .expect("manifest")
        .lines()
        .filter(|l| !l.starts_with("  namespace:"))
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

fn validate_verdict(row: &Path) -> (bool, String) {
    let mut cmd = Command::new(plane().var("TRAINGUARD_BIN"));
    cmd.args(["validate", "--trainer-version", "v2.3"]);
    if row.join("old.yaml").exists() {
        cmd.arg("--old").arg(row.join("old.yaml"));
    }
    let out = cmd.arg(row.join("new.yaml")).output().expect("run trainguard validate");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

fn api_server_verdict(row: &Path, ns: &str) -> (bool, String) {
    let k = || plane().kubectl().args(["-n", ns]);
    let new = without_namespace(&row.join("new.yaml"));
    let out = if row.join("old.yaml").exists() {
        let old = without_namespace(&row.join("old.yaml"));
        let created = k().args(["create", "-f", "-"]).output_with(&old);
        if !created.status.success() {
            return (false, format!("old object refused: {}", String::from_utf8_lossy(&created.stderr)));
        }
        let name = old.lines().find_map(|l| l.strip_prefix("  name: ")).expect("old object's name").trim().to_string();
        if old.contains("suspend: false") || !old.contains("suspend:") {
            wait_jobset_active(ns, &name);
        }
        k().args(["replace", "--dry-run=server", "-f", "-"]).output_with(&new)
    } else {
        k().args(["create", "--dry-run=server", "-f", "-"]).output_with(&new)
    };
    (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn validate_agrees_with_the_api_server_on_every_row_the_cluster_can_hold() {
    let mut differences = Vec::new();
    let mut table = String::new();
    for row in rows() {
        let id = row.file_name().expect("row name").to_string_lossy().into_owned();
        let ns = plane().namespace(&format!("e2e-row-{id}"), &[]);
        // Trainer's and trainguard's webhook configurations are live before the first row.
        eventually("the webhooks registered", || {
            let hooks = plane().kubectl().args(["get", "validatingwebhookconfigurations", "-o", "name"]).ok();
            (hooks.contains("trainguard-validating") && hooks.contains("trainer-validating")).then_some(())
        });
        let (tg, tg_text) = validate_verdict(&row);
        let (api, api_text) = api_server_verdict(&row, &ns.name);
        table.push_str(&format!("{id:<36} validate={:<6} api-server={}\n", verdict(tg), verdict(api)));
        let (tg_field, api_field) = (first_field(&tg_text), first_field(&api_text));
        table.push_str(&format!("{:<36}   validate: {tg_field:?}  api-server: {api_field:?}\n", ""));
        let differ = tg != api || (!tg && tg_field != api_field);
        let known = KNOWN.iter().any(|(k, _)| *k == id);
        if differ != known {
            differences.push(format!(
                "{id}: validate {} / API server {}\n  validate: {}\n  API server: {}",
                verdict(tg),
                verdict(api),
                tg_text.trim(),
                api_text.trim()
            ));
        }
    }
    eprintln!("{table}");
    assert!(differences.is_empty(), "validate and the API server disagree:\n{}", differences.join("\n"));
}

/// The top-level field (`spec.x` or `metadata.x`) a denial names first, lower-cased: Trainer's
/// webhook names fields by their Go names (`spec.RuntimeRef`), the API server and trainguard by
/// their JSON names.
fn first_field(text: &str) -> Option<String> {
    let at = ["spec.", "metadata."].iter().filter_map(|p| text.find(p)).min()?;
    let path: String = text[at..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '.').collect();
    let mut parts = path.split('.');
    Some(format!("{}.{}", parts.next()?, parts.next()?).to_ascii_lowercase())
}

fn verdict(allowed: bool) -> &'static str {
    if allowed { "allow" } else { "deny" }
}
