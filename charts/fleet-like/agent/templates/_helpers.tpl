{{/*
fleet-agent.validate stops an install that would not work, with a message saying why.
The release must be fleet-agent in the agent namespace: the hub upgrades the agent as
that release, and a second release would mean two agents. Registration values are
required on install only: upgrades (including the hub's own, through the agent
bundle) keep the identity the agent already has.
*/}}
{{- define "fleet-agent.validate" -}}
{{- /* helm lint renders offline with the placeholder release "test-release". */ -}}
{{- $linting := and (eq .Release.Name "test-release") (eq .Capabilities.KubeVersion.Version "v1.20.0") -}}
{{- if not $linting -}}
{{- if ne .Release.Name "fleet-agent" -}}
{{- fail (printf "the release must be named fleet-agent, not %q: helm -n %s install fleet-agent ..." .Release.Name .Values.agentNamespace) -}}
{{- end -}}
{{- if ne .Release.Namespace .Values.agentNamespace -}}
{{- fail (printf "install into namespace %s, not %q: helm -n %s install --create-namespace fleet-agent ..." .Values.agentNamespace .Release.Namespace .Values.agentNamespace) -}}
{{- end -}}
{{- if .Release.IsInstall -}}
{{- if not .Values.apiServerURL -}}
{{- fail "apiServerURL is missing: pass the values.yaml of a ClusterRegistrationToken (--values values.yaml) or --set apiServerURL=https://HUB:6443" -}}
{{- end -}}
{{- if not .Values.token -}}
{{- fail "token is missing: pass the values.yaml of a ClusterRegistrationToken (--values values.yaml)" -}}
{{- end -}}
{{- if not .Values.clusterNamespace -}}
{{- fail "clusterNamespace is missing: pass the values.yaml of a ClusterRegistrationToken (--values values.yaml)" -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "fleet-agent.labels" -}}
app: fleet-agent
app.kubernetes.io/name: fleet-agent
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "fleet-agent.image" -}}
{{- $repo := .Values.image.repository -}}
{{- if .Values.privateRepoURL -}}
{{- $repo = printf "%s/%s" (trimSuffix "/" .Values.privateRepoURL) $repo -}}
{{- end -}}
{{- printf "%s:%s" $repo (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
