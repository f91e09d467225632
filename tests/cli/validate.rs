//! `trainguard validate` as a user runs it: the binary over fixture trees in
//! `tests/data/validate/`, and over git repositories built by the test.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const U2_MESSAGE: &str = "spec.podSpecOverrides: Forbidden: can only be changed while the TrainJob is suspended: \
     set spec.suspend to true (this stops training and loses progress since the last checkpoint), wait until JobSet \
     ml-team/llama has no active jobs (kubectl -n ml-team get jobs -l jobset.sigs.k8s.io/jobset-name=llama), then \
     edit, and set spec.suspend back to false to resume";
const U5_DETAIL: &str = "the old manifest has spec.suspend false, so TrainJob ml-team/llama runs and its JobSet \
     has active jobs: the cluster denies suspending and changing in one update (G1). Make it two changes: first set \
     spec.suspend to true alone and apply it, wait until JobSet ml-team/llama has no active jobs (kubectl -n ml-team \
     get jobs -l jobset.sigs.k8s.io/jobset-name=llama), then change the overrides";
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
        // rules; the schema check has its own tests (tests/cli/schema.rs).
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
        (
            "u2-runtimepatches-reordered",
            &[],
            1,
            "spec.runtimePatches: Forbidden: can only be changed while the TrainJob is suspended",
        ),
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
        // U5 offline: the old manifest says the job runs, so its JobSet is active and the cluster
        // denies the single update; a finished job's status says nothing runs.
        ("u5-suspend-and-change", &[], 1, &format!("denied: spec.runtimePatches: Forbidden: {U5_DETAIL}")),
        ("u5-suspend-and-change", &["--strict"], 1, "denied: spec.runtimePatches: Forbidden: the old manifest"),
        ("u5-finished-job", &[], 0, warned),
        ("u5-finished-job", &["--strict"], 1, "denied: trainguard: JobSet ml-team/llama was not consulted"),
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
    // On the line of the field the denial is about (spec.podSpecOverrides), not the object's.
    assert_eq!(lines[0], format!("::error file=new/second.yaml,line=10,{title}::{U2_MESSAGE}"));
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
        (&["missing.yaml"], "error: missing.yaml: cannot read"),
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

    /// Following a U2 denial's advice in one commit (suspend and change) is what the cluster
    /// denies next: the base says the job runs. Two commits (suspend first, then the change) pass.
    #[test]
    fn suspending_and_changing_in_one_commit_fails_and_two_commits_pass() {
        let dir = repo(|d| std::fs::write(d.join("jobs/llama.yaml"), job(true, "h100")).unwrap());
        let run = validate(dir.path(), &["--git-base", "HEAD~1", "."]);
        assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
        assert!(
            run.stdout.contains(&format!("(jobs/llama.yaml:1): denied: spec.podSpecOverrides: Forbidden: {U5_DETAIL}")),
            "{}",
            run.stdout
        );
        // First commit: suspend only (U1, no check); second: change while suspended (U3, offline).
        let d = dir.path();
        std::fs::write(d.join("jobs/llama.yaml"), job(false, "a100")).unwrap();
        git(d, &["commit", "-qam", "back"]);
        std::fs::write(d.join("jobs/llama.yaml"), job(true, "a100")).unwrap();
        git(d, &["commit", "-qam", "suspend"]);
        let suspend = validate(d, &["--git-base", "HEAD~1", "."]);
        assert_eq!(suspend.code, 0, "{}", suspend.stdout);
        assert!(suspend.stdout.contains("(jobs/llama.yaml:1): allowed (UPDATE)\n"), "{}", suspend.stdout);
        std::fs::write(d.join("jobs/llama.yaml"), job(true, "h100")).unwrap();
        git(d, &["commit", "-qam", "change"]);
        let change = validate(d, &["--git-base", "HEAD~1", "."]);
        assert_eq!(change.code, 0, "{}", change.stdout);
        assert!(change.stdout.contains(&format!("allowed (UPDATE); warning: {OFFLINE_WARNING}")), "{}", change.stdout);
        let strict = validate(d, &["--git-base", "HEAD~1", "--strict", "."]);
        assert_eq!(strict.code, 1, "{}", strict.stdout);
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

    /// A base-branch file that does not parse is a warning, not an error: the pull request that
    /// fixes it passes, its objects checked as CREATEs.
    #[test]
    fn a_broken_base_file_does_not_block_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        git(d, &["init", "-q", "-b", "main"]);
        git(d, &["config", "user.email", "ci@example.com"]);
        git(d, &["config", "user.name", "ci"]);
        std::fs::write(
            d.join("job.yaml"),
            "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata:\n  name: \"x\n",
        )
        .unwrap();
        git(d, &["add", "-A"]);
        git(d, &["commit", "-q", "-m", "broken"]);
        std::fs::write(d.join("job.yaml"), job(false, "a100")).unwrap();
        git(d, &["add", "-A"]);
        git(d, &["commit", "-q", "-m", "fix"]);
        for format in FORMATS {
            let run = validate(d, &["--git-base", "HEAD~1", "-o", format, "."]);
            assert_eq!(run.code, 0, "-o {format}: {}{}", run.stdout, run.stderr);
            let (errors, warnings, _) = records(format, &run);
            assert_eq!((errors, warnings), (0, 1), "-o {format}: {}{}", run.stdout, run.stderr);
            assert!(
                format!("{}{}", run.stdout, run.stderr).contains("HEAD~1:job.yaml:5:1: YAML syntax error"),
                "-o {format}"
            );
        }
        let run = validate(d, &["--git-base", "HEAD~1", "."]);
        assert!(run.stdout.contains("(job.yaml:1): allowed (CREATE)"), "{}", run.stdout);
    }

    #[test]
    fn a_missing_base_says_to_fetch_the_history() {
        let dir = repo(|_| {});
        // One error record in every format; the new objects are still checked (as CREATEs).
        for format in FORMATS {
            let run = validate(dir.path(), &["--git-base", "origin/main", "-o", format, "jobs"]);
            assert_eq!(run.code, 2, "-o {format}");
            let (errors, warnings, checked) = records(format, &run);
            let checked_want = usize::from(matches!(format, "text" | "json" | "junit"));
            assert_eq!((errors, warnings, checked), (1, 0, checked_want), "-o {format}: {}{}", run.stdout, run.stderr);
            assert!(format!("{}{}", run.stdout, run.stderr).contains("fetch-depth: 0"), "-o {format}");
        }
        let run = validate(dir.path(), &["--git-base", "origin/main", "jobs"]);
        assert_eq!(run.code, 2);
        assert!(run.stdout.contains("(jobs/llama.yaml:1): allowed (CREATE)"), "{}", run.stdout);
        assert!(run.stderr.contains("git revision \"origin/main\" not found"), "{}", run.stderr);
        assert!(run.stderr.contains("fetch-depth: 0"), "{}", run.stderr);
        assert!(run.stderr.contains("git fetch origin main:refs/remotes/origin/main"), "{}", run.stderr);
    }
}

/// The output formats, and how each shows an unusable input (error) and an input warning.
const FORMATS: [&str; 5] = ["text", "json", "github", "sarif", "junit"];

/// Records of one run: (errors, warnings, checked TrainJobs) as the format shows them.
fn records(format: &str, run: &Run) -> (usize, usize, usize) {
    match format {
        "text" => (
            run.stderr.lines().filter(|l| l.starts_with("error: ")).count(),
            run.stderr.lines().filter(|l| l.starts_with("warning: ")).count(),
            run.stdout.lines().filter(|l| l.starts_with("trainjob.trainer.kubeflow.org/")).count(),
        ),
        "json" => {
            let lines: Vec<serde_json::Value> =
                run.stdout.lines().map(|l| serde_json::from_str(l).expect("JSON lines")).collect();
            (
                lines.iter().filter(|v| v.get("error").is_some()).count(),
                lines.iter().filter(|v| v.get("warning").is_some()).count(),
                lines.iter().filter(|v| v.get("verdict").is_some()).count(),
            )
        }
        "github" => (
            run.stdout.lines().filter(|l| l.starts_with("::error") && l.contains("unusable input")).count(),
            run.stdout.lines().filter(|l| l.starts_with("::warning") && l.contains("input warning")).count(),
            // Allowed TrainJobs get no annotation; the summary counts them.
            run.stdout.lines().filter(|l| l.contains("title=trainguard denied")).count(),
        ),
        "sarif" => {
            let log: serde_json::Value = serde_json::from_str(&run.stdout).expect("one JSON document");
            check_sarif(&log);
            let results = log["runs"][0]["results"].as_array().unwrap();
            let rule = |id: &str| results.iter().filter(|r| r["ruleId"] == id).count();
            (rule("input-error"), rule("input-warning"), results.len() - rule("input-error") - rule("input-warning"))
        }
        "junit" => {
            let suite = check_junit(&run.stdout);
            assert_eq!(suite.skipped, 0, "nothing is skipped: warnings are not test cases");
            (suite.errors, suite.warnings, suite.tests - suite.errors)
        }
        other => panic!("{other}"),
    }
}

/// SARIF 2.1.0: the log validates against the official schema (tests/data/schemas), and the
/// parts this output relies on are there.
fn check_sarif(log: &serde_json::Value) {
    let errors = sarif_errors(log);
    assert!(errors.is_empty(), "not SARIF 2.1.0: {errors:#?}\n{log:#}");
    assert_eq!(log["version"], "2.1.0");
    let runs = log["runs"].as_array().expect("runs is an array");
    assert_eq!(runs.len(), 1);
    assert!(runs[0]["tool"]["driver"]["name"].is_string());
    for result in runs[0]["results"].as_array().expect("results is an array") {
        assert!(result["message"]["text"].as_str().is_some_and(|t| !t.is_empty()), "{result}");
        assert!(result["ruleId"].is_string(), "{result}");
    }
}

/// What the SARIF 2.1.0 schema finds wrong with `log`.
fn sarif_errors(log: &serde_json::Value) -> Vec<String> {
    static SCHEMA: std::sync::OnceLock<jsonschema::Validator> = std::sync::OnceLock::new();
    let validator = SCHEMA.get_or_init(|| {
        let text = std::fs::read_to_string(data("../schemas/sarif-2.1.0-rtm.5.json")).expect("the SARIF schema");
        let mut schema: serde_json::Value = serde_json::from_str(&text).expect("the schema is JSON");
        // rtm.5's `language` patterns have a stray `]` that no regex engine but ECMAScript's
        // takes (later SARIF schemas fixed it); trainguard writes no `language`, so the fixed
        // pattern changes nothing the test checks.
        fn fix_language(v: &mut serde_json::Value, fixed: &mut usize) {
            match v {
                serde_json::Value::Object(map) => map.values_mut().for_each(|v| fix_language(v, fixed)),
                serde_json::Value::Array(items) => items.iter_mut().for_each(|v| fix_language(v, fixed)),
                serde_json::Value::String(s) if s == "^[a-zA-Z]{2}|^[a-zA-Z]{2}-[a-zA-Z]{2}]?$" => {
                    *s = "^[a-zA-Z]{2}(-[a-zA-Z]{2})?$".to_string();
                    *fixed += 1;
                }
                _ => {}
            }
        }
        let mut fixed = 0;
        fix_language(&mut schema, &mut fixed);
        assert!(fixed > 0, "the vendored schema changed");
        jsonschema::validator_for(&schema).expect("the schema compiles")
    });
    validator.iter_errors(log).map(|e| format!("{} at {}", e, e.instance_path())).collect()
}

#[test]
fn the_sarif_schema_refuses_a_broken_log() {
    let log = serde_json::json!({"version": "2.1.0", "runs": [{"tool": {"driver": {"name": "trainguard"}},
        "results": [{"ruleId": "U2", "level": "error", "message": {"text": "denied"}}]}]});
    assert_eq!(sarif_errors(&log), Vec::<String>::new());
    let mut broken = log.clone();
    broken["runs"][0]["results"][0]["level"] = serde_json::json!("fatal");
    assert!(!sarif_errors(&broken).is_empty(), "an unknown level passes");
    let mut broken = log;
    broken["runs"][0]["results"][0]["message"] = serde_json::json!("denied");
    assert!(!sarif_errors(&broken).is_empty(), "a message that is not an object passes");
}

#[derive(Debug)]
struct Suite {
    tests: usize,
    failures: usize,
    errors: usize,
    skipped: usize,
    /// Input warnings: lines `warning: …` in the suite's system-err.
    warnings: usize,
}

/// JUnit XML as Jenkins' junit-10.xsd (the schema GitLab, Jenkins and most CI readers follow)
/// has it: <testsuites> of <testsuite name tests failures errors skipped>, of <testcase name
/// classname> with at most one <failure message type>, <error message type> or <skipped
/// message>, and <system-out>; the counts in the attributes match the children.
fn check_junit(text: &str) -> Suite {
    let doc = roxmltree::Document::parse(text).unwrap_or_else(|e| panic!("well-formed XML: {e}\n{text}"));
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "testsuites");
    let suites: Vec<_> = root.children().filter(|n| n.is_element()).collect();
    assert_eq!(suites.len(), 1);
    let suite = suites[0];
    assert_eq!(suite.tag_name().name(), "testsuite");
    let count = |node: roxmltree::Node, attr: &str| -> usize {
        node.attribute(attr).unwrap_or_else(|| panic!("{attr} attribute")).parse().expect("a count")
    };
    assert!(suite.attribute("name").is_some());
    let mut seen = [0usize; 4]; // tests, failures, errors, skipped
    let mut warnings = 0;
    for case in suite.children().filter(|n| n.is_element()) {
        match case.tag_name().name() {
            "properties" => continue,
            "system-err" => {
                warnings += case.text().unwrap_or("").lines().filter(|l| l.starts_with("warning: ")).count();
                continue;
            }
            "testcase" => {}
            other => panic!("<{other}> in a testsuite"),
        }
        seen[0] += 1;
        assert!(case.attribute("name").is_some_and(|n| !n.is_empty()) && case.attribute("classname").is_some());
        let outcomes: Vec<_> =
            case.children().filter(|n| n.is_element() && n.tag_name().name() != "system-out").collect();
        assert!(outcomes.len() <= 1, "one outcome per test case");
        for o in outcomes {
            let at = match o.tag_name().name() {
                "failure" => 1,
                "error" => 2,
                "skipped" => 3,
                other => panic!("<{other}> in a testcase"),
            };
            seen[at] += 1;
            assert!(o.attribute("message").is_some(), "<{}> has a message", o.tag_name().name());
            if at != 3 {
                assert!(o.attribute("type").is_some(), "<{}> has a type", o.tag_name().name());
            }
        }
    }
    for node in [root, suite] {
        assert_eq!(
            [count(node, "tests"), count(node, "failures"), count(node, "errors"), count(node, "skipped")],
            seen,
            "attribute counts match the test cases"
        );
    }
    Suite { tests: seen[0], failures: seen[1], errors: seen[2], skipped: seen[3], warnings }
}

/// (case, args, exit, errors, warnings, TrainJobs checked, part of the summary, part of the output)
type InputCase<'a> = (&'a str, &'a [&'a str], i32, usize, usize, usize, &'a str, &'a str);

/// Each input case, in every output format: exit status, one record per unusable input or
/// warning, the other inputs still checked, and the summary counting them.
#[test]
fn every_input_is_one_record_in_every_format() {
    let good = "../rows/u2-podspec/new.yaml"; // one TrainJob, allowed as a CREATE
    // (case, args, exit, errors, warnings, checked TrainJobs, summary part, stderr/stdout part)
    let cases: &[InputCase] = &[
        (
            "missing path",
            &["missing.yaml", good],
            2,
            1,
            0,
            1,
            "1 TrainJob checked: 1 allowed, 0 denied; 0 other objects skipped; 1 input error",
            "missing.yaml: cannot read",
        ),
        ("missing directory", &["nope/", good, "missing.yaml"], 2, 2, 0, 1, "; 2 input errors", "nope/: cannot read"),
        ("binary file", &["garbage.yaml", good], 2, 1, 0, 1, "; 1 input error", "binary data"),
        (
            "state does not parse",
            &["--state", "syntax.yaml", good],
            2,
            1,
            0,
            1,
            "; 1 input error",
            "syntax.yaml:5:3: YAML syntax error",
        ),
        (
            "old side does not parse",
            &["--old", "syntax.yaml", good],
            0,
            0,
            1,
            1,
            "1 allowed, 0 denied; 0 other objects skipped; 1 input warning",
            "old side unusable",
        ),
        (
            "old path missing",
            &["--old", "missing-old.yaml", good],
            0,
            0,
            1,
            1,
            "; 1 input warning",
            "missing-old.yaml: cannot read",
        ),
        // A look-alike fails the run by default: the cluster has no such kind, and the job was
        // not checked.
        (
            "near misses",
            &["../near"],
            2,
            2,
            0,
            0,
            "0 TrainJobs checked",
            "did you mean apiVersion: trainer.kubeflow.org/v1alpha1?",
        ),
        (
            "near misses, allowed look-alikes",
            &["--allow-look-alikes", "../near"],
            0,
            0,
            3,
            0,
            "0 TrainJobs checked",
            "did you mean apiVersion: trainer.kubeflow.org/v1alpha1?",
        ),
        (
            "near misses, allowed look-alikes, strict",
            &["--strict", "--allow-look-alikes", "../near"],
            1,
            0,
            3,
            0,
            "0 TrainJobs checked",
            "did you mean kind: TrainJob?",
        ),
        ("empty directory", &["../empty"], 0, 0, 1, 0, "0 TrainJobs checked", "no TrainJob was checked"),
        (
            "empty directory, strict",
            &["--strict", "../empty"],
            1,
            0,
            1,
            0,
            "0 TrainJobs checked",
            "no TrainJob was checked",
        ),
        (
            "helm templates",
            &["../helm/templates", good],
            2,
            1,
            0,
            1,
            "; 1 input error",
            "render it first, e.g. helm template RELEASE CHART | trainguard validate -",
        ),
    ];
    for (case, args, code, errors, warnings, checked, summary, says) in cases {
        for format in FORMATS {
            let mut all = vec!["-o", format];
            all.extend_from_slice(args);
            let run = validate(&data("broken"), &all);
            let what = format!("{case} -o {format}: {}{}", run.stdout, run.stderr);
            assert_eq!(run.code, *code, "{what}");
            let (e, w, c) = records(format, &run);
            // GitHub shows denials only; none of these cases has one.
            let c_want = if format == "github" { 0 } else { *checked };
            let c = if format == "sarif" { 0 } else { c }; // SARIF lists findings, not allowed objects
            let c_want = if format == "sarif" { 0 } else { c_want };
            assert_eq!((e, w, c), (*errors, *warnings, c_want), "{what}");
            let summary_stream = if matches!(format, "text" | "github") { &run.stdout } else { &run.stderr };
            assert!(summary_stream.contains(summary), "{what}");
            assert!(format!("{}{}", run.stdout, run.stderr).contains(says), "{what}");
            // Never the same text twice (the io error's message was doubled before).
            assert!(!run.stderr.contains("(os error 2): No such file"), "{what}");
        }
    }
    // Near misses point at the object's line: errors by default, warnings when allowed.
    for (args, command) in [
        (&["-o", "github", "typos.yaml"][..], "::error"),
        (&["-o", "github", "--allow-look-alikes", "typos.yaml"][..], "::warning"),
    ] {
        let run = validate(&data("near"), args);
        let lines: Vec<&str> = run.stdout.lines().filter(|l| l.starts_with(command)).collect();
        assert!(lines[0].starts_with(&format!("{command} file=typos.yaml,line=1,")), "{}", run.stdout);
        assert!(lines[1].starts_with(&format!("{command} file=typos.yaml,line=10,")), "{}", run.stdout);
    }
}

/// Denials and warnings in SARIF and JUnit: where they are, and what they say.
#[test]
fn sarif_and_junit_carry_denials_and_warnings() {
    let run = validate(&data("moved"), &["-o", "sarif", "--old", "old", "new"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let log: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    check_sarif(&log);
    let results = log["runs"][0]["results"].as_array().unwrap();
    assert_eq!(results.len(), 1, "only the denial: {results:?}");
    assert_eq!(results[0]["level"], "error");
    assert_eq!(results[0]["ruleId"], "U2");
    assert_eq!(
        results[0]["locations"][0]["physicalLocation"],
        serde_json::json!({"artifactLocation": {"uri": "new/second.yaml"}, "region": {"startLine": 10}})
    );
    assert!(results[0]["message"]["text"].as_str().unwrap().ends_with(U2_MESSAGE));
    assert!(run.stderr.contains("3 TrainJobs checked"), "{}", run.stderr);

    let run = validate(&data("rows/u4-resume"), &["-o", "sarif", "--old", "old.yaml", "new.yaml"]);
    let log: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    check_sarif(&log);
    assert_eq!(log["runs"][0]["results"][0]["level"], "warning");

    let run = validate(&data("moved"), &["-o", "junit", "--old", "old", "new"]);
    let suite = check_junit(&run.stdout);
    assert_eq!((suite.tests, suite.errors), (3, 0));
    assert!(run.stdout.contains("<failure message=\"spec.podSpecOverrides: Forbidden"), "{}", run.stdout);
    assert!(run.stdout.contains("classname=\"new/second.yaml\""), "{}", run.stdout);
}

/// A reader that stops early (`trainguard completion fish | head -2`) is no panic: exit 0.
#[test]
fn completion_into_a_closed_pipe_exits_cleanly() {
    for shell in ["bash", "zsh", "fish"] {
        let mut child = Command::new(bin())
            .args(["completion", shell])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take()); // the reader is gone before the first write
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{shell}: {stderr}");
        assert!(!stderr.contains("panicked"), "{shell}: {stderr}");
    }
}

#[test]
fn completion_scripts_and_help() {
    for (shell, marker) in [("bash", "complete -F"), ("zsh", "#compdef trainguard"), ("fish", "complete -c trainguard")]
    {
        let out = trainguard(&data("rows"), &["completion", shell], None);
        assert!(out.status.success(), "{shell}");
        let script = String::from_utf8(out.stdout).unwrap();
        assert!(script.contains(marker), "{shell}: {script}");
        assert!(script.contains("validate") && script.contains("git-base"), "{shell} completes subcommands and flags");
    }
    let out = trainguard(&data("rows"), &["completion", "tcsh"], None);
    assert_eq!(out.status.code(), Some(2), "an unknown shell is a usage error");
    let help = String::from_utf8(trainguard(&data("rows"), &["validate", "--help"], None).stdout).unwrap();
    for want in ["Examples:", "--git-base origin/main", "-o sarif", "helm template", "docs/ci.md", "sarif", "junit"] {
        assert!(help.contains(want), "validate --help lacks {want:?}:\n{help}");
    }
    let help = String::from_utf8(trainguard(&data("rows"), &["--help"], None).stdout).unwrap();
    assert!(help.contains("Examples:") && help.contains("completion"), "{help}");
}

/// A denial naming several fields gives each field's error and the remedy they share once, in the
/// text and the JSON output alike (the webhook's message); each JSON cause keeps its remedy.
#[test]
fn several_fields_name_each_with_the_remedy_once() {
    let job = |suspend: bool, zone: &str| {
        format!(
            "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata:\n  name: llama\n  namespace: ml-team\n\
             spec:\n  suspend: {suspend}\n  runtimeRef:\n    name: torch-distributed\n  podSpecOverrides:\n  - targetJobs:\n\
             \x20   - name: node\n    nodeSelector:\n      zone: {zone}\n  runtimePatches:\n  - manager: example.com/{zone}\n"
        )
    };
    let u2 = "can only be changed while the TrainJob is suspended";
    let u2_remedy = &U2_MESSAGE[U2_MESSAGE.find(u2).unwrap() + u2.len()..];
    let u5 = "the old manifest has spec.suspend false, so TrainJob ml-team/llama runs and its JobSet has active jobs";
    let u5_remedy = &U5_DETAIL[u5.len()..];
    // (case, new spec.suspend, the message)
    let cases = [
        (
            "U2",
            false,
            format!("[spec.podSpecOverrides: Forbidden: {u2}{u2_remedy}, spec.runtimePatches: Forbidden: {u2}]"),
        ),
        (
            "U5 offline",
            true,
            format!("[spec.podSpecOverrides: Forbidden: {u5}{u5_remedy}, spec.runtimePatches: Forbidden: {u5}]"),
        ),
    ];
    for (case, suspend, message) in cases {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("old.yaml"), job(false, "a")).unwrap();
        std::fs::write(dir.path().join("new.yaml"), job(suspend, "b")).unwrap();
        let run = validate(dir.path(), &["--old", "old.yaml", "new.yaml"]);
        assert_eq!(run.code, 1, "{case}: {}{}", run.stdout, run.stderr);
        let first = run.stdout.lines().next().unwrap();
        assert_eq!(
            first,
            format!("trainjob.trainer.kubeflow.org/ml-team/llama (new.yaml:1): denied: {message}"),
            "{case}"
        );
        let run = validate(dir.path(), &["-o", "json", "--old", "old.yaml", "new.yaml"]);
        let v: serde_json::Value = serde_json::from_str(run.stdout.trim()).unwrap();
        assert_eq!(v["message"], message, "{case}");
        let causes: Vec<(&str, &str)> = v["causes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| (c["field"].as_str().unwrap(), c["message"].as_str().unwrap()))
            .collect();
        let (detail, remedy) = if suspend { (u5, u5_remedy) } else { (u2, u2_remedy) };
        let whole = format!("Forbidden: {detail}{remedy}");
        assert_eq!(causes, [("spec.podSpecOverrides", &*whole), ("spec.runtimePatches", &*whole)], "{case}");
    }
}

/// When the schema check also sees a field the webhook denies, `validate` still says what the
/// webhook says (its rule first, its advice), and the schema's finding beside it.
#[test]
fn the_webhook_message_and_rule_stay_beside_the_schema_finding() {
    let job = "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata:\n  name: llama\n  namespace: ml\n\
        spec:\n  managedBy: example.com/other\n  runtimeRef:\n    name: torch-distributed\n";
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("job.yaml"), job).unwrap();
    let run = validate(dir.path(), &["--schema", "on", "-o", "json", "job.yaml"]);
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    let v: serde_json::Value = serde_json::from_str(run.stdout.trim()).unwrap();
    assert_eq!(v["rule"], "M2,schema", "{v}");
    let message = v["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            "[spec.managedBy: Invalid value: \"example.com/other\": must be one of \"trainer.kubeflow.org/trainjob-controller\", \"kueue.x-k8s.io/multikueue\"; leave it unset for Trainer's own controller, spec.managedBy: "
        ),
        "the webhook's own message first: {message}"
    );
    let causes = v["causes"].as_array().unwrap();
    assert_eq!(causes.len(), 2, "{causes:?}");
}

/// (directory, args, (field, line) of each error)
type FieldCase<'a> = (&'a Path, &'a [&'a str], &'a [(&'a str, usize)]);

/// Each field error is reported on its field's line, in every format that has lines: GitHub
/// annotations, JSON causes, SARIF results. Stdin cannot be read twice: the object's line.
#[test]
fn field_errors_carry_their_lines() {
    let multi = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n---\n\
        apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata:\n  name: Bad_Name\n  namespace: ml-team\n\
        spec:\n  managedBy: example.com/other\n  runtimeRef:\n    name: torch-distributed\n  trainer:\n    numNode: 2\n";
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("multi.yaml"), multi).unwrap();
    let rows = data("rows");
    let cases: &[FieldCase] = &[
        (&rows, &["create-bad-name/new.yaml"], &[("metadata.name", 4)]),
        (&rows, &["create-shape-podtemplate/new.yaml"], &[("spec.podTemplateOverrides[0].targetJobs[0].name", 13)]),
        // A field that is missing: the item it is missing from.
        (&rows, &["create-shape-runtimepatches/new.yaml"], &[("spec.runtimePatches[0].manager", 12)]),
        (&rows, &["--old", "m1-managedby-changed/old.yaml", "m1-managedby-changed/new.yaml"], &[("spec.managedBy", 8)]),
        (
            dir.path(),
            &["--schema", "on", "multi.yaml"],
            // The webhook's errors as the webhook says them (M2, name), then the API server's
            // findings beside them, in its order: the unknown numNode (a 400 before validation),
            // the name as ObjectMeta checks it (an RFC 1123 subdomain), managedBy outside the
            // CRD's CEL rule, the name under the CRD's root rule.
            &[
                ("spec.managedBy", 11),
                ("metadata.name", 8),
                ("spec.trainer.numNode", 15),
                ("metadata.name", 8),
                ("spec.managedBy", 11),
                ("metadata.name", 8),
            ],
        ),
    ];
    for (dir, args, want) in cases {
        let run_as = |format: &str| {
            let mut all = vec!["-o", format];
            all.extend_from_slice(args);
            let run = validate(dir, &all);
            assert_eq!(run.code, 1, "{args:?} -o {format}: {}{}", run.stdout, run.stderr);
            run
        };
        let github: Vec<(String, usize)> = run_as("github")
            .stdout
            .lines()
            .filter(|l| l.starts_with("::error"))
            .map(|l| {
                let line = l.split("line=").nth(1).unwrap().split(',').next().unwrap().parse().unwrap();
                let field = l.split("::").nth(2).unwrap().split(": ").next().unwrap().to_string();
                (field, line)
            })
            .collect();
        let json: serde_json::Value = serde_json::from_str(run_as("json").stdout.trim()).unwrap();
        let causes: Vec<(String, usize)> = json["causes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| (c["field"].as_str().unwrap().to_string(), c["line"].as_u64().unwrap() as usize))
            .collect();
        let sarif: serde_json::Value = serde_json::from_str(&run_as("sarif").stdout).unwrap();
        check_sarif(&sarif);
        let results: Vec<(String, usize)> = sarif["runs"][0]["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                let text = r["message"]["text"].as_str().unwrap();
                let field = text.split(": ").nth(1).unwrap().to_string();
                let line = r["locations"][0]["physicalLocation"]["region"]["startLine"].as_u64().unwrap() as usize;
                (field, line)
            })
            .collect();
        let want: Vec<(String, usize)> = want.iter().map(|(f, l)| (f.to_string(), *l)).collect();
        for (format, got) in [("github", github), ("json", causes), ("sarif", results)] {
            assert_eq!(got, want, "{args:?} -o {format}");
        }
    }
    // Stdin: the object's line (the text is gone once parsed).
    let run = validate_stdin(&rows, &["-o", "github", "-"], Some(multi.as_bytes()));
    assert!(
        run.stdout.lines().filter(|l| l.starts_with("::error")).all(|l| l.contains("file=-,line=5,")),
        "{}",
        run.stdout
    );
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
---
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: job
spec:
  runtimeRef:
    name: torch-distributed
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

    // The summary counts the warning it printed; JUnit has it in system-err, not as a test.
    assert!(text.stdout.contains("; 1 input warning"), "{}", text.stdout);
    let junit = validate_stdin(&dir, &["-", "--output", "junit"], Some(runtime));
    let suite = check_junit(&junit.stdout);
    assert_eq!((suite.tests, suite.failures, suite.skipped, suite.warnings), (1, 0, 0, 1), "{}", junit.stdout);
    assert!(junit.stderr.contains("; 1 input warning"), "{}", junit.stderr);
}

/// JUnit counts TrainJobs, not fields: 4 TrainJobs, 3 denied with 2 fields each, are 4 tests and
/// 3 failures, each failure listing its fields on their lines.
#[test]
fn junit_has_one_test_case_per_trainjob() {
    let job = |name: &str, managed_by: &str| {
        format!(
            "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata:\n  name: {name}\n  namespace: ml\n\
             spec:\n  managedBy: {managed_by}\n  runtimeRef:\n    name: torch\n"
        )
    };
    let ok = "trainer.kubeflow.org/trainjob-controller";
    let text = [job("good", ok), job("Bad_1", "x/y"), job("Bad_2", "x/y"), job("Bad_3", "x/y")].join("---\n");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("jobs.yaml"), text).unwrap();
    let run = validate(dir.path(), &["-o", "junit", "jobs.yaml"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let suite = check_junit(&run.stdout);
    assert_eq!((suite.tests, suite.failures, suite.errors), (4, 3, 0), "{}", run.stdout);
    let doc = roxmltree::Document::parse(&run.stdout).unwrap();
    let failures: Vec<_> = doc.descendants().filter(|n| n.has_tag_name("failure")).collect();
    for failure in failures {
        assert_eq!(failure.attribute("type"), Some("M2,name"));
        let body = failure.text().unwrap();
        assert_eq!(body.lines().count(), 2, "{body}");
        assert!(
            body.lines().any(|l| l.starts_with("jobs.yaml:") && l.contains("spec.managedBy: Invalid value")),
            "{body}"
        );
        assert!(failure.attribute("message").unwrap().starts_with("[spec.managedBy"), "the webhook's message");
    }
}

/// SARIF: every ruleId a result uses is a rule of the driver, with a description and help; the
/// information URI is the repository's (a flag or env sets it), with help pages under it.
#[test]
fn sarif_names_its_rules_with_help_and_an_information_uri() {
    let uri = "https://example.com/acme/trainguard";
    for args in [
        vec!["-o", "sarif", "--sarif-information-uri", uri, "--old", "old", "new"],
        vec!["-o", "sarif", "--old", "old", "new"],
    ] {
        let mut cmd = Command::new(bin());
        cmd.arg("validate").args(&args).env("TRAINGUARD_SCHEMA", "off").current_dir(data("moved"));
        if !args.contains(&"--sarif-information-uri") {
            cmd.env("TRAINGUARD_SARIF_INFORMATION_URI", uri);
        }
        let out = cmd.output().unwrap();
        let log: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        check_sarif(&log);
        let driver = &log["runs"][0]["tool"]["driver"];
        assert_eq!(driver["informationUri"], uri);
        let rules = driver["rules"].as_array().expect("rules");
        for (i, result) in log["runs"][0]["results"].as_array().unwrap().iter().enumerate() {
            let index = result["ruleIndex"].as_u64().expect("ruleIndex") as usize;
            let rule = &rules[index];
            assert_eq!(rule["id"], result["ruleId"], "result {i}");
            assert!(rule["shortDescription"]["text"].as_str().is_some_and(|t| !t.is_empty()));
            assert!(rule["help"]["text"].as_str().is_some_and(|t| t.len() > 20));
            assert!(rule["helpUri"].as_str().unwrap().starts_with(&format!("{uri}/blob/main/docs/")));
        }
        assert!(rules.iter().any(|r| r["id"] == "U2"), "{rules:?}");
    }
}
