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
