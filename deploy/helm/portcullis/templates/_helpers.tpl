{{/* The release's base name: the release's own when it holds the chart's. */}}
{{- define "portcullis.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "portcullis.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
Labels. Never app.kubernetes.io/managed-by=portcullis: the reconciler
deletes RBAC objects with that label that no role or grant explains.
*/}}
{{- define "portcullis.selectorLabels" -}}
app.kubernetes.io/name: {{ include "portcullis.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "portcullis.labels" -}}
{{ include "portcullis.selectorLabels" . }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "portcullis.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "portcullis.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "portcullis.tlsSecretName" -}}
{{- default (printf "%s-tls" (include "portcullis.fullname" .)) .Values.tls.secretName -}}
{{- end -}}

{{- define "portcullis.claimName" -}}
{{- default (printf "%s-data" (include "portcullis.fullname" .)) .Values.persistence.existingClaim -}}
{{- end -}}

{{/* What this release of portcullis cannot do yet, refused rather than ignored. */}}
{{- define "portcullis.validate" -}}
{{- if gt (int .Values.replicaCount) 1 -}}
{{- fail "replicaCount: the embedded SQLite store serves one replica; several need the PostgreSQL store, which this release of portcullis does not have yet" -}}
{{- end -}}
{{- if .Values.store.postgres.urlSecret.name -}}
{{- fail "store.postgres.urlSecret: this release of portcullis has no PostgreSQL store yet and reads no store URL; leave it empty" -}}
{{- end -}}
{{- if and .Values.oidc.enabled (not .Values.approvals.keySecret.name) -}}
{{- fail "oidc.enabled needs approvals.keySecret.name: portcullis signs the sign-in state with that key" -}}
{{- end -}}
{{- if and .Values.oidc.enabled (or (not .Values.oidc.issuer) (not .Values.oidc.clientId) (not .Values.oidc.clientSecret.name)) -}}
{{- fail "oidc.enabled needs oidc.issuer, oidc.clientId and oidc.clientSecret.name" -}}
{{- end -}}
{{- if and .Values.tls.certManager.enabled (not .Values.tls.certManager.issuerRef.name) -}}
{{- fail "tls.certManager.enabled needs tls.certManager.issuerRef.name" -}}
{{- end -}}
{{- range .Values.clusters -}}
{{- if not .name -}}
{{- fail "clusters: every cluster needs a name" -}}
{{- end -}}
{{- if and (not .inCluster) (or (not .server) (not .caSecret) (not .tokenSecret)) -}}
{{- fail (printf "clusters %s: needs inCluster: true, or server, caSecret and tokenSecret" .name) -}}
{{- end -}}
{{- end -}}
{{- end -}}
