{{/* The release's base name, at most 40 characters (pod names add a group and an ordinal). */}}
{{- define "cellserver.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* Name of a group's StatefulSet: fullname-group. Call with (list $ group). */}}
{{- define "cellserver.groupName" -}}
{{- $root := index . 0 -}}{{- $g := index . 1 -}}
{{- printf "%s-%s" (include "cellserver.fullname" $root) $g.name | trunc 52 | trimSuffix "-" -}}
{{- end -}}

{{/* Name of a group's headless Service (peer DNS). */}}
{{- define "cellserver.headlessName" -}}
{{- printf "%s-peers" (include "cellserver.groupName" .) -}}
{{- end -}}

{{- define "cellserver.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "cellserver.selector" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Name of the Secret holding requirepass and cluster-secret, "" when none. */}}
{{- define "cellserver.authSecret" -}}
{{- if .Values.auth.existingSecret -}}
{{- .Values.auth.existingSecret -}}
{{- else if or .Values.auth.requirepass .Values.auth.clusterSecret -}}
{{- printf "%s-auth" (include "cellserver.fullname" .) -}}
{{- end -}}
{{- end -}}

{{/* A pod's DNS name in its group: call with (list $ group "$(POD_NAME)" or an ordinal name). */}}
{{- define "cellserver.podHost" -}}
{{- $root := index . 0 -}}{{- $g := index . 1 -}}{{- $pod := index . 2 -}}
{{- printf "%s.%s.%s.svc.%s" $pod (include "cellserver.headlessName" (list $root $g)) $root.Release.Namespace $root.Values.clusterDomain -}}
{{- end -}}
