module trainguard.local/oracle/common

go 1.26.0

// The lowest versions any Trainer tag's oracle builds with (v2.0.1's); each tag's module raises
// them to its own.
require (
	k8s.io/apiextensions-apiserver v0.32.2
	k8s.io/apimachinery v0.32.2
	k8s.io/apiserver v0.32.2
	sigs.k8s.io/yaml v1.4.0
)
