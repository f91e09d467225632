#!/usr/bin/env python3
"""Generate crates/core/src/trainer/core_v1.rs: the Kubernetes core/v1 and meta/v1 Go types a TrainJob embeds, as data.

Usage (from the repository root):

    python3 scripts/gen-core-types.py > crates/core/src/trainer/core_v1.rs

Options (all have defaults):

    --api-mirror PATH           bare git mirror of github.com/kubernetes/api
                                (default /work/.mirror/kubernetes+api/repo)
    --apimachinery-mirror PATH  bare git mirror of github.com/kubernetes/apimachinery, where meta/v1 lives
                                (default /work/.mirror/kubernetes+apimachinery/repo)
    --tag TAG                   k8s.io/api tag (default v0.36.2, what Kubeflow Trainer v2.3.0 builds with);
                                the apimachinery tag is the k8s.io/apimachinery version in that tag's go.mod
    --no-rustfmt                print the Rust unformatted instead of piping it through rustfmt

The script reads the Go sources with `git show`, parses the struct definitions, takes the transitive
closure of the root types below and prints one `pub(crate) static NAME: Struct` per Go struct. Its output is
committed; nothing runs it at build or test time. Python 3.11 standard library only.

Mapping (it drives Kubernetes' `equality.Semantic` comparison, see crates/core/src/trainer/model.rs):
  * fields in Go declaration order, JSON name from the `json:"..."` tag, `json:"-"` skipped,
    `json:",inline"` embedded structs flattened in place;
  * `*T` -> `Field::ptr`, anything else -> `Field::new`;
  * bool, int32, int64/int, float64, string and named string types, []byte (base64) -> scalars;
    metav1.Time/MicroTime, intstr.IntOrString, resource.Quantity, types.UID via EXTERNAL below;
  * []T -> Ty::List, map[K]V with a string key -> Ty::Map, named struct -> Ty::Struct;
  * no constraints: `validate` applies each release's CRD itself (crates/core/src/trainer/crd.rs), so required
    fields, bounds and enums are read from the CRD, not from the Go markers.
  * meta/v1.ObjectMeta is emitted in the reduced form CRDs embed (see OBJECT_META_FIELDS).
Any type it cannot resolve makes it fail with a non-zero exit naming the type.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass

CORE = "core/v1"
META = "meta/v1"

# Go package (as written in the source) -> the file holding its types.
SOURCES = {
    CORE: ("api", "core/v1/types.go"),
    META: ("apimachinery", "pkg/apis/meta/v1/types.go"),
}

# Import qualifiers used in the parsed files -> our package keys.
QUALIFIERS = {"metav1": META, "v1": META}

# Roots, in output order. (package, Go type name)
ROOTS = [
    (CORE, "EnvVar"),
    (CORE, "LocalObjectReference"),
    (CORE, "VolumeMount"),
    (CORE, "PodSchedulingGate"),
    (CORE, "Toleration"),
    (CORE, "Volume"),
    (CORE, "Affinity"),
    (CORE, "ResourceRequirements"),
    (CORE, "SecurityContext"),
    (CORE, "PodSecurityContext"),
    (META, "ObjectMeta"),
]

# Types defined outside the parsed files (or with custom JSON marshalling), mapped explicitly.
# Key: (package the reference is resolved in, qualified name as written).
EXTERNAL = {
    # apimachinery/pkg/api/resource: marshals as a string (or number), compared by value.
    (CORE, "resource.Quantity"): "Ty::Quantity",
    (META, "resource.Quantity"): "Ty::Quantity",
    # apimachinery/pkg/util/intstr: an int or a string.
    (CORE, "intstr.IntOrString"): "Ty::IntOrString",
    (META, "intstr.IntOrString"): "Ty::IntOrString",
    # apimachinery/pkg/types.UID is `type UID string`.
    (CORE, "types.UID"): "Ty::String",
    (META, "types.UID"): "Ty::String",
    # meta/v1 Time and MicroTime (time.go, micro_time.go) wrap time.Time and marshal as RFC 3339 strings.
    (META, "Time"): "Ty::DateTime",
    (META, "MicroTime"): "Ty::DateTime",
}

# Kubeflow Trainer's CRDs are generated with controller-gen's generateEmbeddedObjectMeta, which keeps
# only these ObjectMeta fields in embedded templates. OBJECT_META lists exactly these (in Go order),
# and every reference to meta/v1.ObjectMeta uses it.
OBJECT_META_FIELDS = {"labels", "annotations", "finalizers", "name", "namespace"}

SCALARS = {
    "bool": "Ty::Bool",
    "int32": "Ty::Int32",
    "int64": "Ty::Int64",
    "int": "Ty::Int64",
    "float64": "Ty::Float64",
    "string": "Ty::String",
}


class GenError(Exception):
    pass


@dataclass
class GoField:
    name: str | None  # None: embedded
    type: str
    tag: str
    doc: list[str]


@dataclass
class GoStruct:
    fields: list[GoField]
    error: str | None = None  # a field line we cannot parse: fatal only if the struct is reached


# ---------------------------------------------------------------------------------------------------
# Reading and parsing the Go source


def git_show(mirror: str, tag: str, path: str) -> str:
    try:
        return subprocess.run(
            ["git", "-C", mirror, "show", f"{tag}:{path}"], check=True, capture_output=True, text=True
        ).stdout
    except subprocess.CalledProcessError as e:
        raise GenError(f"git show {tag}:{path} in {mirror} failed: {e.stderr.strip()}") from e


def strip_block_comments(src: str) -> str:
    # Keep line structure so that doc-comment adjacency is unaffected elsewhere.
    return re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), src, flags=re.S)


TYPE_DECL = re.compile(r"^type\s+([A-Za-z_]\w*)\s+(=\s*)?(.+?)\s*$")


def parse_package(src: str, where: str) -> tuple[dict[str, GoStruct], dict[str, str]]:
    """Top-level `type X struct {...}` and `type X <expr>` declarations of one file."""
    structs: dict[str, GoStruct] = {}
    others: dict[str, str] = {}
    lines = strip_block_comments(src).split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("type ("):
            raise GenError(f"{where}:{i + 1}: grouped type declarations are not supported")
        m = TYPE_DECL.match(line)
        if not m:
            i += 1
            continue
        name, _alias, rest = m.groups()
        rest = re.sub(r"\s*//.*$", "", rest)
        if rest == "struct {":
            fields, error, i = parse_struct_body(lines, i + 1, f"{where}:{name}")
            structs[name] = GoStruct(fields, error)
            continue
        if rest == "struct{}":
            structs[name] = GoStruct([])
        elif "{" in rest:
            pass  # interface { ... } and the like: never referenced by API fields; resolving one fails
        else:
            others[name] = rest
        i += 1
    return structs, others


def parse_struct_body(lines: list[str], i: int, where: str) -> tuple[list[GoField], str | None, int]:
    fields: list[GoField] = []
    error: str | None = None
    doc: list[str] = []
    while True:
        if i >= len(lines):
            raise GenError(f"{where}: unterminated struct")
        line = lines[i].strip()
        i += 1
        if line == "}":
            return fields, error, i
        if not line:
            doc = []
            continue
        if line.startswith("//"):
            doc.append(line[2:].strip())
            continue
        m = re.fullmatch(r"([^`]*?)\s*(`[^`]*`)?\s*(//.*)?", line)
        parts = m.group(1).split() if m else []
        if not 1 <= len(parts) <= 2 or "{" in line.split("`")[0] or parts[0].endswith(","):
            error = error or f"{where}: cannot parse struct field line {line!r}"
            doc = []
            continue
        name, typ = (None, parts[0]) if len(parts) == 1 else parts
        tag = m.group(2)
        fields.append(GoField(name, typ, (tag or "").strip("`"), doc))
        doc = []


def json_tag(tag: str) -> tuple[str | None, set[str]]:
    m = re.search(r'(?:^|\s)json:"([^"]*)"', tag)
    if not m:
        return None, set()
    name, *opts = m.group(1).split(",")
    return name, set(opts)


def is_required(doc: list[str], json_opts: set[str]) -> bool:
    """Whether the CRD lists the field as required, by controller-gen's rule (Trainer's CRDs are generated
    by controller-gen): an explicit `+optional` / `+required` marker (or their kubebuilder:validation
    spellings) decides; otherwise a field is required unless its json tag has omitempty or omitzero.
    Pointer-ness does not matter: `ScaleIOVolumeSource.secretRef` is `*LocalObjectReference` without
    omitempty and the CRD requires it; `PodCertificateProjection.signerName` has omitempty and
    `+required`, and the CRD requires it."""
    markers = {m.group(1) for d in doc if (m := re.match(r"\+(?:kubebuilder:validation:)?(optional|required)\b", d, re.I))}
    markers = {m.lower() for m in markers}
    if len(markers) > 1:
        raise GenError(f"both +optional and +required in {doc}")
    if markers:
        return markers == {"required"}
    return not (json_opts & {"omitempty", "omitzero"})


# ---------------------------------------------------------------------------------------------------
# Resolving types


def screaming_snake(go_name: str) -> str:
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", go_name)
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", s)
    return s.upper()


class Generator:
    def __init__(self, packages: dict[str, tuple[dict[str, GoStruct], dict[str, str]]]):
        self.packages = packages
        self.order: list[tuple[str, str]] = []  # structs in output order
        self.rendered: dict[tuple[str, str], list[str]] = {}
        self.static_names: dict[str, tuple[str, str]] = {}

    def split(self, pkg: str, name: str) -> tuple[str, str]:
        """Resolve a possibly qualified type name to (package, bare name)."""
        if "." in name:
            qual, bare = name.split(".", 1)
            if qual not in QUALIFIERS:
                raise GenError(f"{pkg}: unresolvable type {name!r} (unknown package {qual!r})")
            return QUALIFIERS[qual], bare
        return pkg, name

    def static_for(self, pkg: str, name: str) -> str:
        key = (pkg, name)
        static = screaming_snake(name)
        if self.static_names.setdefault(static, key) != key:
            raise GenError(f"static name {static} is used by both {self.static_names[static]} and {key}")
        if key not in self.rendered:
            self.rendered[key] = []  # placeholder against cycles
            self.order.append(key)
            self.rendered[key] = self.render_struct(pkg, name)
        return static

    def ty(self, pkg: str, expr: str, ctx: str) -> str:
        """Rust `Ty` expression for a Go type expression (pointer already stripped)."""
        expr = expr.strip()
        if expr.startswith("*"):
            raise GenError(f"{ctx}: pointer inside a composite type ({expr!r}) is not supported")
        if expr == "[]byte":
            return "Ty::String"  # base64 in JSON
        if expr.startswith("[]"):
            return f"Ty::List(&{self.ty(pkg, expr[2:], ctx)})"
        m = re.fullmatch(r"map\[([^\]]+)\](.+)", expr)
        if m:
            key = self.ty(pkg, m.group(1), ctx)
            if key != "Ty::String":
                raise GenError(f"{ctx}: map key type {m.group(1)!r} is not a string type")
            return f"Ty::Map(&{self.ty(pkg, m.group(2), ctx)})"
        if expr in SCALARS:
            return SCALARS[expr]
        if (pkg, expr) in EXTERNAL:
            return EXTERNAL[(pkg, expr)]
        if not re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)?", expr):
            raise GenError(f"{ctx}: unsupported Go type expression {expr!r}")
        tpkg, bare = self.split(pkg, expr)
        if (tpkg, bare) in EXTERNAL:
            return EXTERNAL[(tpkg, bare)]
        structs, others = self.packages[tpkg]
        if bare in structs:
            return f"Ty::Struct(&{self.static_for(tpkg, bare)})"
        if bare in others:
            return self.ty(tpkg, others[bare], f"{ctx} -> {tpkg}.{bare}")
        raise GenError(f"{ctx}: unresolvable type {tpkg}.{bare}")

    def fields(self, pkg: str, name: str) -> list[str]:
        structs, _ = self.packages[pkg]
        if name not in structs:
            raise GenError(f"unresolvable struct {pkg}.{name}")
        if structs[name].error:
            raise GenError(structs[name].error)
        out: list[str] = []
        for f in structs[name].fields:
            ctx = f"{pkg}.{name}.{f.name or f.type}"
            jname, opts = json_tag(f.tag)
            if jname == "-":
                continue
            pointer = f.type.startswith("*")
            base = f.type[1:] if pointer else f.type
            if f.name is None and jname == "" and "inline" in opts:
                if pointer:
                    raise GenError(f"{ctx}: pointer to an inline struct is not supported")
                ipkg, ibare = self.split(pkg, base)
                out.extend(self.fields(ipkg, ibare))
                continue
            if not jname:
                raise GenError(f"{ctx}: field without a json name (tag {f.tag!r})")
            if (pkg, name) == (META, "ObjectMeta") and jname not in OBJECT_META_FIELDS:
                continue  # the reduced form: the other fields (and the types they reach) are left out
            ty = self.ty(pkg, base, ctx)
            ctor = "ptr" if pointer else "new"
            out.append(f'Field::{ctor}("{jname}", {ty})')
        return out

    def render_struct(self, pkg: str, name: str) -> list[str]:
        fields = self.fields(pkg, name)
        if (pkg, name) == (META, "ObjectMeta"):
            got = {re.match(r'Field::\w+\("([^"]+)"', f).group(1) for f in fields}
            if got != OBJECT_META_FIELDS or any(not f.startswith("Field::new(") or "required" in f for f in fields):
                raise GenError(f"meta/v1.ObjectMeta: expected optional non-pointer {sorted(OBJECT_META_FIELDS)}, got {fields}")
        return fields

    def generate(self) -> str:
        for pkg, name in ROOTS:
            self.static_for(pkg, name)
        out = []
        for pkg, name in self.order:
            static = screaming_snake(name)
            note = ""
            if (pkg, name) == (META, "ObjectMeta"):
                note = "/// The reduced ObjectMeta CRDs embed in templates (controller-gen's generateEmbeddedObjectMeta).\n"
            body = "".join(f"        {f},\n" for f in self.rendered[(pkg, name)])
            out.append(
                f"{note}pub(crate) static {static}: Struct = Struct {{\n"
                f'    name: "{pkg}.{name}",\n'
                f"    fields: &[\n{body}    ],\n"
                f"}};\n"
            )
        return "\n".join(out)


# ---------------------------------------------------------------------------------------------------


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--api-mirror", default="/work/.mirror/kubernetes+api/repo")
    ap.add_argument("--apimachinery-mirror", default="/work/.mirror/kubernetes+apimachinery/repo")
    ap.add_argument("--tag", default="v0.36.2")
    ap.add_argument("--no-rustfmt", action="store_true")
    args = ap.parse_args()

    try:
        gomod = git_show(args.api_mirror, args.tag, "go.mod")
        m = re.search(r"^\s*k8s\.io/apimachinery\s+(\S+)", gomod, re.M)
        if not m:
            raise GenError(f"no k8s.io/apimachinery requirement in k8s.io/api {args.tag} go.mod")
        machinery_tag = m.group(1)
        mirrors = {"api": (args.api_mirror, args.tag), "apimachinery": (args.apimachinery_mirror, machinery_tag)}
        packages = {}
        for pkg, (repo, path) in SOURCES.items():
            mirror, tag = mirrors[repo]
            packages[pkg] = parse_package(git_show(mirror, tag, path), f"{repo}@{tag}:{path}")
        gen = Generator(packages)
        body = gen.generate()
    except GenError as e:
        print(f"gen-core-types: error: {e}", file=sys.stderr)
        return 1

    header = (
        f"//! Kubernetes core/v1 and meta/v1 types as data ({len(gen.order)} structs).\n"
        f"//!\n"
        f"//! Generated by `python3 scripts/gen-core-types.py > crates/core/src/trainer/core_v1.rs` from\n"
        f"//! k8s.io/api {args.tag} (core/v1/types.go) and k8s.io/apimachinery {machinery_tag}\n"
        f"//! (pkg/apis/meta/v1/types.go). Do not edit by hand.\n"
        f"\n"
        f"use super::model::{{Field, Struct, Ty}};\n"
        f"\n"
    )
    text = header + body
    if not args.no_rustfmt:
        rustfmt = shutil.which("rustfmt")
        if rustfmt is None:
            print("gen-core-types: error: rustfmt not found (use --no-rustfmt to skip formatting)", file=sys.stderr)
            return 1
        config = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "rustfmt.toml")
        cmd = [rustfmt, "--edition", "2024", "--emit", "stdout"]
        if os.path.exists(config):
            cmd += ["--config-path", config]
        r = subprocess.run(cmd, input=text, capture_output=True, text=True)
        if r.returncode != 0:
            print(f"gen-core-types: error: rustfmt failed:\n{r.stderr}", file=sys.stderr)
            return 1
        text = r.stdout
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
