//! `trainguard certs` — a CA and a serving certificate for the webhook Service, plus what a
//! cluster without cert-manager needs to use them: the TLS Secret, the caBundle patch for both
//! webhook configurations, and a kustomize Component tying the two together (used by
//! `deploy/overlays/static-certs`).
//!
//! [`render`] is pure (chain in, file contents out); [`run`] generates the chain and writes.

use std::collections::BTreeMap;
use std::fs;
use std::io::Write as _;
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use clap::Args;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject as _;
use serde_json::json;

use crate::certgen::{GeneratedChain, generate_chain};
use crate::dns_label::{self, LabelProblem};

/// Names in `deploy/base` the generated files refer to; `tests/cli/deploy.rs` checks they agree.
pub const DEFAULT_SERVICE: &str = "trainguard-webhook";
pub const DEFAULT_NAMESPACE: &str = "trainguard-system";
pub const DEFAULT_SECRET: &str = "trainguard-tls";
pub const VALIDATING_CONFIGURATION: &str = "trainguard-validating";
pub const MUTATING_CONFIGURATION: &str = "trainguard-mutating";
/// Webhook names inside the configurations (docs/webhook.md §1): the strategic-merge key.
pub const VALIDATING_WEBHOOK: &str = "validate.trainjob.trainguard.io";
pub const MUTATING_WEBHOOK: &str = "default.trainjob.trainguard.io";

/// Output file names.
pub(crate) const CA_CERT: &str = "ca.crt";
pub(crate) const CA_KEY: &str = "ca.key";
pub(crate) const TLS_CERT: &str = "tls.crt";
pub(crate) const TLS_KEY: &str = "tls.key";
pub(crate) const SECRET_MANIFEST: &str = "secret.yaml";
pub(crate) const CA_BUNDLE_PATCH: &str = "cabundle-patch.yaml";
pub(crate) const KUSTOMIZATION: &str = "kustomization.yaml";

#[derive(Debug, Clone, Args)]
pub struct CertsArgs {
    /// Name of the webhook Service; the certificate is for NAME.NAMESPACE.svc and
    /// NAME.NAMESPACE.svc.cluster.local.
    #[arg(long, env = "TRAINGUARD_SERVICE", default_value = DEFAULT_SERVICE)]
    pub service: String,

    /// Namespace of the webhook Service and of the Secret.
    #[arg(long, env = "TRAINGUARD_NAMESPACE", default_value = DEFAULT_NAMESPACE)]
    pub namespace: String,

    /// Directory to write into (created if missing). It will hold private keys: keep it out of git.
    #[arg(long, env = "TRAINGUARD_OUT", value_name = "DIR")]
    pub(crate) out: PathBuf,

    /// Validity of the CA and the serving certificate, in days.
    #[arg(long, env = "TRAINGUARD_DAYS", default_value_t = 365, value_parser = clap::value_parser!(u32).range(1..=3650))]
    pub(crate) days: u32,

    /// Name of the TLS Secret the Deployment mounts.
    #[arg(long, env = "TRAINGUARD_SECRET_NAME", default_value = DEFAULT_SECRET)]
    pub secret_name: String,

    /// PEM file of a CA to keep trusting next to the new one (repeatable). For rotation: pass the
    /// current ca.crt, so the API server accepts both the old and the new serving certificate
    /// while pods pick up the new Secret.
    #[arg(long, env = "TRAINGUARD_ALSO_TRUST", value_name = "FILE", value_delimiter = ',')]
    pub(crate) also_trust: Vec<PathBuf>,

    /// Overwrite files left by an earlier run (this replaces the CA).
    #[arg(long, env = "TRAINGUARD_FORCE")]
    pub(crate) force: bool,
}

/// One file to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OutputFile {
    pub name: &'static str,
    pub(crate) contents: String,
    /// Holds a private key: written with mode 0600.
    pub(crate) private: bool,
}

/// What the certificates are for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub service: String,
    pub namespace: String,
    pub secret_name: String,
}

impl Target {
    /// The DNS names the API server may use for the Service (it dials `NAME.NS.svc`).
    pub fn dns_names(&self) -> Vec<String> {
        let svc = format!("{}.{}.svc", self.service, self.namespace);
        vec![svc.clone(), format!("{svc}.cluster.local")]
    }
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum CertsError {
    #[error("--{flag} {value:?} is not a valid name: {why}")]
    BadName { flag: &'static str, value: String, why: &'static str },
    #[error("--also-trust {path}: {why}")]
    BadTrust { path: String, why: String },
    #[error("{dir} already holds {files}; pass --force to replace them (this replaces the CA)")]
    WouldOverwrite { dir: String, files: String },
}

pub fn run(args: CertsArgs) -> anyhow::Result<ExitCode> {
    let target = Target {
        service: args.service.clone(),
        namespace: args.namespace.clone(),
        secret_name: args.secret_name.clone(),
    };
    validate_target(&target)?;
    // Read what to keep trusting before anything in the directory is replaced.
    let mut extra_trust = Vec::new();
    for path in &args.also_trust {
        let text = fs::read_to_string(path).with_context(|| format!("reading --also-trust {}", path.display()))?;
        extra_trust.extend(ca_certificates(&path.display().to_string(), &text)?);
    }

    let outputs = [CA_CERT, CA_KEY, TLS_CERT, TLS_KEY, SECRET_MANIFEST, CA_BUNDLE_PATCH, KUSTOMIZATION];
    let existing: Vec<&str> = outputs.iter().copied().filter(|f| args.out.join(f).exists()).collect();
    if !existing.is_empty() && !args.force {
        return Err(
            CertsError::WouldOverwrite { dir: args.out.display().to_string(), files: existing.join(", ") }.into()
        );
    }

    let valid_for = Duration::from_secs(u64::from(args.days) * 24 * 3600);
    let chain = generate_chain("trainguard-ca", &target.dns_names(), valid_for)?;
    let files = render(&target, &chain, &extra_trust)?;
    write_all(&args.out, &files)?;

    println!("wrote {} files to {} for {}", files.len(), args.out.display(), target.dns_names().join(", "));
    println!("valid for {} days; the directory holds private keys: keep it out of git", args.days);
    println!(
        "install: make deploy IMAGE=REGISTRY/trainguard:TAG OVERLAY=static-certs (reads certs/ at the repository \
         root; applies the webhooks last, once a replica is ready: docs/operations.md, Install)"
    );
    Ok(ExitCode::SUCCESS)
}

/// Every file `trainguard certs` writes, from a generated chain and any extra CAs (PEM) to keep
/// trusting.
pub(crate) fn render(
    target: &Target,
    chain: &GeneratedChain,
    extra_trust: &[String],
) -> Result<Vec<OutputFile>, CertsError> {
    let mut bundle = chain.ca_cert_pem.clone();
    for pem in extra_trust {
        if !bundle.ends_with('\n') {
            bundle.push('\n');
        }
        bundle.push_str(pem);
    }
    Ok(vec![
        OutputFile { name: CA_CERT, contents: chain.ca_cert_pem.clone(), private: false },
        OutputFile { name: CA_KEY, contents: chain.ca_key_pem.clone(), private: true },
        OutputFile { name: TLS_CERT, contents: chain.cert_pem.clone(), private: false },
        OutputFile { name: TLS_KEY, contents: chain.key_pem.clone(), private: true },
        OutputFile { name: SECRET_MANIFEST, contents: secret_manifest(target, chain), private: true },
        OutputFile { name: CA_BUNDLE_PATCH, contents: ca_bundle_patch(bundle.as_bytes()), private: false },
        OutputFile { name: KUSTOMIZATION, contents: kustomization(), private: false },
    ])
}

const GENERATED: &str = "# Generated by `trainguard certs`.";

fn secret_manifest(target: &Target, chain: &GeneratedChain) -> String {
    let data = BTreeMap::from([
        (CA_CERT.to_string(), ByteString(chain.ca_cert_pem.clone().into_bytes())),
        (TLS_CERT.to_string(), ByteString(chain.cert_pem.clone().into_bytes())),
        (TLS_KEY.to_string(), ByteString(chain.key_pem.clone().into_bytes())),
    ]);
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(target.secret_name.clone()),
            namespace: Some(target.namespace.clone()),
            labels: Some(BTreeMap::from([("app.kubernetes.io/name".to_string(), "trainguard".to_string())])),
            ..ObjectMeta::default()
        },
        type_: Some("kubernetes.io/tls".to_string()),
        data: Some(data),
        ..Secret::default()
    };
    // `Secret` from k8s-openapi serialises apiVersion and kind itself.
    format!("{GENERATED} Holds a private key: never commit it.\n{}", to_yaml(&secret))
}

/// A strategic-merge patch (merge key: webhook `name`) that sets `caBundle` on the validating
/// webhook. The mutating webhook's configuration is not in the default install; where
/// `deploy/components/mutating-webhook` adds it, it copies this `clientConfig`.
fn ca_bundle_patch(bundle_pem: &[u8]) -> String {
    let ca_bundle = serde_json::to_value(ByteString(bundle_pem.to_vec())).unwrap_or_default();
    let validating = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": VALIDATING_CONFIGURATION},
        "webhooks": [{"name": VALIDATING_WEBHOOK, "clientConfig": {"caBundle": ca_bundle}}],
    });
    format!("{GENERATED} The CA(s) the API server trusts for the webhook.\n{}", to_yaml(&validating))
}

fn kustomization() -> String {
    format!(
        "{GENERATED} A kustomize Component: the TLS Secret and the caBundle of the webhook\n\
         # configuration. Used by deploy/overlays/static-certs.\n\
         apiVersion: kustomize.config.k8s.io/v1alpha1\n\
         kind: Component\n\
         resources:\n  - {SECRET_MANIFEST}\n\
         patches:\n  - path: {CA_BUNDLE_PATCH}\n"
    )
}

fn to_yaml<T: serde::Serialize>(value: &T) -> String {
    // Base64 on one line, as kubectl prints it, rather than folded blocks.
    let mut options = serde_saphyr::SerializerOptions::default();
    options.prefer_block_scalars = false;
    // Kubernetes objects and JSON values always serialise; an empty document would show up in
    // the tests, which parse every file back.
    serde_saphyr::to_string_with_options(value, options).unwrap_or_default()
}

/// Names end up in DNS names and object names: DNS-1123 labels (RFC 1123, at most 63 characters).
pub(crate) fn validate_target(target: &Target) -> Result<(), CertsError> {
    for (flag, value) in [("service", &target.service), ("namespace", &target.namespace)] {
        if let Some(why) = dns_label_problem(value) {
            return Err(CertsError::BadName { flag, value: value.clone(), why });
        }
    }
    if target.secret_name.is_empty() || target.secret_name.len() > 253 {
        return Err(CertsError::BadName {
            flag: "secret-name",
            value: target.secret_name.clone(),
            why: "must be 1 to 253 characters",
        });
    }
    Ok(())
}

fn dns_label_problem(value: &str) -> Option<&'static str> {
    dns_label::check(value).err().map(|problem| match problem {
        LabelProblem::Length => "must be 1 to 63 characters",
        LabelProblem::Characters => "only lowercase letters, digits and '-' are allowed",
        LabelProblem::Ends => "must start and end with a letter or digit",
    })
}

/// The CERTIFICATE blocks of a PEM file, each checked to be a CA certificate.
pub(crate) fn ca_certificates(path: &str, text: &str) -> Result<Vec<String>, CertsError> {
    let bad = |why: String| CertsError::BadTrust { path: path.to_string(), why };
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        let line = line.trim_end();
        if line == "-----BEGIN CERTIFICATE-----" {
            current = Some(String::new());
        }
        if let Some(block) = current.as_mut() {
            block.push_str(line);
            block.push('\n');
        }
        if line == "-----END CERTIFICATE-----" {
            blocks.extend(current.take());
        }
    }
    if blocks.is_empty() {
        return Err(bad("no PEM CERTIFICATE block found".into()));
    }
    for (i, block) in blocks.iter().enumerate() {
        let der = CertificateDer::from_pem_slice(block.as_bytes())
            .map_err(|e| bad(format!("certificate {} is not valid PEM: {e}", i + 1)))?;
        let (_, cert) = x509_parser::parse_x509_certificate(&der)
            .map_err(|e| bad(format!("certificate {} does not parse: {e}", i + 1)))?;
        if !cert.is_ca() {
            return Err(bad(format!("certificate {} ({}) is not a CA", i + 1, cert.subject())));
        }
    }
    Ok(blocks)
}

fn write_all(dir: &Path, files: &[OutputFile]) -> anyhow::Result<()> {
    let created = !dir.exists();
    fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    if created {
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700))
            .with_context(|| format!("restricting {}", dir.display()))?;
    }
    // Keeps the keys out of git even where the directory is not in a .gitignore.
    write_file(&dir.join(".gitignore"), "# Generated by `trainguard certs`: private keys.\n*\n", false)?;
    for file in files {
        write_file(&dir.join(file.name), &file.contents, file.private)?;
    }
    Ok(())
}

fn write_file(path: &Path, contents: &str, private: bool) -> anyhow::Result<()> {
    let mode = if private { 0o600 } else { 0o644 };
    // Remove first so a file from an earlier run cannot keep looser permissions.
    match fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("replacing {}", path.display())),
    }
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .with_context(|| format!("creating {}", path.display()))?;
    file.write_all(contents.as_bytes()).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_labels() {
        let cases: &[(&str, Option<&str>)] = &[
            ("trainguard-webhook", None),
            ("a", None),
            ("x1-2", None),
            ("", Some("must be 1 to 63 characters")),
            (&"a".repeat(64), Some("must be 1 to 63 characters")),
            ("Trainguard", Some("only lowercase letters, digits and '-' are allowed")),
            ("a.b", Some("only lowercase letters, digits and '-' are allowed")),
            ("-a", Some("must start and end with a letter or digit")),
            ("a-", Some("must start and end with a letter or digit")),
        ];
        for (value, want) in cases {
            assert_eq!(dns_label_problem(value), *want, "{value:?}");
        }
    }

    #[test]
    fn also_trust_rejects_what_is_not_a_ca() {
        let chain = generate_chain("test-ca", &["x.y.svc".to_string()], Duration::from_secs(3600)).unwrap();
        let cases: &[(&str, String, Result<usize, &str>)] = &[
            ("ca", chain.ca_cert_pem.clone(), Ok(1)),
            ("two cas", format!("junk\n{}\n{}", chain.ca_cert_pem, chain.ca_cert_pem), Ok(2)),
            ("leaf", chain.cert_pem.clone(), Err("is not a CA")),
            ("key only", chain.key_pem.clone(), Err("no PEM CERTIFICATE block")),
            ("empty", String::new(), Err("no PEM CERTIFICATE block")),
            (
                "garbage body",
                "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n".to_string(),
                Err("does not parse"),
            ),
        ];
        for (name, text, want) in cases {
            let got = ca_certificates("f.pem", text);
            match (got, want) {
                (Ok(blocks), Ok(n)) => assert_eq!(blocks.len(), *n, "{name}"),
                (Err(e), Err(msg)) => assert!(e.to_string().contains(msg), "{name}: {e}"),
                (got, want) => panic!("{name}: got {got:?}, want {want:?}"),
            }
        }
    }
}
