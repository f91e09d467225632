// The oracle: upstream's own code answering, for one Kubeflow Trainer release, what the API server
// and Trainer's webhook say about a TrainJob write. One Go module per Trainer tag (one build cannot
// link two versions of github.com/kubeflow/trainer/v2); this package is shared by all of them
// (each tag's go.mod replaces trainguard.local/oracle/common with this directory). The
// release-specific part is each tag's plugin.go, handed to [Main] as a [Release].
//
//	oracle serve CRD.yaml   JSON lines on stdin, one answer line each on stdout
//	oracle types CRD.yaml   the release's Go types as Trainer decodes them, pruned to the CRD (JSON)
//	oracle versions         the module versions this build links, as JSON
//	oracle schema CRD.yaml  the CRD's openAPIV3Schema as JSON (what `make generate` commits)
//
// A case is {"id", "old" (null on CREATE), "new", "jobset" (a JobSet object or null)}. The answer
// is {"id", "decode", "unknown", "schema", "changed", "plugin"}:
//   - decode: the object is not a JSON object (the API server answers 400);
//   - unknown: the field paths the API server prunes, which kubectl's default strict field
//     validation refuses (400 BadRequest, `unknown field "spec.x"`);
//   - schema: the causes of the API server's 422 (ObjectMeta, structural schema, list types,
//     CEL rules with transition rules and ratcheting on UPDATE), after pruning and defaulting,
//     as rest.BeforeCreate / rest.BeforeUpdate report them, on the object as the handler's field
//     manager leaves it (managed fields it cannot decode replaced, before validation);
//   - changed: on UPDATE, the Forbidden errors of Trainer's JobSet plugin (the overrides
//     immutability check) after Trainer's defaulter, with the JobSet given held by a fake client;
//   - plugin: the plugin's other errors (runtime template consistency), for information.
package oracle

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"runtime/debug"
	"sort"
	"strings"

	apiextensions "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apiextensions-apiserver/pkg/crdserverscheme"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/validation/field"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	"sigs.k8s.io/yaml"
)

type caseIn struct {
	ID     string          `json:"id"`
	Old    json.RawMessage `json:"old"`
	New    json.RawMessage `json:"new"`
	JobSet json.RawMessage `json:"jobset"`
}

type FieldErr struct {
	Type   string `json:"type"`
	Field  string `json:"field"`
	Detail string `json:"detail"`
}

type caseOut struct {
	ID      string     `json:"id"`
	Decode  string     `json:"decode,omitempty"`
	Unknown []string   `json:"unknown"`
	Schema  []FieldErr `json:"schema"`
	Changed []FieldErr `json:"changed"`
	Plugin  []FieldErr `json:"plugin"`
	// PluginError: the objects could not be read into Trainer's Go types (the API server refuses
	// such an object before any webhook sees it).
	PluginError string `json:"plugin_error,omitempty"`
}

// Strategy is the CR registry's strategy, for both verbs.
type Strategy interface {
	rest.RESTCreateStrategy
	rest.RESTUpdateStrategy
}

// server is the API server's view of one CRD version.
type server struct {
	structural *structuralschema.Structural
	strategy   Strategy
	gvk        schema.GroupVersionKind
}

// Judge is Trainer's JobSet plugin run on an UPDATE (nothing on a CREATE: old is nil): its
// overrides-immutability errors, its other errors, and why the objects could not be read.
type Judge func(oldU, newU *unstructured.Unstructured, rawJobSet json.RawMessage) (changed, other []FieldErr, problem string)

// Release is what differs between Trainer tags.
type Release struct {
	// SpecType is the tag's TrainJobSpec, for the `types` command.
	SpecType func() any
	// NewStrategy is the CR registry's strategy as the tag's apiextensions-apiserver builds it.
	NewStrategy func(typer apiruntime.ObjectTyper, gvk schema.GroupVersionKind, validator, statusValidator apiservervalidation.SchemaValidator, ss *structuralschema.Structural, status *apiextensions.CustomResourceSubresourceStatus) Strategy
	// NewJudge sets up Trainer's plugin once per `serve`.
	NewJudge func() Judge
}

var release Release

// Main runs the oracle command line for one release.
func Main(r Release) {
	release = r
	if len(os.Args) < 2 {
		fail("usage: oracle serve CRD.yaml | types CRD.yaml | schema CRD.yaml | versions")
	}
	switch os.Args[1] {
	case "serve":
		if len(os.Args) != 3 {
			fail("usage: oracle serve CRD.yaml")
		}
		serve(os.Args[2])
	case "types":
		if len(os.Args) != 3 {
			fail("usage: oracle types CRD.yaml")
		}
		out, err := json.MarshalIndent(describeTypes(os.Args[2]), "", " ")
		check(err)
		fmt.Println(string(out))
	case "versions":
		versions()
	case "schema":
		if len(os.Args) != 3 {
			fail("usage: oracle schema CRD.yaml")
		}
		printSchema(os.Args[2])
	default:
		fail("unknown command " + os.Args[1])
	}
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "oracle:", msg)
	os.Exit(2)
}

func check(err error) {
	if err != nil {
		fail(err.Error())
	}
}

func versions() {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		fail("no build info")
	}
	out := map[string]string{"go": info.GoVersion}
	for _, m := range info.Deps {
		out[m.Path] = m.Version
	}
	b, err := json.MarshalIndent(out, "", "  ")
	check(err)
	fmt.Println(string(b))
}

func printSchema(crdPath string) {
	schema := crdSchema(crdPath)
	dropDescriptions(schema)
	out, err := json.MarshalIndent(schema, "", " ")
	check(err)
	fmt.Println(string(out))
}

// dropDescriptions removes the schemas' prose (a string "description"; a property named
// "description" is an object and stays).
func dropDescriptions(node any) {
	switch n := node.(type) {
	case map[string]any:
		if _, ok := n["description"].(string); ok {
			delete(n, "description")
		}
		for _, v := range n {
			dropDescriptions(v)
		}
	case []any:
		for _, v := range n {
			dropDescriptions(v)
		}
	}
}

func newServer(crdPath string) *server {
	raw, err := os.ReadFile(crdPath)
	check(err)
	var crd apiextensionsv1.CustomResourceDefinition
	check(yaml.UnmarshalStrict(raw, &crd))
	apiextensionsv1.SetObjectDefaults_CustomResourceDefinition(&crd)
	var internal apiextensions.CustomResourceDefinition
	check(apiextensionsv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(&crd, &internal, nil))
	if len(internal.Spec.Versions) != 1 {
		fail("expected one CRD version")
	}
	version := internal.Spec.Versions[0]
	validation := version.Schema
	if validation == nil {
		validation = internal.Spec.Validation
	}
	ss, err := structuralschema.NewStructural(validation.OpenAPIV3Schema)
	check(err)
	validator, _, err := apiservervalidation.NewSchemaValidator(validation.OpenAPIV3Schema)
	check(err)
	var statusValidator apiservervalidation.SchemaValidator
	if status, ok := validation.OpenAPIV3Schema.Properties["status"]; ok {
		statusValidator, _, err = apiservervalidation.NewSchemaValidator(&status)
		check(err)
	}
	subresources := version.Subresources
	if subresources == nil {
		subresources = internal.Spec.Subresources
	}
	var status *apiextensions.CustomResourceSubresourceStatus
	if subresources != nil {
		status = subresources.Status
	}
	gvk := schema.GroupVersionKind{Group: internal.Spec.Group, Version: version.Name, Kind: internal.Spec.Names.Kind}
	strategy := release.NewStrategy(crdserverscheme.NewUnstructuredObjectTyper(), gvk, validator, statusValidator, ss, status)
	return &server{structural: ss, strategy: strategy, gvk: gvk}
}

func serve(crdPath string) {
	srv := newServer(crdPath)
	plugin := release.NewJudge()
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 0, 1<<20), 64<<20)
	out := bufio.NewWriter(os.Stdout)
	enc := json.NewEncoder(out)
	for in.Scan() {
		var c caseIn
		if err := json.Unmarshal(in.Bytes(), &c); err != nil {
			fail("a case that is not JSON: " + err.Error())
		}
		check(enc.Encode(srv.judge(c, plugin)))
		check(out.Flush())
	}
	check(in.Err())
}

// decode reads an object as the API server's CR handler does: JSON into unstructured (integers
// as int64, other numbers as float64), then the schema coercer (ObjectMeta, pruning, metadata
// coercion) and the structural defaulter. It returns the pruned field paths.
func (s *server) decode(raw json.RawMessage) (*unstructured.Unstructured, []string, error) {
	var obj map[string]interface{}
	if err := utiljson.Unmarshal(raw, &obj); err != nil {
		return nil, nil, err
	}
	if obj == nil {
		return nil, nil, fmt.Errorf("not an object")
	}
	u := &unstructured.Unstructured{Object: obj}
	var unknown []string
	kind, foundKind, _ := unstructured.NestedString(obj, "kind")
	apiVersion, foundAPIVersion, _ := unstructured.NestedString(obj, "apiVersion")
	objectMeta, foundObjectMeta, metaUnknown, err := schemaobjectmeta.GetObjectMetaWithOptions(obj, schemaobjectmeta.ObjectMetaOptions{ReturnUnknownFieldPaths: true})
	if err != nil {
		return nil, nil, err
	}
	unknown = append(unknown, metaUnknown...)
	unknown = append(unknown, structuralpruning.PruneWithOptions(obj, s.structural, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})...)
	structuraldefaulting.PruneNonNullableNullsWithoutDefaults(obj, s.structural)
	coerceErr, paths := schemaobjectmeta.CoerceWithOptions(nil, obj, s.structural, false, schemaobjectmeta.CoerceOptions{ReturnUnknownFieldPaths: true})
	if coerceErr != nil {
		return nil, nil, coerceErr
	}
	unknown = append(unknown, paths...)
	if foundKind {
		u.SetKind(kind)
	}
	if foundAPIVersion {
		u.SetAPIVersion(apiVersion)
	}
	if foundObjectMeta {
		if err := schemaobjectmeta.SetObjectMeta(obj, objectMeta); err != nil {
			return nil, nil, err
		}
	}
	structuraldefaulting.Default(obj, s.structural)
	sort.Strings(unknown)
	return u, unknown, nil
}

func (s *server) judge(c caseIn, plugin Judge) (out caseOut) {
	out = caseOut{ID: c.ID, Unknown: []string{}, Schema: []FieldErr{}, Changed: []FieldErr{}, Plugin: []FieldErr{}}
	defer func() {
		if r := recover(); r != nil {
			out.Decode = fmt.Sprintf("panic: %v", r)
			fmt.Fprintf(os.Stderr, "oracle: case %s: panic: %v\n%s", c.ID, r, debug.Stack())
		}
	}()
	newObj, unknown, err := s.decode(c.New)
	if err != nil {
		out.Decode = err.Error()
		return out
	}
	if unknown != nil {
		out.Unknown = unknown
	}
	var oldObj *unstructured.Unstructured
	if len(c.Old) > 0 && string(c.Old) != "null" {
		if oldObj, _, err = s.decode(c.Old); err != nil {
			out.Decode = "old: " + err.Error()
			return out
		}
	}
	namespace := newObj.GetNamespace()
	if namespace == "" {
		namespace = "default"
		newObj.SetNamespace(namespace)
	}
	ctx := genericapirequest.WithNamespace(context.Background(), namespace)
	fieldManagerReplaces(newObj, oldObj)
	var verdict error
	if oldObj == nil {
		if accessor, err := meta.Accessor(newObj); err == nil {
			rest.FillObjectMetaSystemFields(accessor)
		}
		if newObj.GetName() == "" && newObj.GetGenerateName() != "" {
			newObj.SetName(newObj.GetGenerateName() + "x0000")
		}
		verdict = rest.BeforeCreate(s.strategy, ctx, newObj.DeepCopy())
	} else {
		if oldObj.GetNamespace() == "" {
			oldObj.SetNamespace(namespace)
		}
		// The stored object has a resourceVersion, and kubectl sends it back.
		if oldObj.GetResourceVersion() == "" {
			oldObj.SetResourceVersion("1")
		}
		if newObj.GetResourceVersion() == "" {
			newObj.SetResourceVersion(oldObj.GetResourceVersion())
		}
		verdict = rest.BeforeUpdate(s.strategy, ctx, newObj.DeepCopy(), oldObj.DeepCopy())
	}
	out.Schema = causes(verdict)
	out.Changed, out.Plugin, out.PluginError = plugin(oldObj, newObj, c.JobSet)
	return out
}

// fieldManagerReplaces does to newObj's managed fields what the handler's field manager does
// before validation (decodeLiveOrNew): a reset (`[]`, `[{}]`) leaves none; a list left out, or one
// it cannot decode, is replaced with the stored object's (none on CREATE). The entry the field
// manager then adds for the request's own manager is always valid, so it is left out here.
func fieldManagerReplaces(newObj, oldObj *unstructured.Unstructured) {
	managed := newObj.GetManagedFields()
	if managed != nil && (len(managed) == 0 || (len(managed) == 1 && reflect.DeepEqual(managed[0], metav1.ManagedFieldsEntry{}))) {
		newObj.SetManagedFields(nil)
		return
	}
	if len(managed) > 0 && managedfields.ValidateManagedFields(managed) == nil {
		return
	}
	var stored []metav1.ManagedFieldsEntry
	if oldObj != nil {
		if entries := oldObj.GetManagedFields(); managedfields.ValidateManagedFields(entries) == nil {
			stored = entries
		}
	}
	newObj.SetManagedFields(stored)
}

func causes(err error) []FieldErr {
	list := []FieldErr{}
	if err == nil {
		return list
	}
	status, ok := err.(apierrors.APIStatus)
	if !ok || status.Status().Details == nil || len(status.Status().Details.Causes) == 0 {
		return append(list, FieldErr{Type: "Error", Detail: err.Error()})
	}
	for _, cause := range status.Status().Details.Causes {
		list = append(list, FieldErr{Type: string(cause.Type), Field: cause.Field, Detail: cause.Message})
	}
	return list
}

func FieldErrs(errs field.ErrorList) []FieldErr {
	list := []FieldErr{}
	for _, e := range errs {
		list = append(list, FieldErr{Type: string(e.Type), Field: e.Field, Detail: e.ErrorBody()})
	}
	return list
}

// typesFile is what `oracle types CRD.yaml` prints and `make generate` commits as
// crates/core/src/trainer/types/<tag>.json: the release's TrainJobSpec and every struct it reaches,
// as Trainer decodes them (Go types: JSON names, pointer-ness) after the API server has pruned
// what the CRD does not have (a Go field with no schema in the CRD never reaches Trainer).
type typesFile struct {
	Trainer string `json:"trainer"`
	// API is the k8s.io/api version the tag builds with: its core/v1 types are these.
	API   string                 `json:"k8s.io/api"`
	Root  string                 `json:"root"`
	Types map[string][]fieldInfo `json:"types"`
}

type fieldInfo struct {
	JSON    string `json:"json"`
	Pointer bool   `json:"pointer,omitempty"`
	Type    string `json:"type"`
}

// describeTypes walks the release's TrainJobSpec beside the CRD's schema of `spec`. A type's
// string is a scalar (bool, int32, int64, float64, string, bytes), time, intorstring, quantity,
// []T, map[string]T, or a struct's name.
func describeTypes(crdPath string) typesFile {
	spec := crdSchema(crdPath)["properties"].(map[string]any)["spec"].(map[string]any)
	out := typesFile{Types: map[string][]fieldInfo{}}
	for _, name := range []string{"github.com/kubeflow/trainer/v2", "k8s.io/api"} {
		version := moduleVersion(name)
		if name == "k8s.io/api" {
			out.API = version
		} else {
			out.Trainer = version
		}
	}
	building := map[string]bool{}
	var walk func(t reflect.Type, node map[string]any) string
	walk = func(t reflect.Type, node map[string]any) string {
		switch t.Kind() {
		case reflect.Pointer:
			return walk(t.Elem(), node)
		case reflect.Slice:
			if t.Elem().Kind() == reflect.Uint8 {
				return "bytes"
			}
			return "[]" + walk(t.Elem(), child(node, "items"))
		case reflect.Map:
			if t.Key().Kind() != reflect.String {
				fail("a map whose key is not a string: " + t.String())
			}
			return "map[string]" + walk(t.Elem(), child(node, "additionalProperties"))
		case reflect.Bool:
			return "bool"
		case reflect.String:
			return "string"
		case reflect.Int32, reflect.Uint16, reflect.Uint8, reflect.Int16, reflect.Int8:
			return "int32"
		case reflect.Int64, reflect.Int, reflect.Uint32, reflect.Uint64:
			return "int64"
		case reflect.Float32, reflect.Float64:
			return "float64"
		case reflect.Struct:
			name := typeName(t)
			switch name {
			case "meta/v1.Time", "meta/v1.MicroTime":
				return "time"
			case "util/intstr.IntOrString":
				return "intorstring"
			case "api/resource.Quantity":
				return "quantity"
			}
			if reflect.PointerTo(t).Implements(reflect.TypeOf((*json.Unmarshaler)(nil)).Elem()) {
				fail("a struct with its own JSON decoding the model cannot read: " + name)
			}
			if node == nil {
				fail("no CRD schema for " + name)
			}
			if building[name] {
				// A type that reaches itself: its fields are being listed further up.
				return name
			}
			building[name] = true
			fields := structFields(t, node, walk)
			delete(building, name)
			if seen, ok := out.Types[name]; ok && !sameFields(seen, fields) {
				fail("the CRD keeps different fields of " + name + " at two places")
			}
			out.Types[name] = fields
			return name
		}
		fail("unhandled Go type " + t.String())
		return ""
	}
	out.Root = walk(reflect.TypeOf(release.SpecType()), spec)
	return out
}

// structFields lists t's JSON fields in declaration order (embedded inline structs flattened),
// keeping those the CRD's schema `node` has.
func structFields(t reflect.Type, node map[string]any, walk func(reflect.Type, map[string]any) string) []fieldInfo {
	properties, _ := node["properties"].(map[string]any)
	fields := []fieldInfo{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name := strings.Split(tag, ",")[0]
		if name == "-" || !f.IsExported() {
			continue
		}
		if f.Anonymous && (name == "" || strings.Contains(tag, "inline")) {
			inner := f.Type
			if inner.Kind() == reflect.Pointer {
				inner = inner.Elem()
			}
			fields = append(fields, structFields(inner, node, walk)...)
			continue
		}
		if name == "" {
			name = f.Name
		}
		schema, kept := properties[name].(map[string]any)
		if !kept {
			continue
		}
		fields = append(fields, fieldInfo{JSON: name, Pointer: f.Type.Kind() == reflect.Pointer, Type: walk(f.Type, schema)})
	}
	return fields
}

func child(node map[string]any, key string) map[string]any {
	c, _ := node[key].(map[string]any)
	return c
}

func sameFields(a, b []fieldInfo) bool {
	return reflect.DeepEqual(a, b)
}

// crdSchema is the CRD's openAPIV3Schema (its one version).
func crdSchema(crdPath string) map[string]any {
	raw, err := os.ReadFile(crdPath)
	check(err)
	var crd struct {
		Spec struct {
			Versions []struct {
				Schema struct {
					OpenAPIV3Schema map[string]any `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	check(yaml.Unmarshal(raw, &crd))
	if len(crd.Spec.Versions) != 1 {
		fail("expected one CRD version")
	}
	return crd.Spec.Versions[0].Schema.OpenAPIV3Schema
}

// moduleVersion is the version of the module this build links.
func moduleVersion(path string) string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		fail("no build info")
	}
	for _, m := range info.Deps {
		if m.Path == path {
			if m.Replace != nil {
				return m.Replace.Version
			}
			return m.Version
		}
	}
	fail("this build does not link " + path)
	return ""
}

// typeName is "<last two path elements>.<Name>", e.g. core/v1.Container, trainer/v1alpha1.Trainer.
func typeName(t reflect.Type) string {
	parts := strings.Split(t.PkgPath(), "/")
	if len(parts) >= 2 {
		parts = parts[len(parts)-2:]
	}
	return strings.Join(parts, "/") + "." + t.Name()
}
