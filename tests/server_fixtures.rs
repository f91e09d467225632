//! Every admission fixture through the real server over TLS (HTTP/1.1 and HTTP/2 alternately):
//! the verdict matches the fixture's expectation, and the bytes match what the pure core
//! answers for the same review — the server adds transport, never a different decision.

mod common;
mod support;

use std::sync::Arc;

use common::{Observed, check_verdict, load_cases};
use trainguard::cluster::ClusterView;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_fixture_gets_its_verdict_over_tls() {
    let cases = load_cases();
    assert!(cases.len() > 100, "fixtures missing: {}", cases.len());
    let mut failures = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        let http2 = i % 2 == 1;
        let cluster: Arc<dyn ClusterView> = Arc::from(case.cluster());
        let mut server =
            support::start(support::Options { http2, rules: case.config(), cluster, ..Default::default() }).await;
        let client = support::client(&server.ca_pem, http2);
        let path = match case.endpoint() {
            trainguard::admission::Endpoint::Validate => support::VALIDATE,
            trainguard::admission::Endpoint::Mutate => support::MUTATE,
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
