//! The oracle checked against the real handler. `make oracle` judges thousands of generated cases
//! per Trainer release with upstream's own code, but that code is called the way the oracle calls
//! it (`rest.BeforeCreate`/`BeforeUpdate`, the CRD's validators), not the way kube-apiserver's
//! handler does (field manager, defaulting, the status subresource, strict field validation). Here
//! a sample of those cases (`replay-<tag>.jsonl` in the oracle directory, written by `make oracle`)
//! is sent to the plane's kube-apiserver as server-side dry runs under the release's TrainJob CRD —
//! a CREATE as a POST, an UPDATE as a PUT over the old object created for real — in a namespace
//! opted out of trainguard's and Trainer's webhooks, so the answer is the API server's alone. The
//! verdict and the field paths must be the oracle's.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

use serde_json::{Value, json};

use crate::cluster::plane;
use crate::validate::{RELEASES, RestoreCrd, install_trainjob_crd};

/// Where `make oracle` left its sample (`TRAINGUARD_ORACLE_DIR`, else `target/oracle`).
fn oracle_dir() -> PathBuf {
    std::env::var_os("TRAINGUARD_ORACLE_DIR").map(PathBuf::from).unwrap_or_else(|| {
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target"));
        target.join("oracle")
    })
}

/// One replayed case as `make oracle` wrote it, with the oracle's verdict.
#[derive(serde::Deserialize)]
struct Replay {
    id: String,
    old: Option<Value>,
    new: Value,
    refused: bool,
    /// The fields strict field validation refuses: then the API server answers 400 naming only
    /// these, before any schema validation runs.
    unknown: Vec<String>,
    paths: Vec<String>,
    /// Those of `paths` named only for an integer past its format's range.
    #[serde(default)]
    integer_format: Vec<String>,
}

/// The API server's answer to one request: HTTP status and body.
fn request(method: &str, path: &str, body: &Value) -> (u16, Value) {
    request_as(method, path, "application/json", body)
}

fn request_as(method: &str, path: &str, content_type: &str, body: &Value) -> (u16, Value) {
    let run = plane().run_dir();
    let certs = run.join("certs");
    let url = format!("https://127.0.0.1:{}{path}", plane().var("APISERVER_PORT"));
    let out = Command::new("curl")
        .args(["-s", "--max-time", "30", "-X", method, "-H", &format!("Content-Type: {content_type}")])
        .args(if method == "GET" { &[][..] } else { &["--data-binary", "@-"][..] })
        .arg("--cacert")
        .arg(certs.join("ca.crt"))
        .arg("--cert")
        .arg(certs.join("admin.crt"))
        .arg("--key")
        .arg(certs.join("admin.key"))
        .args(["-w", "\n%{http_code}", &url])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child.stdin.take().expect("stdin").write_all(body.to_string().as_bytes())?;
            child.wait_with_output()
        })
        .expect("run curl");
    let text = String::from_utf8_lossy(&out.stdout);
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", &text));
    (
        code.trim().parse().unwrap_or_else(|_| panic!("{method} {path}: no HTTP status: {text}")),
        serde_json::from_str(body).unwrap_or(Value::Null),
    )
}

/// The one difference between the oracle and the real handler that is known and counted: a place
/// where the oracle's libraries are older than this plane's API server.
const INTEGER_FORMAT: &str = "an integer past its format's range: this plane's kube-apiserver (1.36 and 1.37) refuses \
     it, the libraries the v2.0.1 and v2.1.0 oracles link do not check it";

/// The same check the other way round: the v2.2.1 and v2.3.0 oracles link v0.36 libraries, which
/// make it, and a plane's kube-apiserver before 1.36 does not.
const INTEGER_FORMAT_BEFORE_1_36: &str = "an integer past its format's range: the oracle's libraries (v0.36) \
     refuse it, this plane's kube-apiserver (before 1.36) does not check it";

/// Whether the plane's kube-apiserver checks an integer's format range (1.36 and later).
fn plane_checks_integer_format() -> bool {
    let minor = plane().var("KUBERNETES_MINOR");
    let number: u32 =
        minor.strip_prefix("v1.").and_then(|m| m.parse().ok()).unwrap_or_else(|| panic!("KUBERNETES_MINOR={minor}"));
    number >= 36
}

/// Where Kubernetes 1.37's API server names an owner reference by its index and the oracles'
/// libraries (1.36 and older) do not: `metadata.ownerReferences[0].kind` for
/// `metadata.ownerReferences.kind` (k8s.io/apimachinery's `ValidateOwnerReferences` passes
/// `fldPath.Index(idx)` since v0.37). The same fields, so compared without the index and counted.
const OWNER_REFERENCE_INDEX: &str = "an owner reference's field named with its index: this plane's kube-apiserver (1.37) \
     names `metadata.ownerReferences[N]`, the oracles' libraries `metadata.ownerReferences`";

/// `metadata.ownerReferences[N]...` without the index, or `None` for any other path.
fn without_owner_reference_index(field: &str) -> Option<String> {
    let rest = field.strip_prefix("metadata.ownerReferences[")?;
    let (index, rest) = rest.split_once(']')?;
    index.bytes().all(|b| b.is_ascii_digit()).then(|| format!("metadata.ownerReferences{rest}"))
}

/// The cause that 1.36's number validation adds for a value past its format (`<nil>`: `Checked
/// value must be of type integer with format int32 in spec.x`, or `(default format)`).
fn is_integer_format(message: &str) -> bool {
    message.contains("Checked value must be of type integer")
}

/// The field paths a refusal names: its causes' fields (`<nil>`-less), and for a strict decoding
/// error (400) each `unknown field "x.y"` it lists. Integer-format causes are left out where
/// `integer_format` is false (the release's oracle does not know them) and counted in `tolerated`.
fn refused_paths(
    status: &Value,
    integer_format: bool,
    tolerated: &mut BTreeMap<&'static str, usize>,
) -> std::collections::BTreeSet<String> {
    let mut paths = std::collections::BTreeSet::new();
    for cause in status["details"]["causes"].as_array().into_iter().flatten() {
        let field = cause["field"].as_str().unwrap_or_default();
        let message = cause["message"].as_str().unwrap_or_default();
        // The anyOf summary and the "rules were not checked" note repeat a cause already listed.
        if message.contains("must validate at least one schema (anyOf)")
            || message.contains("some validation rules were not checked")
        {
            continue;
        }
        if !integer_format && is_integer_format(message) {
            *tolerated.entry(INTEGER_FORMAT).or_default() += 1;
            continue;
        }
        match message.strip_prefix("unknown field \"") {
            Some(rest) => paths.extend(rest.split('"').next().map(String::from)),
            None => {
                // A cause on the whole object has no field: `<nil>` on the wire, `""` in the oracle.
                if let Some(unindexed) = without_owner_reference_index(field) {
                    *tolerated.entry(OWNER_REFERENCE_INDEX).or_default() += 1;
                    paths.insert(unindexed);
                } else {
                    paths.insert(if field == "<nil>" { String::new() } else { field.to_string() });
                }
            }
        }
    }
    if paths.is_empty() {
        let message = status["message"].as_str().unwrap_or_default();
        for part in message.split("unknown field \"").skip(1) {
            paths.extend(part.split('"').next().map(String::from));
        }
    }
    paths
}

/// Why a case cannot be replayed as it was judged, or `None`.
fn unreplayable(case: &Replay) -> Option<&'static str> {
    let meta = |o: &Value, k: &str| o["metadata"].get(k).cloned();
    if case.paths.iter().any(|p| p.starts_with("metadata.namespace")) {
        return Some("its namespace is refused (the test's namespace replaces it)");
    }
    if case.new["status"].is_object() || case.old.as_ref().is_some_and(|o| o["status"].is_object()) {
        return Some("a status (the main resource never writes it)");
    }
    let Some(old) = &case.old else { return None };
    if !old["metadata"]["deletionTimestamp"].is_null() {
        return Some("an old object being deleted (cannot be created)");
    }
    if meta(old, "name") != meta(&case.new, "name") || old["metadata"]["name"].as_str().is_none_or(str::is_empty) {
        return Some("another name than the old object's (a 400 for the URL, not a validation)");
    }
    for key in ["uid", "creationTimestamp"] {
        let (o, n) = (meta(old, key), meta(&case.new, key));
        if n.is_some() && n != o {
            return Some("a changed uid or creationTimestamp (the stored old object has the server's)");
        }
    }
    None
}

/// The object with the test's namespace, and on UPDATE the stored object's uid, timestamp and
/// resourceVersion where the case kept the old one's.
fn placed(object: &Value, ns: &str, stored: Option<&Value>) -> Value {
    let mut object = object.clone();
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("namespace".into(), json!(ns));
        if let Some(stored) = stored {
            for key in ["uid", "creationTimestamp"] {
                if meta.contains_key(key) {
                    meta.insert(key.into(), stored["metadata"][key].clone());
                }
            }
            meta.insert("resourceVersion".into(), stored["metadata"]["resourceVersion"].clone());
        }
    }
    object
}

#[test]
fn the_oracles_generated_cases_get_the_same_verdict_from_the_real_api_server() {
    let dir = oracle_dir();
    let _restore = RestoreCrd;
    let mut table = String::new();
    let mut differences = Vec::new();
    for (release, _) in RELEASES.iter() {
        let file = dir.join(format!("replay-{release}.jsonl"));
        let text = std::fs::read_to_string(&file)
            .unwrap_or_else(|e| panic!("{} ({e}): run `make oracle` first (`.ci/run` does)", file.display()));
        let cases: Vec<Replay> = text.lines().map(|l| serde_json::from_str(l).expect("a replay line")).collect();
        install_trainjob_crd(release);
        let ns = plane().namespace(
            &format!("e2e-replay-{}", release.replace('.', "")),
            &[("trainguard.io/webhook", "disabled"), ("e2e.trainguard.io/trainer-webhook", "off")],
        );
        let base = format!("/apis/trainer.kubeflow.org/v1alpha1/namespaces/{}/trainjobs", ns.name);
        let mut skipped: BTreeMap<&str, usize> = BTreeMap::new();
        let mut tolerated: BTreeMap<&'static str, usize> = BTreeMap::new();
        let (mut creates, mut updates, mut conflicts) = (0, 0, 0);
        for case in &cases {
            if let Some(why) = unreplayable(case) {
                *skipped.entry(why).or_default() += 1;
                continue;
            }
            let (code, answer) = match &case.old {
                None => {
                    creates += 1;
                    request(
                        "POST",
                        &format!("{base}?dryRun=All&fieldValidation=Strict"),
                        &placed(&case.new, &ns.name, None),
                    )
                }
                Some(old) => {
                    let (code, stored) =
                        request("POST", &format!("{base}?fieldValidation=Strict"), &placed(old, &ns.name, None));
                    if code != 201 {
                        *skipped.entry("an old object the API server refuses to store").or_default() += 1;
                        continue;
                    }
                    updates += 1;
                    let name = stored["metadata"]["name"].as_str().expect("stored name").to_string();
                    let item = format!("{base}/{name}");
                    // Trainer's controller writes the old object while it starts the run: a PUT
                    // racing it gets a Conflict, which says nothing about the verdict, so it is
                    // sent again over the object as it is now (and the Conflicts are counted).
                    let mut stored = stored;
                    let mut answer = request(
                        "PUT",
                        &format!("{item}?dryRun=All&fieldValidation=Strict"),
                        &placed(&case.new, &ns.name, Some(&stored)),
                    );
                    for _ in 0..10 {
                        if answer.0 != 409
                            || !answer.1["message"].as_str().is_some_and(|m| m.contains("has been modified"))
                        {
                            break;
                        }
                        conflicts += 1;
                        stored = request("GET", &item, &Value::Null).1;
                        answer = request(
                            "PUT",
                            &format!("{item}?dryRun=All&fieldValidation=Strict"),
                            &placed(&case.new, &ns.name, Some(&stored)),
                        );
                    }
                    // An owner reference to an object that does not exist: the garbage collector
                    // may delete the old object before the PUT, which then finds nothing (404, no
                    // verdict). Counted, not compared.
                    if answer.0 == 404 && old["metadata"]["ownerReferences"].is_array() {
                        updates -= 1;
                        *skipped
                            .entry("an old object the garbage collector deleted first (its owner does not exist)")
                            .or_default() += 1;
                        continue;
                    }
                    // Gone before the next case (a generated finalizer would hold it).
                    let _ = request_as(
                        "PATCH",
                        &item,
                        "application/merge-patch+json",
                        &json!({"metadata": {"finalizers": null}}),
                    );
                    let _ = request("DELETE", &item, &json!({}));
                    answer
                }
            };
            let integer_format = !matches!(*release, "v2.0.1" | "v2.1.0") && plane_checks_integer_format();
            let api: std::collections::BTreeSet<String> = if (200..300).contains(&code) {
                Default::default()
            } else {
                refused_paths(&answer, integer_format, &mut tolerated)
            };
            // Refused for an integer format alone, which this release's oracle does not check: as
            // the oracle's API server would, it admits (the cause was counted above).
            let integer_format_only = code == 422
                && api.is_empty()
                && answer["details"]["causes"]
                    .as_array()
                    .is_some_and(|c| c.iter().any(|c| c["message"].as_str().is_some_and(is_integer_format)));
            let refused = !(200..300).contains(&code) && !integer_format_only;
            // Strict field validation refuses unknown fields before the schema is checked: the
            // answer is a 400 naming those alone. Otherwise every field the oracle names.
            let mut oracle: std::collections::BTreeSet<String> = if case.unknown.is_empty() {
                case.paths.iter().cloned().collect()
            } else {
                case.unknown.iter().cloned().collect()
            };
            // A plane that does not check integer formats neither names those fields nor refuses
            // for them alone.
            let mut oracle_refuses = case.refused && (!oracle.is_empty() || case.paths.is_empty());
            if case.unknown.is_empty() && !case.integer_format.is_empty() && !plane_checks_integer_format() {
                *tolerated.entry(INTEGER_FORMAT_BEFORE_1_36).or_default() += 1;
                oracle.retain(|path| !case.integer_format.contains(path));
                oracle_refuses = case.refused && !oracle.is_empty();
            }
            // A body the API server cannot decode at all names no field: only the verdict counts.
            let paths_agree = !refused || api == oracle || (code == 400 && api.is_empty() && case.unknown.is_empty());
            if refused != oracle_refuses || !paths_agree {
                differences.push(format!(
                    "{release} {}: oracle {} {oracle:?}, API server {code} {api:?}\n  {}\n  old: {}\n  new: {}",
                    case.id,
                    if case.refused { "refuses" } else { "admits" },
                    answer["message"].as_str().unwrap_or_default(),
                    case.old.as_ref().map_or("-".into(), Value::to_string),
                    case.new
                ));
            }
        }
        table.push_str(&format!(
            "{release}: {} cases, {creates} CREATEs and {updates} UPDATEs replayed ({conflicts} Conflicts with Trainer's \
             controller sent again); skipped {skipped:?}; known differences {tolerated:?}\n",
            cases.len()
        ));
        assert!(
            creates >= 10 && updates >= 10,
            "{release}: too few cases replayed ({creates} CREATE, {updates} UPDATE)"
        );
    }
    eprintln!("{table}");
    assert!(differences.is_empty(), "the oracle and the real API server disagree:\n{}", differences.join("\n"));
}
