module trainguard.local/oracle/runtimepatches

go 1.26.0

// The oldest release of the line (v2.2.1) and its Kubernetes versions; each tag's module raises
// them to its own.
require (
	github.com/kubeflow/trainer/v2 v2.2.1
	k8s.io/apiextensions-apiserver v0.36.0
	k8s.io/apimachinery v0.36.0
	k8s.io/client-go v0.36.0
	sigs.k8s.io/controller-runtime v0.24.0
	sigs.k8s.io/jobset v0.11.1
	trainguard.local/oracle/common v0.0.0
)

replace trainguard.local/oracle/common => ../common
