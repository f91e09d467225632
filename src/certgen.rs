//! Certificate generation (rcgen): a CA and a serving certificate signed by it. Used by
//! `serve --dev`, `trainguard certs` and the tests, so all three make the same kind of chain.

use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use time::OffsetDateTime;

/// PEM-encoded CA certificate and a serving certificate + key signed by it.
#[derive(Debug, Clone)]
pub struct GeneratedChain {
    pub ca_cert_pem: String,
    pub ca_key_pem: String,
    pub cert_pem: String,
    pub key_pem: String,
}

#[derive(Debug, thiserror::Error)]
#[error("generating certificates: {0}")]
pub struct CertGenError(#[from] rcgen::Error);

/// A CA named `ca_name` and a serving certificate for `sans` (DNS names or IP addresses), both
/// valid from one hour ago (clock skew) for `valid_for`.
pub fn generate_chain(ca_name: &str, sans: &[String], valid_for: Duration) -> Result<GeneratedChain, CertGenError> {
    let now = OffsetDateTime::now_utc();
    let not_before = now - time::Duration::hours(1);
    let not_after = now + time::Duration::try_from(valid_for).unwrap_or(time::Duration::days(365));

    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.distinguished_name = DistinguishedName::new();
    ca_params.distinguished_name.push(DnType::CommonName, ca_name);
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca_params.key_usages =
        vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    ca_params.not_before = not_before;
    ca_params.not_after = not_after;
    let ca_key = KeyPair::generate()?;
    let ca_key_pem = ca_key.serialize_pem();
    let ca = CertifiedIssuer::self_signed(ca_params, ca_key)?;

    let mut leaf_params = CertificateParams::new(sans.to_vec())?;
    leaf_params.distinguished_name = DistinguishedName::new();
    leaf_params.distinguished_name.push(DnType::CommonName, sans.first().map(String::as_str).unwrap_or("trainguard"));
    leaf_params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
    leaf_params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    leaf_params.not_before = not_before;
    leaf_params.not_after = not_after;
    let leaf_key = KeyPair::generate()?;
    let leaf = leaf_params.signed_by(&leaf_key, &ca)?;

    Ok(GeneratedChain { ca_cert_pem: ca.pem(), ca_key_pem, cert_pem: leaf.pem(), key_pem: leaf_key.serialize_pem() })
}
