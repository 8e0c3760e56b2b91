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

{{/* Name of the Secret holding requirepass and cluster-secret (required). */}}
{{- define "cellserver.authSecret" -}}
{{- if .Values.auth.existingSecret -}}
{{- .Values.auth.existingSecret -}}
{{- else if and .Values.auth.requirepass .Values.auth.clusterSecret -}}
{{- printf "%s-auth" (include "cellserver.fullname" .) -}}
{{- else -}}
{{- fail "auth: set auth.existingSecret (a Secret with the keys requirepass and cluster-secret), or both auth.requirepass and auth.clusterSecret: every node needs a client password and the cluster secret" -}}
{{- end -}}
{{- end -}}

{{/* Where the auth Secret is mounted; the server reads its keys as files. */}}
{{- define "cellserver.secretDir" -}}/run/secrets/cellserver{{- end -}}

{{/* The image of the server and of the slot Job. */}}
{{- define "cellserver.image" -}}
{{- $repo := required "image.repository: set it to where you pushed the cellserver image (docs/deploy.md, Build and push): no public image exists" .Values.image.repository -}}
{{- printf "%s:%s" $repo (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}

{{/* A group's replica count: replicas, or 3. Call with a group. */}}
{{- define "cellserver.replicas" -}}
{{- if kindIs "invalid" .replicas -}}3{{- else -}}{{- int .replicas -}}{{- end -}}
{{- end -}}

{{/* Checks what the schema cannot: unique group names, no secret among the flags. */}}
{{- define "cellserver.validate" -}}
{{- $seen := dict -}}
{{- range $g := .Values.groups -}}
{{- if hasKey $seen $g.name -}}
{{- fail (printf "groups: the name %q is given twice: each group needs its own name" $g.name) -}}
{{- end -}}
{{- $_ := set $seen $g.name true -}}
{{- end -}}
{{- range $k, $v := .Values.config -}}
{{- if has $k (list "requirepass" "cluster-secret" "region-peer-password" "masterauth") -}}
{{- fail (printf "config.%s: a secret must not be a flag (it would stand on the command line, visible in ps): use auth (requirepass, cluster-secret), or a file and config.%s-file" $k $k) -}}
{{- end -}}
{{- end -}}
{{- range .Values.extraArgs -}}
{{- $a := toString . -}}
{{- range $f := list "--requirepass" "--cluster-secret" "--region-peer-password" -}}
{{- if or (eq $a $f) (hasPrefix (printf "%s=" $f) $a) -}}
{{- fail (printf "extraArgs: %s: a secret must not be a flag (it would stand on the command line, visible in ps): use auth, or %s-file" $f $f) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* A pod's DNS name in its group: call with (list $ group "$(POD_NAME)" or an ordinal name). */}}
{{- define "cellserver.podHost" -}}
{{- $root := index . 0 -}}{{- $g := index . 1 -}}{{- $pod := index . 2 -}}
{{- printf "%s.%s.%s.svc.%s" $pod (include "cellserver.headlessName" (list $root $g)) $root.Release.Namespace $root.Values.clusterDomain -}}
{{- end -}}
