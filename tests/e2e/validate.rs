//! `trainguard validate` against the API server's own answer: every case under
//! tests/data/validate/rows that the cluster can hold (no `state.yaml`: the JobSet, Job and pod
//! evidence those rows describe is the running job's own here) goes through `validate` and through
//! the API server (`kubectl create --dry-run=server` for a CREATE; for an UPDATE the old object is
//! created for real, the controllers bring it to the state it describes, then
//! `kubectl replace --dry-run=server` sends the new one), with each Trainer release's TrainJob CRD
//! installed in turn and `validate --trainer-version` set to match. Verdicts and the field named
//! must agree, except for the documented differences listed in `KNOWN`. Trainer's own validating
//! webhook (v2.3.0's, the controller running) takes part only while v2.3.0's CRD is installed.

use std::path::Path;
use std::process::Command;
use std::sync::LazyLock;

use trainguard_core::trainer::TrainerVersion;

use crate::cluster::{eventually, plane, wait_jobset_active};

/// The Trainer releases whose CRDs are installed in turn (the core's table of releases), with
/// `validate`'s name for each.
pub(crate) static RELEASES: LazyLock<Vec<(&str, &str)>> =
    LazyLock::new(|| TrainerVersion::ALL.iter().map(|v| (v.tag(), v.name())).collect());

/// (release, row) pairs where `validate` and the API server disagree on purpose, with the reason
/// (docs/ci.md); `*` matches every release.
///
/// The rows' namespaces are opted out of trainguard, so the API server's verdict is its CRD's and,
/// under v2.3.0's CRD, Trainer v2.3.0's validator (the controller this plane runs). Under the older
/// releases' CRDs no Trainer validator of that release runs here: a row that only a rule about
/// the overrides denies (trainguard's U2, U5, or its shape rule on v2.0) is allowed by the API
/// server alone. Those rules are compared with each release's own Trainer code by `make oracle`
/// instead (the rows are among its manifest cases).
const NO_TRAINER_OF_THE_RELEASE: &str =
    "a rule about the overrides; no Trainer validator of this release runs on the plane (make oracle compares it)";
const KNOWN: &[(&str, &str, &str)] = &[
    ("v2.0.1", "create-shape-podspec", NO_TRAINER_OF_THE_RELEASE),
    ("v2.0.1", "u2-kueue", NO_TRAINER_OF_THE_RELEASE),
    ("v2.0.1", "u2-podspec", NO_TRAINER_OF_THE_RELEASE),
    ("v2.1.0", "u2-podtemplate", NO_TRAINER_OF_THE_RELEASE),
    ("v2.2.1", "u2-added", NO_TRAINER_OF_THE_RELEASE),
    ("v2.2.1", "u2-runtimepatches", NO_TRAINER_OF_THE_RELEASE),
    ("v2.2.1", "u2-runtimepatches-reordered", NO_TRAINER_OF_THE_RELEASE),
    ("v2.2.1", "u5-suspend-and-change", NO_TRAINER_OF_THE_RELEASE),
];

fn rows() -> Vec<std::path::PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/validate/rows");
    let mut rows: Vec<_> = std::fs::read_dir(&dir)
        .expect("rows")
        .map(|e| e.expect("entry").path())
        .filter(|p| !p.join("state.yaml").exists())
        // A status in the old object is evidence the cluster cannot hold: CREATE drops it (the
        // status subresource), and the controllers would rewrite it.
        .filter(|p| std::fs::read_to_string(p.join("old.yaml")).map_or(true, |old| !old.contains("\nstatus:")))
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

fn validate_verdict(row: &Path, version: &str) -> (bool, String) {
    let mut cmd = Command::new(plane().var("TRAINGUARD_BIN"));
    cmd.args(["validate", "--trainer-version", version]);
    if row.join("old.yaml").exists() {
        cmd.arg("--old").arg(row.join("old.yaml"));
    }
    let out = cmd.arg(row.join("new.yaml")).output().expect("run trainguard validate");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

#[allow(clippy::disallowed_methods, reason = "polls the real API server until the CRD is served")]
fn api_server_verdict(row: &Path, ns: &str) -> (bool, String) {
    let k = || plane().kubectl().args(["-n", ns]);
    let new = without_namespace(&row.join("new.yaml"));
    let out = if row.join("old.yaml").exists() {
        let old = without_namespace(&row.join("old.yaml"));
        let created = k().args(["create", "-f", "-"]).output_with(&old);
        if !created.status.success() {
            return (false, format!("{OLD_REFUSED}{}", String::from_utf8_lossy(&created.stderr)));
        }
        let name = old.lines().find_map(|l| l.strip_prefix("  name: ")).expect("old object's name").trim().to_string();
        if old.contains("suspend: false") || !old.contains("suspend:") {
            wait_jobset_active(ns, &name);
        }
        // Trainer's controller writes the object while it starts the run: a replace racing it gets
        // a Conflict, which says nothing about the verdict, so it is retried.
        let mut attempt = 0;
        loop {
            let out = k().args(["replace", "--dry-run=server", "-f", "-"]).output_with(&new);
            attempt += 1;
            if attempt == 10 || !String::from_utf8_lossy(&out.stderr).contains("the object has been modified") {
                break out;
            }
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
    } else {
        k().args(["create", "--dry-run=server", "-f", "-"]).output_with(&new)
    };
    (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// The directory of a Trainer release's module (its manifests), from the Go module cache.
fn trainer_module(release: &str) -> std::path::PathBuf {
    let out = Command::new("go")
        .args(["mod", "download", "-json", &format!("github.com/kubeflow/trainer/v2@{release}")])
        .current_dir(plane().run_dir())
        .output()
        .expect("run go mod download");
    assert!(out.status.success(), "go mod download: {}", String::from_utf8_lossy(&out.stderr));
    let info: serde_json::Value = serde_json::from_slice(&out.stdout).expect("go mod download -json");
    info["Dir"].as_str().expect("module Dir").into()
}

pub(crate) fn install_trainjob_crd(release: &str) {
    let crd = trainer_module(release).join("manifests/base/crds/trainer.kubeflow.org_trainjobs.yaml");
    plane().kubectl().args(["apply", "--server-side", "--force-conflicts", "-f"]).args([&crd]).ok();
    plane()
        .kubectl()
        .args(["wait", "--for", "condition=established", "--timeout=60s", "crd/trainjobs.trainer.kubeflow.org"])
        .ok();
    // The API server serves the new schema once its CRD handler has swapped: wait until a
    // server-side dry run sees it (a field only some releases have is accepted or refused).
    let (spec, accepted) = schema_probe(release);
    let probe = format!(
        "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata:\n  name: probe\n  namespace: default\nspec:\n  suspend: true\n  runtimeRef:\n    name: e2e-torch\n{spec}"
    );
    eventually(&format!("the API server serving {release}'s TrainJob schema"), || {
        let out = plane().kubectl().args(["create", "--dry-run=server", "-f", "-"]).output_with(&probe);
        (out.status.success() == accepted).then_some(())
    });
}

/// A `spec` fragment that tells the releases' schemas apart, and whether `release` accepts it.
fn schema_probe(release: &str) -> (&'static str, bool) {
    const GRACE: &str = "  runtimePatches:\n  - manager: e2e.trainguard.io/probe\n    trainingRuntimeSpec:\n      template:\n        spec:\n          replicatedJobs:\n          - name: node\n            template:\n              spec:\n                template:\n                  spec:\n                    terminationGracePeriodSeconds: 5\n";
    match release {
        "v2.0.1" => ("  podSpecOverrides:\n  - targetJobs:\n    - name: node\n", true),
        "v2.1.0" => ("  podTemplateOverrides:\n  - targetJobs:\n    - name: node\n", true),
        // v2.2.1 has runtimePatches but not a patch's terminationGracePeriodSeconds (v2.3.0 does).
        "v2.2.1" => (GRACE, false),
        _ => (GRACE, true),
    }
}

/// Puts the plane's own release (v2.3.0) back, pass or fail.
pub(crate) struct RestoreCrd;

impl Drop for RestoreCrd {
    fn drop(&mut self) {
        install_trainjob_crd(plane().var("TRAINER_VERSION"));
    }
}

#[test]
fn validate_agrees_with_the_api_server_on_every_row_the_cluster_can_hold_for_each_release() {
    let _restore = RestoreCrd;
    let mut differences = Vec::new();
    let mut table = String::new();
    for (release, version) in RELEASES.iter() {
        install_trainjob_crd(release);
        let with_trainer = *release == plane().var("TRAINER_VERSION");
        // The rows are independent (a namespace each): eight at a time.
        let rows = rows();
        let verdicts: Vec<_> = rows
            .chunks(8)
            .flat_map(|chunk| {
                std::thread::scope(|scope| {
                    let handles: Vec<_> =
                        chunk.iter().map(|row| scope.spawn(move || judge(row, version, with_trainer))).collect();
                    handles.into_iter().map(|h| h.join().expect("row thread")).collect::<Vec<_>>()
                })
            })
            .collect();
        for (id, (tg, tg_text), (api, api_text)) in verdicts {
            // An old object the API server refuses cannot exist in this cluster (a legacy value
            // stored before the CRD's rule): its UPDATE is not comparable here; the oracle
            // (`make oracle`) judges it, ratcheting included.
            if api_text.starts_with(OLD_REFUSED) {
                table
                    .push_str(&format!("{release} {id:<30} validate={:<6} (old object cannot be held)\n", verdict(tg)));
                continue;
            }
            let (tg_field, api_field) = (first_field(&tg_text), first_field(&api_text));
            table.push_str(&format!(
                "{release} {id:<30} validate={:<6} {tg_field:<28?} api-server={:<6} {api_field:?}\n",
                verdict(tg),
                verdict(api)
            ));
            let differ = tg != api || (!tg && tg_field != api_field);
            let known = KNOWN.iter().any(|(r, k, _)| (*r == "*" || r == release) && *k == id);
            if differ != known {
                differences.push(format!(
                    "{release} {id}: validate {} / API server {}{}\n  validate: {}\n  API server: {}",
                    verdict(tg),
                    verdict(api),
                    if known { " (listed as a known difference, but they agree now)" } else { "" },
                    tg_text.trim(),
                    api_text.trim()
                ));
            }
        }
    }
    eprintln!("{table}");
    assert!(differences.is_empty(), "validate and the API server disagree:\n{}", differences.join("\n"));
}

type Verdict = (bool, String);

const OLD_REFUSED: &str = "old object refused: ";

/// One row under one release: its id, validate's verdict and the API server's, each with its text.
/// The row's namespace is opted out of trainguard's webhooks by an admin (the namespace label
/// `trainguard.io/webhook: disabled`), so the API server's verdict is its own and upstream's,
/// never trainguard's: the two verdicts compared are independent.
fn judge(row: &Path, version: &str, with_trainer: bool) -> (String, Verdict, Verdict) {
    let id = row.file_name().expect("row name").to_string_lossy().into_owned();
    let labels: &[(&str, &str)] = if with_trainer {
        &[("trainguard.io/webhook", "disabled")]
    } else {
        &[("trainguard.io/webhook", "disabled"), ("e2e.trainguard.io/trainer-webhook", "off")]
    };
    let ns = plane().namespace(&format!("e2e-row-{}-{id}", version.replace('.', "")), labels);
    (id, validate_verdict(row, version), api_server_verdict(row, &ns.name))
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
