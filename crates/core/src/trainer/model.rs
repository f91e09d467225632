//! The building blocks of a release's TrainJob model: Go types as data (built from each release's
//! generated types file, [`super::types`]).
//!
//! Each Go struct becomes a [`Struct`] listing its JSON fields; each field says its [`Ty`] and
//! whether the Go field is a pointer (which decides whether "present but empty" differs from
//! "absent" under Kubernetes' `equality.Semantic`). The CRD's constraints are not here: `validate`
//! applies each release's CRD itself ([`super::crd`]).

/// The type of a field, as the Go type and the CRD schema give it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Ty {
    Bool,
    Int32,
    Int64,
    /// `float64`, compared by value. None of the releases' types has one today.
    Float64,
    String,
    /// `metav1.Time`: an RFC 3339 date-time string.
    DateTime,
    /// `intstr.IntOrString`: an integer or a string, and `1` is not `"1"`.
    IntOrString,
    /// `resource.Quantity`: a string or number, compared by value (`1Gi` equals `1073741824`).
    Quantity,
    /// `[]T`: absent, `null` and `[]` are one value.
    List(&'static Ty),
    /// `map[string]T`: absent, `null` and `{}` are one value.
    Map(&'static Ty),
    Struct(&'static Struct),
}

/// A Go struct: its JSON fields. Fields the struct does not list are not part of the release's
/// schema: the API server prunes or rejects them.
#[derive(Debug)]
pub(crate) struct Struct {
    /// The Go type's name, e.g. `core/v1.Toleration`, for messages and tests.
    pub name: &'static str,
    pub(crate) fields: &'static [Field],
}

/// One JSON field of a [`Struct`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Field {
    /// The JSON name.
    pub(crate) json: &'static str,
    pub(crate) ty: Ty,
    /// The Go field is a pointer (`*T`): set to its zero value (`0`, `""`, `false`, `{}`) it still
    /// differs from absent. A non-pointer field at its zero value equals absent.
    pub(crate) pointer: bool,
}

impl Struct {
    pub(crate) fn field(&'static self, json: &str) -> Option<&'static Field> {
        self.fields.iter().find(|f| f.json == json)
    }
}
