{{/*
The templates keep to a small subset of Helm's template language, so that the chart tests
(crates/cli/tests/chart/main.rs) can render every file faithfully without Helm:
  values:     .Values.<path>, .Release.Name, .Release.Namespace, .Release.Service,
              .Chart.Name, .Chart.Version, .Chart.AppVersion, "string", and . (for include)
  functions:  include "name" ., default X, required "message", quote, toYaml, nindent N,
              eq A B, ne A B, not X
  actions:    if / else if / else / end, range over a list (. is the item, $ the root,
              no else), define / end, comments, and the {{- -}} trim markers
No with, parentheses or variables. The RBAC rules are plain YAML.
*/}}

{{- define "nodewright.fullname" -}}
{{ .Values.fullnameOverride | default .Release.Name }}
{{- end -}}

{{- define "nodewright.serviceAccountName" -}}
{{- if .Values.serviceAccount.name -}}
{{ .Values.serviceAccount.name }}
{{- else -}}
{{ include "nodewright.fullname" . }}
{{- end -}}
{{- end -}}

{{/*
Karpenter's chart names its pods after the chart, "karpenter", unless nameOverride is set:
the same selector, so `kubectl logs -l app.kubernetes.io/name=karpenter` and an existing
Karpenter release's Deployment selector (immutable on `helm upgrade`) both still match.
*/}}
{{- define "nodewright.name" -}}
{{ .Values.nameOverride | default "karpenter" }}
{{- end -}}

{{- define "nodewright.selectorLabels" -}}
app.kubernetes.io/name: {{ include "nodewright.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "nodewright.labels" -}}
{{ include "nodewright.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version }}
{{- if .Values.additionalLabels }}
{{ toYaml .Values.additionalLabels }}
{{- end }}
{{- end -}}

{{/* additionalAnnotations, as a metadata key of its own (nothing when empty). */}}
{{- define "nodewright.annotations" -}}
{{- if .Values.additionalAnnotations -}}
annotations:
  {{- toYaml .Values.additionalAnnotations | nindent 2 }}
{{- end -}}
{{- end -}}
