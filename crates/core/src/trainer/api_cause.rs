//! What the API server says is wrong with a write, one cause at a time: what the CRD engine
//! ([`super::crd`]) and the ObjectMeta checks ([`super::object_meta`]) both return.

use serde_json::Value;

/// One cause of a 422, in the API server's terms.
#[derive(Debug, Clone)]
pub struct ApiCause {
    pub(crate) kind: Kind,
    pub path: String,
    pub(crate) value: Option<Value>,
    pub detail: String,
    /// Found by one of the CRD's CEL rules (its message is the CRD's own).
    pub(crate) rule: bool,
    /// Found by kube-openapi's range check of an integer's format: the field it names. The cause
    /// itself has no field (`path` is empty), as the API server reports it.
    pub(crate) range_of: Option<String>,
}

impl ApiCause {
    /// Kubernetes 1.36's cause for a number that does not fit its `integer` schema's format
    /// (kube-openapi's `IsValueValidAgainstRange`, a plain error that apiextensions-apiserver turns
    /// into `field.Invalid(nil, "", …)`): `<nil>: Invalid value: "": Checked value must be of type
    /// integer with format int32 in spec.trainer.numNodes`. Without a format it says `(default
    /// format)`; the check is int64's then.
    pub(crate) fn format_range(path: &str, format: Option<&str>) -> ApiCause {
        let with = match format {
            Some(f @ ("int32" | "int64")) => format!("with format {f}"),
            _ => "(default format)".to_string(),
        };
        ApiCause {
            kind: Kind::Invalid,
            path: String::new(),
            value: Some(Value::String(String::new())),
            detail: format!("Checked value must be of type integer {with} in {path}"),
            rule: false,
            range_of: Some(path.to_string()),
        }
    }

    /// The field a range check of an integer's format named (its cause has none).
    pub fn range_of(&self) -> Option<&str> {
        self.range_of.as_deref()
    }

    /// The error type the API server reports this finding as.
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// Whether one of the CRD's CEL rules found it: its message is the rule's.
    pub fn from_rule(&self) -> bool {
        self.rule
    }
}

/// The `field.ErrorType` the API server reports a finding as: apiextensions-apiserver's
/// `kubeOpenAPIResultToFieldErrors` (kube-openapi's `required` → `Required`, `enum` →
/// `NotSupported`, `maxLength` → `TooLong`, `maxItems` and `maxProperties` → `TooMany`, a wrong
/// type or `format` → `TypeInvalid`, anything else → `Invalid`), the list-type check (`Duplicate`)
/// and a CEL rule's `reason` (`Invalid` unless it says `Forbidden`, `Required` or `Duplicate`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Required,
    TypeInvalid,
    NotSupported,
    TooLong,
    TooMany,
    Invalid,
    Duplicate,
    Forbidden,
}

impl Kind {
    /// Whether the API server skips the CEL rules when the schema check found this
    /// (apiextensions-apiserver's `hasBlockingErr`: not supported, required, too long, too many,
    /// wrong type).
    pub fn blocking(self) -> bool {
        matches!(self, Kind::NotSupported | Kind::Required | Kind::TooLong | Kind::TooMany | Kind::TypeInvalid)
    }

    /// `metav1.CauseType`, the `type` of the API server's cause (for the differential tests).
    pub fn cause_type(self) -> &'static str {
        match self {
            Kind::Required => "FieldValueRequired",
            Kind::TypeInvalid => "FieldValueTypeInvalid",
            Kind::NotSupported => "FieldValueNotSupported",
            Kind::TooLong => "FieldValueTooLong",
            Kind::TooMany => "FieldValueTooMany",
            Kind::Invalid => "FieldValueInvalid",
            Kind::Duplicate => "FieldValueDuplicate",
            Kind::Forbidden => "FieldValueForbidden",
        }
    }

    /// A CEL rule's `reason` (`FieldValueInvalid` when it has none).
    pub(crate) fn of_reason(reason: Option<&str>) -> Kind {
        match reason {
            Some("FieldValueForbidden") => Kind::Forbidden,
            Some("FieldValueRequired") => Kind::Required,
            Some("FieldValueDuplicate") => Kind::Duplicate,
            _ => Kind::Invalid,
        }
    }
}
