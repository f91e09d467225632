//! `trainguard serve` as a user starts it, where it stops before serving: what it says.

use std::process::Command;

/// `serve --offline` without certificates: the cause once, and the flags that fix it.
#[test]
fn missing_certificates_say_which_flags_to_pass() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    let out = Command::new(env!("CARGO_BIN_EXE_trainguard"))
        .args(["serve", "--offline", "--bind", "127.0.0.1:0", "--admin-bind", "127.0.0.1:0", "--tls-cert"])
        .arg(&cert)
        .arg("--tls-key")
        .arg(&key)
        .env_remove("KUBECONFIG")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    let last = stderr.lines().rev().find(|l| l.starts_with("trainguard: ")).expect("the error line");
    assert_eq!(last.matches("No such file").count(), 1, "the cause once: {last}");
    assert!(last.contains(&cert.display().to_string()), "{last}");
    for flag in ["--tls-cert", "--tls-key", "--dev"] {
        assert!(last.contains(flag), "{flag}: {last}");
    }
}
