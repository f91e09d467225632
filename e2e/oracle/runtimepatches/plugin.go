// The part of the oracle specific to the Kubeflow Trainer releases whose overrides field is
// runtimePatches (v2.2.1 and v2.3.0: the same source, each tag's module linking its own Trainer).
// Its go.mod requires the oldest of them; each tag's module raises the versions to its own.
package runtimepatches

import (
	oracle "trainguard.local/oracle/common"

	"context"
	"encoding/json"
	"time"

	apiextensions "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apiextensions-apiserver/pkg/registry/customresource"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
	batchv1ac "k8s.io/client-go/applyconfigurations/batch/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	jobsetv1alpha2ac "sigs.k8s.io/jobset/client-go/applyconfiguration/jobset/v1alpha2"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"github.com/kubeflow/trainer/v2/pkg/constants"
	"github.com/kubeflow/trainer/v2/pkg/runtime"
	"github.com/kubeflow/trainer/v2/pkg/runtime/framework/plugins/jobset"
	jobsetconsts "github.com/kubeflow/trainer/v2/pkg/runtime/framework/plugins/jobset/constants"
)

// The overrides field this release has, as the plugin's errors name it.
const overridesPath = "spec.runtimePatches"

func specType() any { return trainer.TrainJobSpec{} }

func newStrategy(typer apiruntime.ObjectTyper, gvk schema.GroupVersionKind, validator, statusValidator apiservervalidation.SchemaValidator, ss *structuralschema.Structural, status *apiextensions.CustomResourceSubresourceStatus) oracle.Strategy {
	return customresource.NewStrategy(typer, true, gvk, validator, statusValidator, ss, status, nil, nil)
}

type plugin struct {
	scheme *apiruntime.Scheme
}

func newPlugin() *plugin {
	scheme := apiruntime.NewScheme()
	if err := jobsetv1alpha2.AddToScheme(scheme); err != nil {
		panic(err)
	}
	if err := trainer.AddToScheme(scheme); err != nil {
		panic(err)
	}
	return &plugin{scheme: scheme}
}

func toTrainJob(u *unstructured.Unstructured) (*trainer.TrainJob, error) {
	var job trainer.TrainJob
	raw, err := json.Marshal(u.Object)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(raw, &job); err != nil {
		return nil, err
	}
	return &job, nil
}

// judge runs Trainer's defaulter, then the JobSet plugin's Validate, on an UPDATE.
func (p *plugin) judge(oldU, newU *unstructured.Unstructured, rawJobSet json.RawMessage) (changed, other []oracle.FieldErr, problem string) {
	changed, other = []oracle.FieldErr{}, []oracle.FieldErr{}
	if oldU == nil {
		return changed, other, ""
	}
	oldJob, err := toTrainJob(oldU)
	if err != nil {
		return changed, other, "old: " + err.Error()
	}
	newJob, err := toTrainJob(newU)
	if err != nil {
		return changed, other, "new: " + err.Error()
	}
	defaultTrainJob(oldJob, newJob, metav1.NewTime(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)))
	builder := fake.NewClientBuilder().WithScheme(p.scheme)
	if len(rawJobSet) > 0 && string(rawJobSet) != "null" {
		var js jobsetv1alpha2.JobSet
		if err := json.Unmarshal(rawJobSet, &js); err != nil {
			return changed, other, "jobset: " + err.Error()
		}
		js.Name, js.Namespace = newJob.Name, newJob.Namespace
		builder = builder.WithObjects(&js).WithStatusSubresource(&js)
	}
	ctx := context.Background()
	pl, err := jobset.New(ctx, builder.Build(), nil, nil)
	if err != nil {
		return changed, other, err.Error()
	}
	info := runtime.NewInfo(runtime.WithTemplateSpecObjApply(template(oldJob, newJob)))
	_, errs := pl.(*jobset.JobSet).Validate(ctx, info, oldJob, newJob)
	for _, e := range errs {
		if e.Type == field.ErrorTypeForbidden && e.Field == overridesPath {
			changed = append(changed, oracle.FieldErrs(field.ErrorList{e})...)
		} else {
			other = append(other, oracle.FieldErrs(field.ErrorList{e})...)
		}
	}
	return changed, other, ""
}

// template is a runtime's JobSet template that has every replicated job and container the two
// objects name, so that Validate reaches its immutability check with nothing else to report.
func template(jobs ...*trainer.TrainJob) *jobsetv1alpha2ac.JobSetSpecApplyConfiguration {
	containers := map[string]sets.Set[string]{}
	add := func(rjob string, names ...string) {
		if containers[rjob] == nil {
			containers[rjob] = sets.New[string]()
		}
		containers[rjob].Insert(names...)
	}
	add(constants.Node, constants.Node)
	add(constants.DatasetInitializer, constants.DatasetInitializer)
	add(constants.ModelInitializer, constants.ModelInitializer)
	for _, job := range jobs {
		for _, patch := range job.Spec.RuntimePatches {
			if patch.TrainingRuntimeSpec == nil || patch.TrainingRuntimeSpec.Template == nil || patch.TrainingRuntimeSpec.Template.Spec == nil {
				continue
			}
			for _, rjob := range patch.TrainingRuntimeSpec.Template.Spec.ReplicatedJobs {
				add(rjob.Name)
				if rjob.Template == nil || rjob.Template.Spec == nil || rjob.Template.Spec.Template == nil || rjob.Template.Spec.Template.Spec == nil {
					continue
				}
				for _, c := range rjob.Template.Spec.Template.Spec.InitContainers {
					add(rjob.Name, c.Name)
				}
				for _, c := range rjob.Template.Spec.Template.Spec.Containers {
					add(rjob.Name, c.Name)
				}
			}
		}
	}
	spec := jobsetv1alpha2ac.JobSetSpec()
	for _, rjob := range sets.List(sets.KeySet(containers)) {
		pod := corev1ac.PodSpec()
		for _, name := range sets.List(containers[rjob]) {
			c := corev1ac.Container().WithName(name)
			if name == constants.DatasetInitializer || name == constants.ModelInitializer {
				c = c.WithVolumeMounts(corev1ac.VolumeMount().WithName(jobsetconsts.VolumeNameInitializer))
			}
			pod = pod.WithContainers(c)
		}
		spec = spec.WithReplicatedJobs(jobsetv1alpha2ac.ReplicatedJob().WithName(rjob).
			WithTemplate(batchv1ac.JobTemplateSpec().WithSpec(batchv1ac.JobSpec().
				WithTemplate(corev1ac.PodTemplateSpec().WithSpec(pod)))))
	}
	return spec
}

// defaultTrainJob is Trainer's TrainJobDefaulter.Default (v2.2.1 and v2.3.0) on an UPDATE
// (pkg/webhooks/trainjob_webhook.go; its clock is an unexported field, so the body is repeated
// here with a fixed clock): a patch whose content is unchanged keeps its old time, any other gets
// a new one.
func defaultTrainJob(oldObj, trainJob *trainer.TrainJob, now metav1.Time) {
	oldByManager := make(map[string]trainer.RuntimePatch, len(oldObj.Spec.RuntimePatches))
	for _, p := range oldObj.Spec.RuntimePatches {
		oldByManager[p.Manager] = p
	}
	for i := range trainJob.Spec.RuntimePatches {
		patch := &trainJob.Spec.RuntimePatches[i]
		if old, ok := oldByManager[patch.Manager]; ok {
			oldCmp, newCmp := old, *patch
			oldCmp.Time, newCmp.Time = nil, nil
			if equality.Semantic.DeepEqual(oldCmp, newCmp) {
				patch.Time = old.Time
			} else {
				patch.Time = &now
			}
		} else if patch.Time == nil {
			patch.Time = &now
		}
	}
}

// Release is what oracle.Main needs from this release line.
func Release() oracle.Release {
	return oracle.Release{
		SpecType:    specType,
		NewStrategy: newStrategy,
		NewJudge:    func() oracle.Judge { return newPlugin().judge },
	}
}
