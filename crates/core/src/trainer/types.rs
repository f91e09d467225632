//! Each Kubeflow Trainer release's TrainJob Go types, as [`model`](super::model) data, read from
//! `types/<tag>.json`.
//!
//! `make generate` writes those files from upstream's own modules: each release's oracle
//! (`e2e/oracle/<tag>`, built against the tag's Trainer and its k8s.io/api) walks `TrainJobSpec` by
//! reflection beside the tag's CRD and keeps the fields both have — what Trainer decodes after the
//! API server has pruned the object. So every release has its own Kubernetes core types (v2.0.1
//! builds with k8s.io/api v0.32.2, v2.3.0 with v0.36.2), pointer-ness and JSON names, and none of
//! it is copied by hand. `make oracle` fails when the committed files differ from what upstream
//! gives. The v2.2.1 oracle is built in v2.3.0's module graph, so it names k8s.io/api v0.36.2
//! where Trainer v2.2.1 itself requires v0.36.0: a patch release of Kubernetes changes no API
//! type, and the walked types are the same.

use std::collections::{BTreeMap, HashMap};
use std::sync::OnceLock;

use serde::Deserialize;

use super::TrainerVersion;
use super::model::{Field, Struct, Ty};

/// `types/<tag>.json`.
#[derive(Debug, Deserialize)]
struct TypesFile {
    /// The Trainer tag the types come from.
    trainer: String,
    /// The k8s.io/api version that tag builds with.
    #[serde(rename = "k8s.io/api")]
    api: String,
    root: String,
    types: BTreeMap<String, Vec<FieldFile>>,
}

#[derive(Debug, Deserialize)]
struct FieldFile {
    json: String,
    #[serde(default)]
    pointer: bool,
    #[serde(rename = "type")]
    ty: String,
}

/// A release's types, built once.
#[derive(Debug)]
pub(crate) struct Types {
    /// The Trainer tag, e.g. `v2.3.0`.
    pub(crate) trainer: &'static str,
    /// The k8s.io/api version whose core types the release embeds, e.g. `v0.36.2`.
    pub(crate) api: &'static str,
    /// `TrainJobSpec`.
    pub(crate) spec: &'static Struct,
}

/// Each row's types, built on first use.
static TYPES: [OnceLock<Types>; TrainerVersion::ALL.len()] = [const { OnceLock::new() }; TrainerVersion::ALL.len()];

/// The types of `version`'s release.
pub(crate) fn release(version: TrainerVersion) -> &'static Types {
    TYPES[version.index()].get_or_init(|| load(version))
}

fn load(version: TrainerVersion) -> Types {
    // The files are generated and tested (`each_row_has_its_generated_files_and_they_load`); a
    // failure is a build bug.
    let types = parse(version.generated().types).unwrap_or_else(|e| panic!("committed Trainer types do not load: {e}"));
    assert_eq!(types.trainer, version.tag(), "types/{}.json holds another tag's types", version.tag());
    types
}

/// Why a types file cannot be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TypesError {
    #[error("not a types file: {0}")]
    Json(#[from] serde_json::Error),
    #[error("{0} is named but not described")]
    Missing(String),
    #[error("{0} reaches itself")]
    Cycle(String),
}

/// Builds the model of a types file. Each release is built once per process and lives as long as
/// it (the model is `'static` data, as if it were written in Rust).
pub(crate) fn parse(text: &str) -> Result<Types, TypesError> {
    let file: TypesFile = serde_json::from_str(text)?;
    let mut builder = Builder { file: &file, built: HashMap::new(), building: Vec::new() };
    let spec = builder.build(&file.root)?;
    Ok(Types { trainer: leak(&file.trainer), api: leak(&file.api), spec })
}

struct Builder<'f> {
    file: &'f TypesFile,
    built: HashMap<&'f str, &'static Struct>,
    building: Vec<&'f str>,
}

impl<'f> Builder<'f> {
    fn build(&mut self, name: &'f str) -> Result<&'static Struct, TypesError> {
        if let Some(done) = self.built.get(name) {
            return Ok(done);
        }
        if self.building.contains(&name) {
            // The model is plain `'static` data with no indirection; no type at these tags does this.
            return Err(TypesError::Cycle(name.to_string()));
        }
        let (name, fields) =
            self.file.types.get_key_value(name).ok_or_else(|| TypesError::Missing(name.to_string()))?;
        self.building.push(name);
        let fields = fields
            .iter()
            .map(|f| Ok(Field { json: leak(&f.json), ty: self.ty(&f.ty)?, pointer: f.pointer }))
            .collect::<Result<Vec<_>, TypesError>>()?;
        self.building.pop();
        let built: &'static Struct = Box::leak(Box::new(Struct { name: leak(name), fields: fields.leak() }));
        self.built.insert(name, built);
        Ok(built)
    }

    fn ty(&mut self, ty: &'f str) -> Result<Ty, TypesError> {
        if let Some(item) = ty.strip_prefix("[]") {
            return Ok(Ty::List(Box::leak(Box::new(self.ty(item)?))));
        }
        if let Some(value) = ty.strip_prefix("map[string]") {
            return Ok(Ty::Map(Box::leak(Box::new(self.ty(value)?))));
        }
        Ok(match ty {
            "bool" => Ty::Bool,
            "int32" => Ty::Int32,
            "int64" => Ty::Int64,
            "float64" => Ty::Float64,
            // `[]byte` is base64 text in JSON, and equal bytes are equal text.
            "string" | "bytes" => Ty::String,
            "time" => Ty::DateTime,
            "intorstring" => Ty::IntOrString,
            "quantity" => Ty::Quantity,
            name => Ty::Struct(self.build(name)?),
        })
    }
}

fn leak(s: &str) -> &'static str {
    Box::leak(s.to_string().into_boxed_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The path of JSON names from `spec` to a struct's field, following lists and maps.
    fn field_at(version: TrainerVersion, path: &[&str]) -> Option<&'static Field> {
        let mut s = release(version).spec;
        let (last, parents) = path.split_last()?;
        for key in parents {
            let mut ty = &s.field(key)?.ty;
            while let Ty::List(inner) | Ty::Map(inner) = ty {
                ty = inner;
            }
            let Ty::Struct(inner) = ty else { return None };
            s = inner;
        }
        s.field(last)
    }

    #[test]
    fn every_release_loads_with_its_own_kubernetes_types() {
        let cases = [
            (TrainerVersion::V2_0, "v2.0.1", "v0.32.2"),
            (TrainerVersion::V2_1, "v2.1.0", "v0.34.1"),
            // Built in v2.3.0's module graph; Trainer v2.2.1 requires v0.36.0, the same types.
            (TrainerVersion::V2_2, "v2.2.1", "v0.36.2"),
            (TrainerVersion::V2_3, "v2.3.0", "v0.36.2"),
        ];
        for (version, trainer, api) in cases {
            let release = release(version);
            assert_eq!((release.trainer, release.api), (trainer, api), "{version:?}");
            assert_eq!(release.spec.name, "trainer/v1alpha1.TrainJobSpec");
        }
    }

    #[test]
    fn fields_follow_each_release() {
        let env_from_file = ["trainer", "env", "valueFrom", "fileKeyRef"];
        let grace = ["runtimePatches", "trainingRuntimeSpec", "template", "spec", "replicatedJobs", "template"];
        let grace: Vec<&str> =
            grace.iter().copied().chain(["spec", "template", "spec", "terminationGracePeriodSeconds"]).collect();
        // (path, releases that have it)
        let cases: [(&[&str], [bool; 4]); 6] = [
            // k8s.io/api v0.32 (Trainer v2.0.1) has no `fileKeyRef`; v0.34 (v2.1.0) has.
            (&env_from_file, [false, true, true, true]),
            (&["podSpecOverrides"], [true, false, false, false]),
            (&["podTemplateOverrides", "metadata", "labels"], [false, true, false, false]),
            (&["runtimePatches", "time"], [false, false, true, true]),
            (&grace, [false, false, false, true]),
            // The CRD embeds ObjectMeta reduced: what it lacks never reaches Trainer.
            (&["podTemplateOverrides", "metadata", "generateName"], [false; 4]),
        ];
        for (path, expected) in cases {
            let found = TrainerVersion::ALL.map(|v| field_at(v, path).is_some());
            assert_eq!(found, expected, "{path:?}");
        }
    }

    #[test]
    fn pointer_ness_is_the_go_types() {
        // (path, pointer in every release that has it)
        let cases: [(&[&str], bool); 5] = [
            (&["suspend"], true),
            (&["managedBy"], true),
            (&["runtimeRef"], false),
            (&["trainer", "numNodes"], true),
            (&["trainer", "env", "valueFrom"], true),
        ];
        for (path, pointer) in cases {
            for version in TrainerVersion::ALL {
                let field = field_at(version, path).unwrap_or_else(|| panic!("{version:?} has {path:?}"));
                assert_eq!(field.pointer, pointer, "{version:?} {path:?}");
            }
        }
    }

    #[test]
    fn a_broken_file_is_an_error_not_a_panic() {
        let cases = [
            ("{", "not a types file"),
            (r#"{"trainer":"t","k8s.io/api":"a","root":"R","types":{}}"#, "R is named but not described"),
            (
                r#"{"trainer":"t","k8s.io/api":"a","root":"R","types":{"R":[{"json":"r","type":"[]R"}]}}"#,
                "R reaches itself",
            ),
        ];
        for (text, expected) in cases {
            let error = parse(text).map(|r| r.spec.name).expect_err(text);
            assert!(error.to_string().starts_with(expected), "{text}: {error}");
        }
    }
}
