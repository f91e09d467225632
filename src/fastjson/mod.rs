//! A serde deserializer for the admission hot path: it reads the fields a view names exactly as
//! serde_json does and skips everything else by structure only ([`skip`]), several times faster
//! than serde_json's validating skip.
//!
//! It is an accelerator, not a second source of truth. Whatever it does not take on (floats,
//! numbers beyond 64 bits, JSON arrays read as structs, enums) and whatever is malformed in what
//! it reads is an [`Error`]; the caller then decodes the same bytes with serde_json, which decides
//! and reports. `tests/differential.rs` checks that when both succeed they produce the same views.
//! `serde_json::value::RawValue` fields are supported (serde_json's own raw-value protocol).

mod de;
mod repeat;
pub mod skip;
pub mod write;

pub use de::{Deserializer, Error};

/// Decodes `T` from the whole of `input` (whitespace around the value is allowed).
pub fn from_slice<'de, T: serde::Deserialize<'de>>(input: &'de [u8]) -> Result<T, Error> {
    let mut de = Deserializer::new(input);
    let value = T::deserialize(&mut de)?;
    de.end()?;
    Ok(value)
}
