//! The Kubeflow Trainer releases trainguard knows, one row each in [`RELEASES`]: every choice that
//! differs between releases (the `--trainer-version` value, the overrides field, the generated CRD
//! schema and Go types, upstream defects trainguard reports) is read from the row, never from a
//! list of its own. Adding a release is adding its oracle (`e2e/oracle/<tag>`), running
//! `make generate` (which writes `crd/<tag>.json` and `types/<tag>.json`) and adding its row here.

use std::fmt;

use crate::model::OverridesField;

/// A known defect of upstream Trainer that trainguard reports on the releases that have it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Defect {
    /// The JobSet-TTL loop: a *Failed* TrainJob whose runtime gives its JobSet a
    /// `ttlSecondsAfterFinished` gets a new JobSet each time that TTL deletes the old one, restart
    /// count reset, for ever.
    JobSetTtlLoop,
}

/// What `make generate` wrote for a tag, read into the binary.
#[derive(Debug)]
pub(crate) struct Generated {
    /// The Trainer tag whose CRD and Go types stand for the line, e.g. `v2.3.0`.
    pub(crate) tag: &'static str,
    /// `crd/<tag>.json`: the tag's TrainJob CRD schema.
    pub(crate) crd: &'static str,
    /// `types/<tag>.json`: the tag's `TrainJobSpec` Go types.
    pub(crate) types: &'static str,
}

/// The generated files of `tag`; a tag without them does not build.
macro_rules! generated {
    ($tag:literal) => {
        Generated {
            tag: $tag,
            crd: include_str!(concat!("crd/", $tag, ".json")),
            types: include_str!(concat!("types/", $tag, ".json")),
        }
    };
}

/// One release line.
#[derive(Debug)]
pub(crate) struct Release {
    /// `--trainer-version`'s value and the name messages give, e.g. `v2.3`.
    pub(crate) name: &'static str,
    /// Its line in `--help`.
    pub(crate) help: &'static str,
    /// Where the line's TrainJob keeps its per-job overrides.
    pub(crate) overrides: OverridesField,
    pub(crate) generated: Generated,
    /// Upstream defects of every release of the line.
    pub(crate) defects: &'static [Defect],
}

/// Oldest first; the last row is the default `--trainer-version`.
const RELEASES: &[Release] = &[
    Release {
        name: "v2.0",
        help: "v2.0.x: `spec.podSpecOverrides`",
        overrides: OverridesField::PodSpecOverrides,
        generated: generated!("v2.0.1"),
        defects: &[Defect::JobSetTtlLoop],
    },
    Release {
        name: "v2.1",
        help: "v2.1.x: `spec.podTemplateOverrides`",
        overrides: OverridesField::PodTemplateOverrides,
        generated: generated!("v2.1.0"),
        defects: &[Defect::JobSetTtlLoop],
    },
    Release {
        name: "v2.2",
        help: "v2.2.x: `spec.runtimePatches`",
        overrides: OverridesField::RuntimePatches,
        generated: generated!("v2.2.1"),
        defects: &[Defect::JobSetTtlLoop],
    },
    Release {
        name: "v2.3",
        help: "v2.3.x: `spec.runtimePatches`, whose pod spec has `terminationGracePeriodSeconds`",
        overrides: OverridesField::RuntimePatches,
        generated: generated!("v2.3.0"),
        defects: &[Defect::JobSetTtlLoop],
    },
];

/// A Kubeflow Trainer release line whose TrainJob schema trainguard knows: a row of [`RELEASES`].
/// Ordered as the table is, oldest first.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TrainerVersion(u8);

impl TrainerVersion {
    /// Every release, oldest first.
    pub const ALL: [TrainerVersion; RELEASES.len()] = {
        let mut all = [TrainerVersion(0); RELEASES.len()];
        let mut i = 0;
        while i < all.len() {
            all[i] = TrainerVersion(i as u8);
            i += 1;
        }
        all
    };

    /// Names for the tests and for the choices that hold from a release on; a row needs none.
    pub const V2_0: TrainerVersion = TrainerVersion::named("v2.0");
    pub const V2_1: TrainerVersion = TrainerVersion::named("v2.1");
    pub const V2_2: TrainerVersion = TrainerVersion::named("v2.2");
    pub const V2_3: TrainerVersion = TrainerVersion::named("v2.3");

    /// The row named `name`; a name not in the table does not build.
    const fn named(name: &str) -> TrainerVersion {
        let mut i = 0;
        while i < RELEASES.len() {
            if eq(RELEASES[i].name.as_bytes(), name.as_bytes()) {
                return TrainerVersion(i as u8);
            }
            i += 1;
        }
        panic!("no such Trainer release in the table")
    }

    /// The release named `name` (`v2.3`), as `--trainer-version` spells it.
    pub fn from_name(name: &str) -> Option<TrainerVersion> {
        TrainerVersion::ALL.into_iter().find(|v| v.name() == name)
    }

    fn release(self) -> &'static Release {
        &RELEASES[self.index()]
    }

    /// The row's place in the table, oldest first from 0: the per-release caches of what its files
    /// load into, and the differential tests' seeds.
    pub fn index(self) -> usize {
        usize::from(self.0)
    }

    /// `--trainer-version`'s value, e.g. `v2.3`.
    pub fn name(self) -> &'static str {
        self.release().name
    }

    /// Its one-line description in `--help`.
    pub fn help(self) -> &'static str {
        self.release().help
    }

    /// The Trainer tag whose CRD and Go types stand for this line (e.g. `v2.3.0`).
    pub fn tag(self) -> &'static str {
        self.release().generated.tag
    }

    /// Where this line's TrainJob keeps its per-job overrides.
    pub fn overrides(self) -> OverridesField {
        self.release().overrides
    }

    /// Whether every release of this line has `defect`.
    pub fn has(self, defect: Defect) -> bool {
        self.release().defects.contains(&defect)
    }

    pub(crate) fn generated(self) -> &'static Generated {
        &self.release().generated
    }
}

impl Default for TrainerVersion {
    /// The newest release.
    fn default() -> TrainerVersion {
        TrainerVersion((RELEASES.len() - 1) as u8)
    }
}

impl fmt::Debug for TrainerVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Defect {
    /// The newest release that has it, for messages that say "up to" it.
    pub fn last_release(self) -> Option<TrainerVersion> {
        TrainerVersion::ALL.into_iter().rev().find(|v| v.has(self))
    }
}

const fn eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::trainer::{crd, types};

    #[test]
    fn each_row_has_its_generated_files_and_they_load() {
        for version in TrainerVersion::ALL {
            let generated = version.generated();
            let types = types::parse(generated.types).unwrap_or_else(|e| panic!("{version:?}: {e}"));
            assert_eq!(types.trainer, generated.tag, "types/{}.json is another tag's", generated.tag);
            assert!(types.spec.field(version.overrides().json_name()).is_some(), "{version:?}");
            crd::parse(generated.crd).unwrap_or_else(|e| panic!("crd/{}.json: {e}", generated.tag));
            assert!(crd::schema(version).properties.contains_key("spec"), "crd/{}.json has no spec", generated.tag);
        }
    }

    #[test]
    fn each_generated_file_has_its_row() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/trainer");
        let tags: BTreeSet<String> = TrainerVersion::ALL.iter().map(|v| format!("{}.json", v.tag())).collect();
        for kind in ["crd", "types"] {
            let files: BTreeSet<String> = std::fs::read_dir(dir.join(kind))
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            assert_eq!(files, tags, "{kind}/: a release without its row, or a row without its files");
        }
    }

    #[test]
    fn rows_are_distinct_and_oldest_first() {
        let names: BTreeSet<&str> = TrainerVersion::ALL.iter().map(|v| v.name()).collect();
        assert_eq!(names.len(), RELEASES.len(), "a name is given twice");
        let tag = |v: &TrainerVersion| -> Vec<u32> {
            v.tag().trim_start_matches('v').split('.').map(|n| n.parse().unwrap()).collect()
        };
        for pair in TrainerVersion::ALL.windows(2) {
            assert!(tag(&pair[0]) < tag(&pair[1]), "{:?} before {:?}", pair[0], pair[1]);
            assert!(
                pair[1].tag().starts_with(&format!("{}.", pair[1].name())),
                "{:?} names {}",
                pair[1],
                pair[1].tag()
            );
        }
        assert_eq!(TrainerVersion::default(), *TrainerVersion::ALL.last().unwrap());
        for version in TrainerVersion::ALL {
            assert_eq!(TrainerVersion::from_name(version.name()), Some(version));
        }
        assert_eq!(TrainerVersion::from_name("v9"), None);
    }
}
