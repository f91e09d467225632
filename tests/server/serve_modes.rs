//! `trainguard serve` as a user meets it: flags and env vars, the no-cluster refusal, and the
//! `--dev` mode that `make run` starts.

use trainguard_binary_support::tls as support;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn trainguard() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_trainguard"));
    // No ambient cluster configuration leaks into these tests.
    cmd.env_remove("KUBECONFIG").env_remove("KUBERNETES_SERVICE_HOST");
    cmd
}

/// (extra args, env, expected stderr fragment)
type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], &'a str);

/// Each case's `serve` exits 2 before serving, its stderr naming the problem.
fn refused_before_serving(cases: &[Case]) {
    for (args, env, want) in cases {
        let out = trainguard().arg("serve").args(*args).envs(env.iter().copied()).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?} {env:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(want), "{args:?} {env:?}: {stderr}");
    }
}

#[test]
fn refuses_to_guess_without_cluster_configuration() {
    let cases: &[Case] = &[
        (&[], &[], "no cluster configuration"),
        (&["--offline", "--kubeconfig", "/nonexistent"], &[], "cannot be used with"),
        (&[], &[("TRAINGUARD_OFFLINE", "maybe")], "invalid value 'maybe'"),
        (&["--cache-stale-after", "soon"], &[], "invalid duration \"soon\": expected a number"),
    ];
    refused_before_serving(cases);
}

/// `--webhook=false` runs the controller alone and `--controller=false` the webhook alone;
/// turning both off, or the controller alone without a cluster, is refused before anything starts.
#[test]
fn refuses_a_split_that_runs_nothing() {
    let nothing = "--webhook=false and --controller=false leave nothing to run";
    let no_cluster = "--webhook=false runs only the companion controller, which needs a cluster";
    let cases: &[Case] = &[
        (&["--webhook=false", "--controller=false"], &[], nothing),
        (&[], &[("TRAINGUARD_WEBHOOK", "false"), ("TRAINGUARD_CONTROLLER", "false")], nothing),
        // Checked before the cluster configuration: the first thing to fix is named first.
        (&["--webhook=false", "--controller=false", "--kubeconfig", "/nonexistent"], &[], nothing),
        (&["--webhook=false", "--offline"], &[], no_cluster),
        (&["--webhook=false", "--dev"], &[], no_cluster),
        (&["--webhook=maybe"], &[], "invalid value 'maybe'"),
    ];
    refused_before_serving(cases);
}

#[test]
fn every_serve_flag_has_an_env_var() {
    let out = trainguard().args(["serve", "--help"]).output().unwrap();
    let help = String::from_utf8(out.stdout).unwrap();
    let mut flags = 0;
    let lines: Vec<&str> = help.lines().collect();
    for (i, line) in lines.iter().enumerate() {
        let trimmed = line.trim_start();
        if !trimmed.starts_with("--") || trimmed.starts_with("--help") {
            continue;
        }
        flags += 1;
        let flag = trimmed.split([' ', '<']).next().unwrap();
        let env = format!("TRAINGUARD_{}", flag.trim_start_matches("--").replace('-', "_").to_uppercase());
        let block: String =
            lines[i..].iter().skip(1).take_while(|l| !l.trim_start().starts_with("--")).copied().collect();
        assert!(block.contains(&format!("[env: {env}=")), "{flag} has no env var {env}");
    }
    assert!(flags >= 18, "only {flags} flags found in:\n{help}");
}

#[tokio::test]
async fn dev_mode_serves_the_sample_it_prints() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = trainguard()
        .args(["serve", "--dev", "--bind", "127.0.0.1:0", "--admin-bind", "127.0.0.1:0", "--dev-dir"])
        .arg(dir.path())
        .env("TRAINGUARD_LOG_FORMAT", "json")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = |stream: Box<dyn std::io::Read + Send>| {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stream).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        rx
    };
    let rx = lines(Box::new(child.stdout.take().unwrap()));
    let logs = lines(Box::new(child.stderr.take().unwrap()));
    let started = Instant::now();
    let curl = loop {
        let line = rx.recv_timeout(Duration::from_secs(20)).expect("dev banner");
        if line.trim_start().starts_with("curl") {
            break line;
        }
        assert!(started.elapsed() < Duration::from_secs(20));
    };
    // The printed line names the CA, the sample and the URL; follow it as a user would.
    let words: Vec<&str> = curl.split_whitespace().collect();
    let after = |flag: &str| words[words.iter().position(|w| *w == flag).unwrap() + 1];
    let ca = std::fs::read_to_string(after("--cacert")).unwrap();
    let sample = std::fs::read(after("--data").trim_start_matches('@')).unwrap();
    let url = words.last().unwrap();
    assert!(url.starts_with("https://localhost:"), "{url}");
    trainguard::server::tls::install_default_provider();
    let review = support::post_json(&support::client(&ca, false), url, &sample).await.json();
    assert_eq!(review["response"]["allowed"], false, "{review}");
    assert_eq!(review["response"]["status"]["code"], 403);
    assert!(
        review["response"]["status"]["message"]
            .as_str()
            .unwrap()
            .contains("can only be changed while the TrainJob is suspended")
    );
    // One JSON log line for the denial, whose keys are unique (log pipelines keep one of two
    // equal keys), with the user's message under `detail`.
    let denial = loop {
        let line = logs.recv_timeout(Duration::from_secs(10)).expect("a log line for the denial");
        if line.contains(r#""message":"denied""#) {
            break line;
        }
    };
    assert_eq!(denial.matches(r#""message":"#).count(), 1, "{denial}");
    let denial: serde_json::Value = serde_json::from_str(&denial).unwrap();
    assert_eq!(denial["rule"], "U2", "{denial}");
    assert_eq!(denial["level"], "INFO", "{denial}");
    assert_eq!(denial["target"], "trainguard::server::routes", "{denial}");
    assert_eq!(denial["uid"], review["response"]["uid"], "{denial}");
    assert_eq!(denial["detail"], review["response"]["status"]["message"], "{denial}");
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn dev_mode_removes_the_directory_it_made_and_keeps_a_given_one() {
    let temp = tempfile::tempdir().unwrap();
    let given = tempfile::tempdir().unwrap();
    // (name, extra args, the directory the certificates must be in, kept after exit)
    let cases: [(&str, Vec<&std::ffi::OsStr>, Option<&std::path::Path>, bool); 2] = [
        ("made by serve", vec![], None, false),
        ("--dev-dir", vec!["--dev-dir".as_ref(), given.path().as_os_str()], Some(given.path()), true),
    ];
    for (name, extra, want_dir, kept) in cases {
        let mut child = trainguard()
            .args(["serve", "--dev", "--bind", "127.0.0.1:0", "--admin-bind", "127.0.0.1:0"])
            .args(extra)
            .env("TMPDIR", temp.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines().map_while(Result::ok);
        let banner =
            stdout.find(|line| line.contains("certificates in")).unwrap_or_else(|| panic!("{name}: no banner"));
        // The rest of the banner still needs a reader.
        std::thread::spawn(move || stdout.for_each(drop));
        let dir = banner.split("certificates in ").nth(1).unwrap().trim_end_matches(')');
        let dir = std::path::PathBuf::from(dir);
        match want_dir {
            Some(want) => assert_eq!(dir, want, "{name}"),
            None => assert!(dir.starts_with(temp.path()), "{name}: {} outside TMPDIR", dir.display()),
        }
        assert!(dir.join("tls.key").exists(), "{name}: {}", dir.display());
        let pid = child.id().to_string();
        assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
        assert!(child.wait().unwrap().success(), "{name}: exit after SIGTERM");
        assert_eq!(dir.join("tls.crt").exists(), kept, "{name}: {}", dir.display());
    }
}
