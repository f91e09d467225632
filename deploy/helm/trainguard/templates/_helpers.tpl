{{/*
Object names: the release name when it already says "trainguard" (`helm install trainguard …`
gives exactly the names of deploy/base), else "<release>-trainguard", so that a second release
does not collide. `fullnameOverride` replaces it. At most 52 characters: suffixes such as
"-leader-election" must keep names within 63.
*/}}
{{- define "trainguard.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 52 | trimSuffix "-" -}}
{{- else if contains "trainguard" .Release.Name -}}
{{- .Release.Name | trunc 52 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-trainguard" .Release.Name | trunc 52 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/*
optOut.groups as the webhook's --opt-out-groups value (comma-separated). Fails on values that
would let the webhook and the opt-out policy disagree, or on a value renamed since 0.1.0.
*/}}
{{- define "trainguard.optOutGroups" -}}
{{- if not .Values.optOut.groups -}}
{{- fail "optOut.groups is empty: name at least one group whose members may set the opt-out label (e.g. system:masters)" -}}
{{- end -}}
{{- range .Values.extraArgs -}}
{{- if hasPrefix "--opt-out-groups" (toString .) -}}
{{- fail "extraArgs sets --opt-out-groups: use optOut.groups, which feeds both the webhook and the opt-out ValidatingAdmissionPolicy" -}}
{{- end -}}
{{- if hasPrefix "--controller-mode" (toString .) -}}
{{- fail "extraArgs sets --controller-mode: use controller.mode" -}}
{{- end -}}
{{- if or (hasPrefix "--controller=" (toString .)) (eq "--controller" (toString .)) (hasPrefix "--webhook" (toString .)) -}}
{{- fail "extraArgs sets --controller or --webhook: the chart runs the webhook and the controller as two Deployments; controller.enabled=false leaves the controller out" -}}
{{- end -}}
{{- end -}}
{{- if hasKey .Values "controllerMode" -}}
{{- fail "controllerMode was renamed to controller.mode (default report); controller.enabled=false installs the webhook only" -}}
{{- end -}}
{{- join "," .Values.optOut.groups -}}
{{- end -}}

{{/* optOut.groups as a CEL list literal, e.g. ['system:masters']. */}}
{{- define "trainguard.optOutGroupsCel" -}}
[{{- range $i, $g := .Values.optOut.groups -}}{{- if $i -}}, {{ end -}}'{{ $g | replace "\\" "\\\\" | replace "'" "\\'" }}'{{- end -}}]
{{- end -}}

{{/*
The image both Deployments run. Refuses a repository without a registry: the default
`trainguard` is published nowhere, so the pods would never start behind failurePolicy: Fail
webhooks (as `make deploy` refuses it).
*/}}
{{- define "trainguard.image" -}}
{{- if not (contains "/" .Values.image.repository) -}}
{{- fail (printf "image.repository %q names no registry: the default image is published nowhere, so the pods would never start (ImagePullBackOff) behind failurePolicy: Fail webhooks; set image.repository to the image you pushed, e.g. ghcr.io/OWNER/trainguard" .Values.image.repository) -}}
{{- end -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}

{{/*
Whether the cluster serves ValidatingAdmissionPolicy v1 (Kubernetes >= 1.30): the opt-out policy
is rendered only then. `helm install` and `helm upgrade` read the cluster's API versions; `helm
template` knows none of its own, so pass `--api-versions
admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy` for a cluster that serves it.
*/}}
{{- define "trainguard.servesAdmissionPolicy" -}}
{{- if .Capabilities.APIVersions.Has "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy" -}}
true
{{- end -}}
{{- end -}}

{{/*
Whether the cluster serves MutatingAdmissionPolicy v1 (Kubernetes >= 1.36, on by default): the
defaults policy (mutatingPolicy.enabled) needs it. For `helm template`, pass `--api-versions
admissionregistration.k8s.io/v1/MutatingAdmissionPolicy` for a cluster that serves it.
*/}}
{{- define "trainguard.servesMutatingAdmissionPolicy" -}}
{{- if .Capabilities.APIVersions.Has "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy" -}}
true
{{- end -}}
{{- end -}}

{{/*
Binds the ClusterRole `role` to the controller's ServiceAccount: cluster-wide (a
ClusterRoleBinding) without controller.namespaces, else one RoleBinding in each listed namespace,
which grants the ClusterRole's namespaced rules there and nothing cluster-scoped.
Call with (dict "root" $ "role" NAME).
*/}}
{{- define "trainguard.controllerBinding" -}}
{{- $root := .root -}}
{{- $namespaces := $root.Values.controller.namespaces | default list -}}
{{- $scopes := $namespaces | default (list "") -}}
{{- range $i, $ns := $scopes }}
{{- if $i }}
---
{{- end }}
apiVersion: rbac.authorization.k8s.io/v1
kind: {{ if $ns }}RoleBinding{{ else }}ClusterRoleBinding{{ end }}
metadata:
  name: {{ $.role }}
  {{- if $ns }}
  namespace: {{ $ns }}
  {{- end }}
  labels:
    app.kubernetes.io/name: trainguard
    app.kubernetes.io/instance: {{ $root.Release.Name }}
    app.kubernetes.io/part-of: trainguard
    app.kubernetes.io/component: controller
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: {{ $.role }}
subjects:
  - kind: ServiceAccount
    name: {{ include "trainguard.fullname" $root }}-controller
    namespace: {{ $root.Release.Namespace }}
{{- end }}
{{- end -}}

{{/*
How the API server comes to trust the webhook's serving certificate, for a webhook configuration's
metadata ("annotations") or its webhooks' clientConfig ("caBundle"): cert-manager's cainjector
fills caBundle from the serving Certificate, or certificates.caBundle sets it.
*/}}
{{- define "trainguard.certificates.source" -}}
{{- $source := .Values.certificates.source -}}
{{- if not (has $source (list "cert-manager" "secret")) -}}
{{- fail (printf "certificates.source %q: use cert-manager (the default) or secret" $source) -}}
{{- end -}}
{{- if and (eq $source "secret") (not (contains "-----BEGIN CERTIFICATE-----" .Values.certificates.caBundle)) -}}
{{- fail "certificates.source=secret needs certificates.caBundle, the PEM CA that signed the serving certificate in the Secret: --set-file certificates.caBundle=certs/ca.crt (trainguard certs writes it)" -}}
{{- end -}}
{{- $source -}}
{{- end -}}

{{- define "trainguard.webhookAnnotations" -}}
{{- if eq (include "trainguard.certificates.source" .) "cert-manager" -}}
annotations:
  cert-manager.io/inject-ca-from: {{ .Release.Namespace }}/{{ include "trainguard.fullname" . }}-serving
{{- end -}}
{{- end -}}

{{- define "trainguard.caBundle" -}}
{{- if eq (include "trainguard.certificates.source" .) "secret" -}}
caBundle: {{ .Values.certificates.caBundle | b64enc }}
{{- end -}}
{{- end -}}
