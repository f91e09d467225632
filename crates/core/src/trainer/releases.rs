//! TrainJob `spec` of each Kubeflow Trainer release, from `pkg/apis/trainer/v1alpha1/trainjob_types.go`
//! at the release's tag (pointer-ness; the CRD's constraints are applied from the CRD itself, see
//! [`super::crd`]). Patch releases of one
//! line share a schema. The Kubernetes core types they embed are in [`super::core_v1`].

use super::core_v1::{
    AFFINITY, ENV_VAR, LOCAL_OBJECT_REFERENCE, OBJECT_META, POD_SCHEDULING_GATE, POD_SECURITY_CONTEXT,
    RESOURCE_REQUIREMENTS, SECURITY_CONTEXT, TOLERATION, VOLUME, VOLUME_MOUNT,
};
use super::model::{Field, Struct, Ty};

const STRINGS: Ty = Ty::List(&Ty::String);
const STRING_MAP: Ty = Ty::Map(&Ty::String);
const ENV: Ty = Ty::List(&Ty::Struct(&ENV_VAR));

// Parts every release has.

static RUNTIME_REF: Struct = Struct {
    name: "RuntimeRef",
    fields: &[Field::new("name", Ty::String), Field::ptr("apiGroup", Ty::String), Field::ptr("kind", Ty::String)],
};

static DATASET_INITIALIZER: Struct = Struct {
    name: "DatasetInitializer",
    fields: &[
        Field::ptr("storageUri", Ty::String),
        Field::new("env", ENV),
        Field::ptr("secretRef", Ty::Struct(&LOCAL_OBJECT_REFERENCE)),
    ],
};

static MODEL_INITIALIZER: Struct = Struct { name: "ModelInitializer", fields: DATASET_INITIALIZER.fields };

static INITIALIZER: Struct = Struct {
    name: "Initializer",
    fields: &[
        Field::ptr("dataset", Ty::Struct(&DATASET_INITIALIZER)),
        Field::ptr("model", Ty::Struct(&MODEL_INITIALIZER)),
    ],
};

/// `trainer` with `numProcPerNode` as v2.0 and v2.1 have it: `*intstr.IntOrString`.
static TRAINER_V2_0: Struct = Struct {
    name: "Trainer",
    fields: &[
        Field::ptr("image", Ty::String),
        Field::new("command", STRINGS),
        Field::new("args", STRINGS),
        Field::new("env", ENV),
        Field::ptr("numNodes", Ty::Int32),
        Field::ptr("resourcesPerNode", Ty::Struct(&RESOURCE_REQUIREMENTS)),
        Field::ptr("numProcPerNode", Ty::IntOrString),
    ],
};

/// From v2.2 `numProcPerNode` is an integer (`*int32`): `auto`, `cpu` and `gpu` are gone.
static TRAINER_V2_2: Struct = Struct {
    name: "Trainer",
    fields: &[
        Field::ptr("image", Ty::String),
        Field::new("command", STRINGS),
        Field::new("args", STRINGS),
        Field::new("env", ENV),
        Field::ptr("numNodes", Ty::Int32),
        Field::ptr("resourcesPerNode", Ty::Struct(&RESOURCE_REQUIREMENTS)),
        Field::ptr("numProcPerNode", Ty::Int32),
    ],
};

const RUNTIME_REF_FIELD: Field = Field::new("runtimeRef", Ty::Struct(&RUNTIME_REF));
const INITIALIZER_FIELD: Field = Field::ptr("initializer", Ty::Struct(&INITIALIZER));
const SUSPEND_FIELD: Field = Field::ptr("suspend", Ty::Bool);
const MANAGED_BY_FIELD: Field = Field::ptr("managedBy", Ty::String);

// v2.0: podSpecOverrides.

static TARGET_JOB: Struct = Struct { name: "TargetJob", fields: &[Field::new("name", Ty::String)] };

/// v2.0 and v2.1 `ContainerOverride`.
static CONTAINER_OVERRIDE: Struct = Struct {
    name: "ContainerOverride",
    fields: &[
        Field::new("name", Ty::String),
        Field::new("env", ENV),
        Field::new("volumeMounts", Ty::List(&Ty::Struct(&VOLUME_MOUNT))),
    ],
};

static POD_SPEC_OVERRIDE: Struct = Struct {
    name: "PodSpecOverride",
    fields: &[
        Field::new("targetJobs", Ty::List(&Ty::Struct(&TARGET_JOB))),
        Field::ptr("serviceAccountName", Ty::String),
        Field::new("nodeSelector", STRING_MAP),
        Field::new("tolerations", Ty::List(&Ty::Struct(&TOLERATION))),
        Field::new("volumes", Ty::List(&Ty::Struct(&VOLUME))),
        Field::new("initContainers", Ty::List(&Ty::Struct(&CONTAINER_OVERRIDE))),
        Field::new("containers", Ty::List(&Ty::Struct(&CONTAINER_OVERRIDE))),
        Field::new("schedulingGates", Ty::List(&Ty::Struct(&POD_SCHEDULING_GATE))),
    ],
};

/// Kubeflow Trainer v2.0.1.
pub(crate) static SPEC_V2_0: Struct = Struct {
    name: "TrainJobSpec",
    fields: &[
        RUNTIME_REF_FIELD,
        INITIALIZER_FIELD,
        Field::ptr("trainer", Ty::Struct(&TRAINER_V2_0)),
        Field::new("labels", STRING_MAP),
        Field::new("annotations", STRING_MAP),
        Field::new("podSpecOverrides", Ty::List(&Ty::Struct(&POD_SPEC_OVERRIDE))),
        SUSPEND_FIELD,
        MANAGED_BY_FIELD,
    ],
};

// v2.1: podTemplateOverrides.

static POD_TEMPLATE_SPEC_OVERRIDE: Struct = Struct {
    name: "PodTemplateSpecOverride",
    fields: &[
        Field::ptr("serviceAccountName", Ty::String),
        Field::new("nodeSelector", STRING_MAP),
        Field::ptr("affinity", Ty::Struct(&AFFINITY)),
        Field::new("tolerations", Ty::List(&Ty::Struct(&TOLERATION))),
        Field::new("volumes", Ty::List(&Ty::Struct(&VOLUME))),
        Field::new("initContainers", Ty::List(&Ty::Struct(&CONTAINER_OVERRIDE))),
        Field::new("containers", Ty::List(&Ty::Struct(&CONTAINER_OVERRIDE))),
        Field::new("schedulingGates", Ty::List(&Ty::Struct(&POD_SCHEDULING_GATE))),
        Field::new("imagePullSecrets", Ty::List(&Ty::Struct(&LOCAL_OBJECT_REFERENCE))),
    ],
};

static POD_TEMPLATE_OVERRIDE: Struct = Struct {
    name: "PodTemplateOverride",
    fields: &[
        Field::new("targetJobs", Ty::List(&Ty::Struct(&TARGET_JOB))),
        Field::ptr("metadata", Ty::Struct(&OBJECT_META)),
        Field::ptr("spec", Ty::Struct(&POD_TEMPLATE_SPEC_OVERRIDE)),
    ],
};

/// Kubeflow Trainer v2.1.0.
pub(crate) static SPEC_V2_1: Struct = Struct {
    name: "TrainJobSpec",
    fields: &[
        RUNTIME_REF_FIELD,
        INITIALIZER_FIELD,
        Field::ptr("trainer", Ty::Struct(&TRAINER_V2_0)),
        Field::new("labels", STRING_MAP),
        Field::new("annotations", STRING_MAP),
        Field::new("podTemplateOverrides", Ty::List(&Ty::Struct(&POD_TEMPLATE_OVERRIDE))),
        SUSPEND_FIELD,
        MANAGED_BY_FIELD,
    ],
};

// v2.2 and v2.3: runtimePatches, a pointer at every level.

static CONTAINER_PATCH_V2_2: Struct = Struct {
    name: "ContainerPatch",
    fields: &[
        Field::new("name", Ty::String),
        Field::new("env", ENV),
        Field::new("volumeMounts", Ty::List(&Ty::Struct(&VOLUME_MOUNT))),
        Field::ptr("securityContext", Ty::Struct(&SECURITY_CONTEXT)),
    ],
};

/// The fields of v2.2's `PodSpecPatch`, then `$extra`.
macro_rules! pod_spec_patch {
    ($($extra:expr),*) => {
        Struct {
            name: "PodSpecPatch",
            fields: &[
                Field::ptr("serviceAccountName", Ty::String),
                Field::new("volumes", Ty::List(&Ty::Struct(&VOLUME))),
                Field::new("initContainers", Ty::List(&Ty::Struct(&CONTAINER_PATCH_V2_2))),
                Field::new("containers", Ty::List(&Ty::Struct(&CONTAINER_PATCH_V2_2))),
                Field::new("imagePullSecrets", Ty::List(&Ty::Struct(&LOCAL_OBJECT_REFERENCE))),
                Field::ptr("securityContext", Ty::Struct(&POD_SECURITY_CONTEXT)),
                Field::new("nodeSelector", STRING_MAP),
                Field::ptr("affinity", Ty::Struct(&AFFINITY)),
                Field::new("tolerations", Ty::List(&Ty::Struct(&TOLERATION))),
                Field::new("schedulingGates", Ty::List(&Ty::Struct(&POD_SCHEDULING_GATE))),
                $($extra),*
            ],
        }
    };
}

static POD_SPEC_PATCH_V2_2: Struct = pod_spec_patch!();

/// v2.3 adds `terminationGracePeriodSeconds` to the patch's pod spec.
static POD_SPEC_PATCH_V2_3: Struct = pod_spec_patch!(Field::ptr("terminationGracePeriodSeconds", Ty::Int64));

/// The chain `trainingRuntimeSpec.template.spec.replicatedJobs[].template.spec.template` down to
/// the pod spec patch `$pod`, once per release.
macro_rules! runtime_patch {
    ($patch:ident, $pod:ident) => {
        static $patch: Struct = {
            static POD_TEMPLATE: Struct = Struct {
                name: "PodTemplatePatch",
                fields: &[Field::ptr("metadata", Ty::Struct(&OBJECT_META)), Field::ptr("spec", Ty::Struct(&$pod))],
            };
            static JOB_SPEC: Struct =
                Struct { name: "JobSpecPatch", fields: &[Field::ptr("template", Ty::Struct(&POD_TEMPLATE))] };
            static JOB_TEMPLATE: Struct = Struct {
                name: "JobTemplatePatch",
                fields: &[Field::ptr("metadata", Ty::Struct(&OBJECT_META)), Field::ptr("spec", Ty::Struct(&JOB_SPEC))],
            };
            static REPLICATED_JOB: Struct = Struct {
                name: "ReplicatedJobPatch",
                fields: &[Field::new("name", Ty::String), Field::ptr("template", Ty::Struct(&JOB_TEMPLATE))],
            };
            static JOBSET_SPEC: Struct = Struct {
                name: "JobSetSpecPatch",
                fields: &[Field::new("replicatedJobs", Ty::List(&Ty::Struct(&REPLICATED_JOB)))],
            };
            static JOBSET_TEMPLATE: Struct = Struct {
                name: "JobSetTemplatePatch",
                fields: &[
                    Field::ptr("metadata", Ty::Struct(&OBJECT_META)),
                    Field::ptr("spec", Ty::Struct(&JOBSET_SPEC)),
                ],
            };
            static TRAINING_RUNTIME_SPEC: Struct = Struct {
                name: "TrainingRuntimeSpecPatch",
                fields: &[Field::ptr("template", Ty::Struct(&JOBSET_TEMPLATE))],
            };
            Struct {
                name: "RuntimePatch",
                fields: &[
                    Field::new("manager", Ty::String),
                    Field::ptr("time", Ty::DateTime),
                    Field::ptr("trainingRuntimeSpec", Ty::Struct(&TRAINING_RUNTIME_SPEC)),
                ],
            }
        };
    };
}

runtime_patch!(RUNTIME_PATCH_V2_2, POD_SPEC_PATCH_V2_2);
runtime_patch!(RUNTIME_PATCH_V2_3, POD_SPEC_PATCH_V2_3);

const ACTIVE_DEADLINE_FIELD: Field = Field::new("activeDeadlineSeconds", Ty::Int64);

/// Kubeflow Trainer v2.2.1: `spec.labels` and `spec.annotations` removed, `activeDeadlineSeconds` added.
pub(crate) static SPEC_V2_2: Struct = Struct {
    name: "TrainJobSpec",
    fields: &[
        RUNTIME_REF_FIELD,
        INITIALIZER_FIELD,
        Field::ptr("trainer", Ty::Struct(&TRAINER_V2_2)),
        Field::new("runtimePatches", Ty::List(&Ty::Struct(&RUNTIME_PATCH_V2_2))),
        SUSPEND_FIELD,
        ACTIVE_DEADLINE_FIELD,
        MANAGED_BY_FIELD,
    ],
};

/// Kubeflow Trainer v2.3.0.
pub(crate) static SPEC_V2_3: Struct = Struct {
    name: "TrainJobSpec",
    fields: &[
        RUNTIME_REF_FIELD,
        INITIALIZER_FIELD,
        Field::ptr("trainer", Ty::Struct(&TRAINER_V2_2)),
        Field::new("runtimePatches", Ty::List(&Ty::Struct(&RUNTIME_PATCH_V2_3))),
        SUSPEND_FIELD,
        ACTIVE_DEADLINE_FIELD,
        MANAGED_BY_FIELD,
    ],
};
