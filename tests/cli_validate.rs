//! `trainguard validate` as a user runs it: the binary over fixture trees in
//! `tests/data/validate/`, and over git repositories built by the test.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const U2_MESSAGE: &str = "spec.podSpecOverrides: Forbidden: can only be changed while the TrainJob is suspended: \
     set spec.suspend to true, wait until JobSet ml-team/llama has no active jobs, then edit";
const OFFLINE_WARNING: &str = "trainguard: JobSet ml-team/llama was not consulted (no cluster state); only the \
     TrainJob's own status was checked";

fn data(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/validate").join(path)
}

/// The binary under test; `TRAINGUARD_BIN` overrides it (a release build, or a copy taken while
/// other worktrees share the target directory and overwrite `target/debug/trainguard`).
fn bin() -> PathBuf {
    std::env::var_os("TRAINGUARD_BIN").map_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_trainguard")), PathBuf::from)
}

fn trainguard(dir: &Path, args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut child = Command::new(bin())
        .args(args)
        // The fixtures mix the override fields of several Trainer releases to exercise the
        // rules; the schema check has its own tests (tests/cli_schema.rs).
        .env("TRAINGUARD_SCHEMA", "off")
        .current_dir(dir)
        .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run trainguard");
    if let Some(input) = stdin {
        child.stdin.take().unwrap().write_all(input).unwrap();
    }
    child.wait_with_output().unwrap()
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn validate(dir: &Path, args: &[&str]) -> Run {
    validate_stdin(dir, args, None)
}

fn validate_stdin(dir: &Path, args: &[&str], stdin: Option<&[u8]>) -> Run {
    let mut all = vec!["validate"];
    all.extend_from_slice(args);
    let out = trainguard(dir, &all, stdin);
    let run = Run {
        code: out.status.code().expect("exited, not killed"),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    assert!(!run.stderr.contains("panicked"), "panic: {}", run.stderr);
    run
}

/// Every row of the rules (docs/webhook.md), CREATE and UPDATE, through `validate --old old.yaml new.yaml` (plus
/// `--state state.yaml` where the case has one). Expected: exit status and the verdict line.
#[test]
fn spec_rows() {
    let allowed = "allowed (CREATE)";
    let update = "allowed (UPDATE)";
    let warned = &format!("allowed (UPDATE); warning: {OFFLINE_WARNING}") as &str;
    let cases: &[(&str, &[&str], i32, &str)] = &[
        // CREATE
        ("create-ok", &[], 0, allowed),
        ("create-suspended", &[], 0, allowed),
        ("create-multikueue", &[], 0, allowed),
        (
            "create-managedby-other",
            &[],
            1,
            "denied: spec.managedBy: Invalid value: \"example.com/my-controller\": must be one of",
        ),
        ("create-managedby-other", &["--allowed-managed-by", "example.com/my-controller"], 0, allowed),
        ("create-managedby-empty", &[], 1, "denied: spec.managedBy: Invalid value: \"\": must be one of"),
        ("create-bad-name", &[], 1, "denied: metadata.name: Invalid value: \"Llama_7B\": a DNS-1035 label"),
        ("create-shape-podspec", &[], 1, "denied: spec.podSpecOverrides[0].targetJobs: Required value"),
        ("create-shape-podtemplate", &[], 1, "denied: spec.podTemplateOverrides[0].targetJobs[0].name: Required value"),
        ("create-shape-runtimepatches", &[], 1, "denied: spec.runtimePatches[0].manager: Required value"),
        // U1: overrides unchanged
        ("u1-label-only", &[], 0, update),
        ("u1-runtimepatches-reordered", &[], 0, update),
        // U2: running before and after, all three field names
        ("u2-podspec", &[], 1, &format!("denied: {U2_MESSAGE}")),
        ("u2-podtemplate", &[], 1, "denied: spec.podTemplateOverrides: Forbidden: can only be changed while"),
        ("u2-runtimepatches", &[], 1, "denied: spec.runtimePatches: Forbidden: can only be changed while"),
        ("u2-added", &[], 1, "denied: spec.runtimePatches: Forbidden"),
        ("u2-kueue", &[], 1, "set spec.active to false on its Workload"),
        // U3/U4/U5 offline: allowed with the warning, denied with --strict
        ("u3-stays-suspended", &[], 0, warned),
        ("u3-stays-suspended", &["--strict"], 1, &format!("denied: {OFFLINE_WARNING} (--strict")),
        ("u3-g4-status-active", &[], 1, "replicated job \"node\" of TrainJob ml-team/llama has 3 active jobs"),
        ("u4-resume", &[], 0, warned),
        ("u4-resume", &["--suspend-rule", "new"], 1, "(--suspend-rule=new)"),
        ("u5-suspend-and-change", &[], 0, warned),
        ("u5-suspend-and-change", &["--strict"], 1, "denied: trainguard: JobSet ml-team/llama was not consulted"),
        // M rules
        (
            "m1-managedby-changed",
            &[],
            1,
            "denied: spec.managedBy: Invalid value: \"kueue.x-k8s.io/multikueue\": field is immutable",
        ),
        ("m2-not-rechecked", &[], 0, update),
        // The gate with --state
        ("g1-jobset-active", &[], 1, "replicated job \"node\" of JobSet ml-team/llama has 2 active jobs"),
        ("g2-jobset-deleting", &[], 1, "JobSet ml-team/llama is still being deleted"),
        ("g3-child-job-active", &[], 1, "job ml-team/llama-node-0 still has 4 active pods"),
        (
            "g4-live-trainjob",
            &[],
            1,
            "of TrainJob ml-team/llama has 2 active jobs (status.jobsStatus): suspending and changing",
        ),
        ("g5-child-job-terminating", &[], 1, "job ml-team/llama-node-0 still has 3 terminating pods"),
        ("gate-clear", &[], 0, update),
        ("gate-clear", &["--strict"], 0, update),
    ];
    for (case, extra, code, want) in cases {
        let dir = data("rows").join(case);
        let mut args: Vec<&str> = Vec::new();
        if dir.join("old.yaml").exists() {
            args.extend(["--old", "old.yaml"]);
        }
        if dir.join("state.yaml").exists() {
            args.extend(["--state", "state.yaml"]);
        }
        args.extend_from_slice(extra);
        args.push("new.yaml");
        let run = validate(&dir, &args);
        let first = run.stdout.lines().next().unwrap_or("");
        assert_eq!(run.code, *code, "{case} {extra:?}: {}{}", run.stdout, run.stderr);
        assert!(first.starts_with("trainjob.trainer.kubeflow.org/ml-team/"), "{case}: {first}");
        assert!(first.contains(" (new.yaml:1): "), "{case}: {first}");
        assert!(first.contains(want), "{case} {extra:?}:\n  got  {first}\n  want {want}");
    }
}

#[test]
fn a_tree_of_mixed_files() {
    let run = validate(&data("mixed"), &["."]);
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    let want = [
        "trainjob.trainer.kubeflow.org/ml-team/bert (all-in-one.yaml:12): allowed (CREATE)",
        "trainjob.trainer.kubeflow.org/default/gpt (job.json:1): allowed (CREATE)",
        "trainjob.trainer.kubeflow.org/ml-team/t5 (list.yaml:4): allowed (CREATE)",
        "trainjob.trainer.kubeflow.org/ml-team/vit (list.yaml:12): denied: spec.managedBy: Invalid value: \
         \"example.com/other\": must be one of \"trainer.kubeflow.org/trainjob-controller\", \
         \"kueue.x-k8s.io/multikueue\"; leave it unset for Trainer's own controller",
        "trainjob.trainer.kubeflow.org/research/whisper (nested/deeper/job.yml:1): allowed (CREATE)",
        "trainguard validate: 5 TrainJobs checked: 4 allowed, 1 denied; 4 other objects skipped",
    ];
    assert_eq!(run.stdout.lines().collect::<Vec<_>>(), want);
    let quiet = validate(&data("mixed"), &["--quiet", "--namespace", "other", "."]);
    assert_eq!(quiet.stdout.lines().count(), 1, "{}", quiet.stdout);
    assert!(quiet.stdout.starts_with("trainjob.trainer.kubeflow.org/ml-team/vit"));
    let renamed = validate(&data("mixed"), &["--namespace", "other", "job.json"]);
    assert!(renamed.stdout.starts_with("trainjob.trainer.kubeflow.org/other/gpt (job.json:1)"), "{}", renamed.stdout);
}

#[test]
fn stdin_and_its_old_counterpart() {
    let new = std::fs::read(data("rows/u2-podspec/new.yaml")).unwrap();
    let run = validate_stdin(&data("rows/u2-podspec"), &["--old", "old.yaml", "-"], Some(&new));
    assert_eq!(run.code, 1);
    assert_eq!(
        run.stdout.lines().next().unwrap(),
        format!("trainjob.trainer.kubeflow.org/ml-team/llama (-:1): denied: {U2_MESSAGE}")
    );
    let json = br#"{"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": {"name": "j"}}"#;
    let run = validate_stdin(&data("rows"), &["-"], Some(json));
    assert_eq!(run.code, 0);
    assert!(
        run.stdout.starts_with("trainjob.trainer.kubeflow.org/default/j (-:1): allowed (CREATE)"),
        "{}",
        run.stdout
    );
}

#[test]
fn an_object_moved_between_files_is_an_update() {
    let run = validate(&data("moved"), &["--old", "old", "new"]);
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(
        lines[0],
        format!("trainjob.trainer.kubeflow.org/ml-team/llama (new/second.yaml:1): denied: {U2_MESSAGE}")
    );
    assert_eq!(lines[1], "trainjob.trainer.kubeflow.org/ml-team/bert (new/second.yaml:16): allowed (UPDATE)");
    assert_eq!(lines[2], "trainjob.trainer.kubeflow.org/ml-team/new-job (new/third.yaml:1): allowed (CREATE)");
}

#[test]
fn json_output_carries_the_webhook_causes() {
    let run = validate(
        &data("rows/g1-jobset-active"),
        &["-o", "json", "--old", "old.yaml", "--state", "state.yaml", "new.yaml"],
    );
    assert_eq!(run.code, 1);
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines.len(), 1, "{}", run.stdout);
    let v: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
    assert_eq!(v["verdict"], "denied");
    assert_eq!(v["operation"], "UPDATE");
    assert_eq!(v["file"], "new.yaml");
    assert_eq!(v["line"], 1);
    assert_eq!(v["old"], serde_json::json!({"file": "old.yaml", "line": 1}));
    assert_eq!(v["code"], 403);
    assert_eq!(v["reason"], "Forbidden");
    assert_eq!(v["rule"], "G1");
    assert_eq!(v["causes"][0]["field"], "spec.runtimePatches");
    assert_eq!(v["causes"][0]["reason"], "FieldValueForbidden");
    assert!(v["message"].as_str().unwrap().starts_with("spec.runtimePatches: Forbidden: replicated job \"node\""));
    assert!(run.stderr.contains("1 TrainJob checked: 0 allowed, 1 denied"), "{}", run.stderr);

    let run = validate(&data("rows/u3-stays-suspended"), &["-o", "json", "--old", "old.yaml", "new.yaml"]);
    let v: serde_json::Value = serde_json::from_str(run.stdout.trim()).unwrap();
    assert_eq!(v["verdict"], "allowed");
    assert_eq!(v["warnings"][0], OFFLINE_WARNING);
    assert_eq!(v["causes"], serde_json::json!([]));
}

#[test]
fn github_annotations() {
    let run = validate(&data("moved"), &["-o", "github", "--old", "old", "new"]);
    let lines: Vec<&str> = run.stdout.lines().collect();
    let title = "title=trainguard denied trainjob.trainer.kubeflow.org/ml-team/llama";
    assert_eq!(lines[0], format!("::error file=new/second.yaml,line=1,{title}::{U2_MESSAGE}"));
    // Allowed without warnings: no annotation.
    assert!(lines[1].starts_with("trainguard validate: 3 TrainJobs checked"), "{}", run.stdout);

    let run = validate(&data("rows/u4-resume"), &["-o", "github", "--old", "old.yaml", "new.yaml"]);
    let title = "title=trainguard trainjob.trainer.kubeflow.org/ml-team/llama";
    assert_eq!(
        run.stdout.lines().next().unwrap(),
        format!("::warning file=new.yaml,line=1,{title}::{OFFLINE_WARNING}")
    );
}

#[test]
fn broken_input_is_a_clear_error_and_exit_2() {
    let cases: &[(&[&str], &str)] = &[
        (&["syntax.yaml"], "error: syntax.yaml:5:3: YAML syntax error: invalid indentation"),
        (&["alias-bomb.yaml"], "YAML aliases expand to more than 100000 nodes"),
        (&["garbage.yaml"], "error: garbage.yaml: binary data, not YAML or JSON"),
        (&["deep.json"], "error: deep.json:1:128: JSON syntax error: recursion limit exceeded"),
        (
            &["wrong-types.yaml"],
            "error: wrong-types.yaml:7: TrainJob ml-team/bad does not decode: spec.suspend: invalid type: string \"yes\", expected a boolean",
        ),
        (&["--max-file-bytes", "100", "../rows/create-ok/new.yaml"], "file is larger than the limit of 100 bytes"),
        (&["missing.yaml"], "missing.yaml: cannot read"),
        (&["--old", "syntax.yaml", "../rows/create-ok/new.yaml"], "error: syntax.yaml:5:3: YAML syntax error"),
        (&["--state", "syntax.yaml", "../rows/create-ok/new.yaml"], "syntax.yaml:5:3: YAML syntax error"),
    ];
    for (args, want) in cases {
        let run = validate(&data("broken"), args);
        assert_eq!(run.code, 2, "{args:?}: {}{}", run.stdout, run.stderr);
        assert!(run.stderr.contains(want), "{args:?}:\n  got  {}\n  want {want}", run.stderr);
    }
    // Good files next to a broken one are still checked.
    let run = validate(&data("broken"), &["syntax.yaml", "../rows/u2-podspec/new.yaml"]);
    assert_eq!(run.code, 2);
    assert!(run.stdout.contains("ml-team/llama (../rows/u2-podspec/new.yaml:1): allowed (CREATE)"), "{}", run.stdout);
    let run = validate(&data("broken"), &["-o", "github", "wrong-types.yaml"]);
    assert!(
        run.stdout.starts_with("::error file=wrong-types.yaml,line=7,title=trainguard%3A unusable input::"),
        "{}",
        run.stdout
    );
}

mod git {
    use super::*;

    fn git(dir: &Path, args: &[&str]) {
        let out = Command::new("git").args(args).current_dir(dir).output().expect("git");
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }

    fn job(suspend: bool, gpu: &str) -> String {
        format!(
            "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata:\n  name: llama\n  namespace: ml-team\n\
             spec:\n  suspend: {suspend}\n  runtimeRef:\n    name: torch-distributed\n  podSpecOverrides:\n  - targetJobs:\n\
             \x20   - name: node\n    nodeSelector:\n      gpu: {gpu}\n"
        )
    }

    /// A repository whose first commit has a running job (and one that will be deleted), and a
    /// second commit with `change` applied to the working tree.
    fn repo(change: impl FnOnce(&Path)) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        git(d, &["init", "-q", "-b", "main"]);
        git(d, &["config", "user.email", "ci@example.com"]);
        git(d, &["config", "user.name", "ci"]);
        std::fs::create_dir_all(d.join("jobs")).unwrap();
        std::fs::write(d.join("jobs/llama.yaml"), job(false, "a100")).unwrap();
        std::fs::write(d.join("jobs/old.yaml"), job(false, "a100").replace("name: llama", "name: retired")).unwrap();
        std::fs::write(d.join("README.md"), "jobs\n").unwrap();
        git(d, &["add", "-A"]);
        git(d, &["commit", "-q", "-m", "base"]);
        change(d);
        std::fs::remove_file(d.join("jobs/old.yaml")).unwrap();
        git(d, &["add", "-A"]);
        git(d, &["commit", "-q", "-m", "change"]);
        dir
    }

    #[test]
    fn changing_the_overrides_of_a_running_job_fails() {
        let dir = repo(|d| std::fs::write(d.join("jobs/llama.yaml"), job(false, "h100")).unwrap());
        let run = validate(dir.path(), &["--git-base", "HEAD~1", "jobs"]);
        assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
        assert_eq!(
            run.stdout.lines().next().unwrap(),
            format!("trainjob.trainer.kubeflow.org/ml-team/llama (jobs/llama.yaml:1): denied: {U2_MESSAGE}")
        );
        // Deleted objects are ignored: one TrainJob checked.
        assert!(run.stdout.contains("1 TrainJob checked: 0 allowed, 1 denied"), "{}", run.stdout);
    }

    #[test]
    fn suspending_and_changing_together_passes_with_a_warning_and_fails_strict() {
        let dir = repo(|d| std::fs::write(d.join("jobs/llama.yaml"), job(true, "h100")).unwrap());
        let run = validate(dir.path(), &["--git-base", "HEAD~1", "."]);
        assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
        assert!(run.stdout.contains(&format!("(jobs/llama.yaml:1): allowed (UPDATE); warning: {OFFLINE_WARNING}")));
        let strict = validate(dir.path(), &["--git-base", "HEAD~1", "--strict", "."]);
        assert_eq!(strict.code, 1, "{}", strict.stdout);
        assert!(
            strict.stdout.contains("denied: trainguard: JobSet ml-team/llama was not consulted"),
            "{}",
            strict.stdout
        );
    }

    #[test]
    fn moving_an_object_to_another_file_is_not_a_create() {
        let dir = repo(|d| {
            std::fs::remove_file(d.join("jobs/llama.yaml")).unwrap();
            std::fs::create_dir_all(d.join("jobs/team-a")).unwrap();
            let moved = format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: c}}\n---\n{}", job(false, "h100"));
            std::fs::write(d.join("jobs/team-a/all.yaml"), moved).unwrap();
        });
        let run = validate(dir.path(), &["--git-base", "HEAD~1", "jobs"]);
        assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
        assert!(
            run.stdout.starts_with(&format!(
                "trainjob.trainer.kubeflow.org/ml-team/llama (jobs/team-a/all.yaml:5): denied: {U2_MESSAGE}"
            )),
            "{}",
            run.stdout
        );
        let json = validate(dir.path(), &["--git-base", "HEAD~1", "-o", "json", "jobs"]);
        let v: serde_json::Value = serde_json::from_str(json.stdout.lines().next().unwrap()).unwrap();
        assert_eq!(v["old"], serde_json::json!({"file": "HEAD~1:jobs/llama.yaml", "line": 1}));
    }

    #[test]
    fn an_object_moved_out_of_a_file_that_stays_is_matched_too() {
        let bert = |gpu| job(false, gpu).replace("name: llama", "name: bert");
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        git(d, &["init", "-q", "-b", "main"]);
        git(d, &["config", "user.email", "ci@example.com"]);
        git(d, &["config", "user.name", "ci"]);
        std::fs::write(d.join("a.yaml"), format!("{}---\n{}", job(false, "a100"), bert("a100"))).unwrap();
        git(d, &["add", "-A"]);
        git(d, &["commit", "-q", "-m", "base"]);
        // a.yaml keeps llama (relabelled); bert moves to b.yaml with new overrides; c.yaml is new.
        std::fs::write(
            d.join("a.yaml"),
            job(false, "a100").replace("  namespace: ml-team\n", "  namespace: ml-team\n  labels: {team: a}\n"),
        )
        .unwrap();
        std::fs::write(d.join("b.yaml"), bert("h100")).unwrap();
        std::fs::write(d.join("c.yaml"), job(false, "a100").replace("name: llama", "name: fresh")).unwrap();
        git(d, &["add", "-A"]);
        git(d, &["commit", "-q", "-m", "change"]);
        let run = validate(d, &["--git-base", "HEAD~1", "-o", "json", "."]);
        assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
        let verdicts: Vec<(String, String, String)> = run
            .stdout
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .map(|v| {
                (
                    v["name"].as_str().unwrap().into(),
                    v["operation"].as_str().unwrap().into(),
                    v["verdict"].as_str().unwrap().into(),
                )
            })
            .collect();
        let want = [("llama", "UPDATE", "allowed"), ("bert", "UPDATE", "denied"), ("fresh", "CREATE", "allowed")];
        let want: Vec<(String, String, String)> =
            want.iter().map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string())).collect();
        assert_eq!(verdicts, want);
    }

    #[test]
    fn a_missing_base_says_to_fetch_the_history() {
        let dir = repo(|_| {});
        let run = validate(dir.path(), &["--git-base", "origin/main", "jobs"]);
        assert_eq!(run.code, 2);
        assert!(run.stderr.contains("git revision \"origin/main\" not found"), "{}", run.stderr);
        assert!(run.stderr.contains("fetch-depth: 0"), "{}", run.stderr);
    }
}

#[test]
fn a_runtime_with_a_jobset_ttl_is_warned_about_never_denied() {
    let dir = std::env::temp_dir();
    let runtime = br#"apiVersion: trainer.kubeflow.org/v1alpha1
kind: ClusterTrainingRuntime
metadata:
  name: torch-distributed
spec:
  template:
    spec:
      ttlSecondsAfterFinished: 60
      replicatedJobs: []
---
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainingRuntime
metadata:
  name: no-ttl
  namespace: ml
spec:
  template:
    spec:
      replicatedJobs: []
"#;
    let text = validate_stdin(&dir, &["-"], Some(runtime));
    assert_eq!(text.code, 0, "{}{}", text.stdout, text.stderr);
    let warnings: Vec<&str> = text.stderr.lines().filter(|l| l.starts_with("warning: ")).collect();
    assert_eq!(warnings.len(), 1, "{}", text.stderr);
    assert!(warnings[0].starts_with("warning: -:1: ClusterTrainingRuntime torch-distributed:"), "{}", warnings[0]);
    assert!(warnings[0].contains("kubeflow/trainer#3779"), "{}", warnings[0]);
    assert!(text.stdout.contains("2 other objects skipped"), "{}", text.stdout);

    let json = validate_stdin(&dir, &["-", "--output", "json"], Some(runtime));
    assert_eq!(json.code, 0);
    let line: serde_json::Value = serde_json::from_str(json.stdout.lines().next().unwrap()).unwrap();
    assert_eq!(line["file"], "-");
    assert!(line["warning"].as_str().unwrap().contains("ttlSecondsAfterFinished=60"), "{line}");

    let github = validate_stdin(&dir, &["-", "--output", "github"], Some(runtime));
    assert!(github.stdout.starts_with("::warning file=-,line=1,"), "{}", github.stdout);

    let quiet = validate_stdin(&dir, &["-", "--quiet"], Some(runtime));
    assert_eq!((quiet.code, quiet.stdout.as_str(), quiet.stderr.as_str()), (0, "", ""));
}
