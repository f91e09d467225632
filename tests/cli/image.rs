//! One description of the image: the Dockerfile (what the release builds with a container engine)
//! and scripts/image/build.sh (`make image`, the same image assembled from Debian packages with
//! umoci, which the real node of the local control plane runs) agree on base, user, entrypoint,
//! command, ports, labels, the binary's profile and where it goes. The Dockerfile is parsed here on
//! its own, and the recipe is asked with `--print-config` (no build, no network), so a change to
//! either side that the other does not follow fails here. Also: the shipped Deployments run as the
//! image's user and expose its ports.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The Dockerfile's instructions: (keyword, arguments), comments dropped, continuations joined.
fn instructions(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('#') || (current.is_empty() && trimmed.is_empty()) {
            continue;
        }
        if let Some(head) = line.trim_end().strip_suffix('\\') {
            current.push_str(head);
            current.push(' ');
            continue;
        }
        current.push_str(line);
        let joined = std::mem::take(&mut current);
        let (keyword, args) = joined.trim().split_once(char::is_whitespace).unwrap_or((joined.trim(), ""));
        out.push((keyword.to_uppercase(), args.trim().to_string()));
    }
    out
}

/// `LABEL a="x y" b=z` as pairs (double-quoted values only, as the Dockerfile writes them).
fn labels(args: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut rest = args.trim();
    while !rest.is_empty() {
        let (key, after) = rest.split_once('=').expect("LABEL key=value");
        let (value, tail) = if let Some(quoted) = after.strip_prefix('"') {
            let end = quoted.find('"').expect("closing quote");
            (&quoted[..end], &quoted[end + 1..])
        } else {
            after.split_once(char::is_whitespace).unwrap_or((after, ""))
        };
        out.insert(key.trim().to_string(), value.to_string());
        rest = tail.trim();
    }
    out
}

struct Dockerfile {
    base: String,
    labels: BTreeMap<String, String>,
    /// destination -> source, for the final stage's COPY lines.
    copies: BTreeMap<String, String>,
    user: String,
    ports: BTreeSet<String>,
    entrypoint: Vec<String>,
    cmd: Vec<String>,
    /// The build stage's `RUN` lines, joined.
    build_run: String,
}

fn dockerfile() -> Dockerfile {
    let text = std::fs::read_to_string(repo().join("Dockerfile")).unwrap();
    let steps = instructions(&text);
    let last_from = steps.iter().rposition(|(k, _)| k == "FROM").expect("a FROM");
    let (build, fin) = steps.split_at(last_from);
    let mut d = Dockerfile {
        base: fin[0].1.split_whitespace().next().unwrap().to_string(),
        labels: BTreeMap::new(),
        copies: BTreeMap::new(),
        user: String::new(),
        ports: BTreeSet::new(),
        entrypoint: Vec::new(),
        cmd: Vec::new(),
        build_run: build.iter().filter(|(k, _)| k == "RUN").map(|(_, a)| a.as_str()).collect::<Vec<_>>().join(" "),
    };
    for (keyword, args) in &fin[1..] {
        match keyword.as_str() {
            "LABEL" => d.labels.extend(labels(args)),
            "COPY" => {
                let paths: Vec<&str> = args.split_whitespace().filter(|w| !w.starts_with("--")).collect();
                d.copies.insert(paths.last().unwrap().to_string(), paths[0].to_string());
            }
            "USER" => d.user = args.clone(),
            "EXPOSE" => d.ports.extend(args.split_whitespace().map(|p| format!("{p}/tcp"))),
            "ENTRYPOINT" => d.entrypoint = serde_json::from_str(args).unwrap(),
            "CMD" => d.cmd = serde_json::from_str(args).unwrap(),
            other => panic!("the Dockerfile's final stage has {other}: teach scripts/image/ and this test about it"),
        }
    }
    d
}

fn recipe() -> Value {
    let out = Command::new(repo().join("scripts/image/build.sh"))
        .arg("--print-config")
        .env("TRAINGUARD_BIN", "/built/trainguard")
        .output()
        .expect("run scripts/image/build.sh (needs bash and python3)");
    assert!(out.status.success(), "build.sh --print-config: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("JSON")
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array().unwrap().iter().map(|s| s.as_str().unwrap().to_string()).collect()
}

#[test]
fn the_recipe_builds_the_image_the_dockerfile_describes() {
    let d = dockerfile();
    let r = recipe();
    let config = &r["config"];
    assert_eq!(r["base"], d.base.as_str(), "the recipe's base packages stand in for the Dockerfile's FROM");
    assert_eq!(config["User"], d.user.as_str());
    assert_eq!(strings(&config["Entrypoint"]), d.entrypoint);
    assert_eq!(strings(&config["Cmd"]), d.cmd);
    assert_eq!(strings(&config["ExposedPorts"]).into_iter().collect::<BTreeSet<_>>(), d.ports);
    for (key, value) in &d.labels {
        assert_eq!(config["Labels"][key], value.as_str(), "label {key}");
    }
    // The release adds version and revision at build time; the recipe does too.
    assert!(config["Labels"]["org.opencontainers.image.version"].is_string(), "{config}");
    // The one file: the build stage's binary, built with the profile the Dockerfile builds.
    let files = r["files"].as_object().unwrap();
    assert_eq!(files.keys().cloned().collect::<BTreeSet<_>>(), d.copies.keys().cloned().collect(), "{files:?}");
    for (dest, src) in &d.copies {
        assert_eq!(files[dest], "/built/trainguard", "{dest} comes from {src} in the Dockerfile");
        assert!(
            d.build_run.contains(&format!("install -D -m 0755 target/dist/trainguard {src}")),
            "the build stage installs target/dist/trainguard as {src}: {}",
            d.build_run
        );
    }
    assert!(d.build_run.contains("--profile dist"), "{}", d.build_run);
    // The user the Dockerfile names is the base image's nonroot user, with its home as workdir.
    let uid = r["passwd_user"]["uid"].as_u64().unwrap();
    assert_eq!(d.user, format!("{uid}:{uid}"));
    assert_eq!(config["WorkingDir"], r["passwd_user"]["home"]);
    // distroless cc: glibc, libgcc, the C++ runtime, certificates, time zones.
    let packages = strings(&r["packages"]);
    for p in ["libc6", "libgcc-s1", "ca-certificates", "tzdata", "base-files"] {
        assert!(packages.iter().any(|x| x == p), "{p} missing from {packages:?}");
    }
    assert!(
        d.base.contains("debian12") && r["suite"] == "bookworm",
        "base {} and suite {} must be the same Debian release",
        d.base,
        r["suite"]
    );
}

/// `make image` builds the binary the Dockerfile ships (`--profile dist`) before assembling.
#[test]
fn make_image_builds_the_dist_binary_first() {
    let text = std::fs::read_to_string(repo().join("Makefile")).unwrap();
    let body: Vec<&str> =
        text.split("\nimage:\n").nth(1).expect("an image target").lines().take_while(|l| l.starts_with('\t')).collect();
    assert!(body.first().is_some_and(|l| l.contains("build --profile dist --bin trainguard")), "{body:?}");
    assert!(body.iter().any(|l| l.contains("scripts/image/build.sh")), "{body:?}");
}

/// The shipped Deployments run as the image's user and name its ports.
#[test]
fn the_deployments_run_as_the_image_user_on_its_ports() {
    let d = dockerfile();
    let (uid, gid) = d.user.split_once(':').unwrap();
    for file in ["deploy/base/deployment-webhook.yaml", "deploy/base/deployment-controller.yaml"] {
        let text = std::fs::read_to_string(repo().join(file)).unwrap();
        assert!(text.contains(&format!("runAsUser: {uid}")), "{file} does not run as {uid}");
        assert!(text.contains(&format!("runAsGroup: {gid}")), "{file} does not run as group {gid}");
        for port in text.lines().filter_map(|l| l.trim().strip_prefix("containerPort: ")) {
            assert!(d.ports.contains(&format!("{port}/tcp")), "{file}: containerPort {port} is not EXPOSEd");
        }
    }
}
