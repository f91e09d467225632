//! Every admission fixture through the real server over TLS (HTTP/1.1 and HTTP/2 alternately):
//! the verdict matches the fixture's expectation, and the bytes match what the pure core
//! answers for the same review — the server adds transport, never a different decision — and
//! `trainguard review` prints those same bytes (spec: the CLI and the server cannot disagree).

use crate::support::fixtures as common;
use trainguard_binary_support::tls as support;

use std::sync::Arc;

use common::{ClusterMode, Observed, check_verdict, load_cases};
use trainguard::cluster::ClusterView;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_fixture_gets_its_verdict_over_tls() {
    let cases = load_cases();
    assert!(cases.len() > 100, "fixtures missing: {}", cases.len());
    let mut failures = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        let http2 = i % 2 == 1;
        // `trainguard review` runs in its own process while the server answers the same review.
        let cli = review_cli(case);
        let cluster: Arc<dyn ClusterView> = Arc::from(case.cluster());
        let mut server = support::start(support::Options {
            cluster,
            ..support::Options::from(support::ServerSettings { http2, rules: case.config(), ..support::defaults() })
        })
        .await;
        let client = support::client(&server.ca_pem, http2);
        let path = match case.endpoint() {
            trainguard_core::admission::Endpoint::Validate => support::VALIDATE,
            trainguard_core::admission::Endpoint::Mutate => support::MUTATE,
        };
        let reply = support::post_json(&client, &server.url(path), &case.review).await;
        let observed = if reply.status == 200 {
            Observed::Review(reply.body.to_vec())
        } else {
            let message = reply.json()["message"].as_str().unwrap_or_default().to_string();
            Observed::Rejected { http: reply.status.as_u16(), message }
        };
        let mut problems = check_verdict(case, &observed);
        if let (Ok(core), Observed::Review(body)) = (case.run(), &observed)
            && core.body != *body
        {
            problems.push("server bytes differ from the core's answer".to_string());
        }
        problems.extend(cli.map(|child| review_cli_agrees(child, &observed)).unwrap_or_default());
        if !problems.is_empty() {
            failures.push(format!("{} (http2={http2}):\n    {}", case.name, problems.join("\n    ")));
        }
        server.shutdown().await;
    }
    assert!(
        failures.is_empty(),
        "{} of {} fixtures failed over TLS:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

/// Starts `trainguard review` on the same review (and the same state). "Cluster state unknown"
/// cannot be given to the CLI, so those cases are skipped (`None`).
fn review_cli(case: &common::Case) -> Option<std::process::Child> {
    if case.expect.cluster == ClusterMode::Unknown {
        return None;
    }
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_trainguard"));
    cmd.arg("review").arg(&case.review_path);
    if case.endpoint() == trainguard_core::admission::Endpoint::Mutate {
        cmd.args(["--webhook", "mutate"]);
    }
    if case.config().suspend_rule == trainguard_core::admission::SuspendRule::New {
        cmd.args(["--suspend-rule", "new"]);
    }
    if let Some(state) = &case.state_path {
        cmd.arg("--state").arg(state);
    }
    cmd.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped());
    Some(cmd.spawn().expect("run trainguard review"))
}

/// `trainguard review` printed the server's exact bytes, or exited 2 where the server refused
/// the request.
fn review_cli_agrees(child: std::process::Child, observed: &Observed) -> Vec<String> {
    let out = child.wait_with_output().expect("run trainguard review");
    match observed {
        Observed::Review(body) if out.stdout == *body => Vec::new(),
        Observed::Review(_) => vec![format!(
            "`trainguard review` printed other bytes than the server: {}",
            String::from_utf8_lossy(&out.stdout)
        )],
        Observed::Rejected { .. } if out.status.code() == Some(2) => Vec::new(),
        Observed::Rejected { http, .. } => {
            vec![format!("server answered HTTP {http}, `review` exited {:?}", out.status)]
        }
    }
}
