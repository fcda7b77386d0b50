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

{{- /* Never the namespace's "default" ServiceAccount: every pod there
without one of its own runs as it, and the RBAC bound to portcullis's
lets its holder impersonate anyone. */ -}}
{{- define "portcullis.serviceAccountName" -}}
{{- $name := .Values.serviceAccount.name -}}
{{- if .Values.serviceAccount.create -}}
{{- $name = default (include "portcullis.fullname" .) $name -}}
{{- else if not $name -}}
{{- fail "serviceAccount.create is false: name the ServiceAccount portcullis runs as in serviceAccount.name (one of its own, not the namespace's default)" -}}
{{- end -}}
{{- if eq $name "default" -}}
{{- fail "serviceAccount.name \"default\": every pod in the namespace without an account of its own runs as it, and portcullis's RBAC lets its holder impersonate anyone; give portcullis an account of its own" -}}
{{- end -}}
{{- $name -}}
{{- end -}}

{{- define "portcullis.tlsSecretName" -}}
{{- default (printf "%s-tls" (include "portcullis.fullname" .)) .Values.tls.secretName -}}
{{- end -}}

{{- define "portcullis.claimName" -}}
{{- default (printf "%s-data" (include "portcullis.fullname" .)) .Values.persistence.existingClaim -}}
{{- end -}}

{{/* "true" when the store is PostgreSQL, empty on the embedded SQLite. */}}
{{- define "portcullis.postgres" -}}
{{- with .Values.store.postgres -}}
{{- if or .urlSecret.name .url -}}true{{- end -}}
{{- end -}}
{{- end -}}

{{/* The PodDisruptionBudget's spec field: explicit, or from the replicas. */}}
{{- define "portcullis.pdbBound" -}}
{{- with .Values.podDisruptionBudget -}}
{{- if not (kindIs "invalid" .minAvailable) -}}
minAvailable: {{ .minAvailable }}
{{- else if not (kindIs "invalid" .maxUnavailable) -}}
maxUnavailable: {{ .maxUnavailable }}
{{- else if gt (int $.Values.replicaCount) 1 -}}
minAvailable: {{ sub (int $.Values.replicaCount) 1 }}
{{- else -}}
maxUnavailable: 1
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Values portcullis or the cluster would refuse, or the chart would ignore. */}}
{{- define "portcullis.validate" -}}
{{- $pg := include "portcullis.postgres" . -}}
{{- if and (gt (int .Values.replicaCount) 1) (not $pg) -}}
{{- fail (printf "replicaCount %d: the embedded SQLite store is one file that one process holds, so it serves one replica; several replicas need the PostgreSQL store (set store.postgres.urlSecret, or store.postgres.url and store.postgres.passwordSecret)" (int .Values.replicaCount)) -}}
{{- end -}}
{{- with .Values.store.postgres -}}
{{- if and .urlSecret.name .url -}}
{{- fail "store.postgres: set urlSecret or url, not both" -}}
{{- end -}}
{{- if and .passwordSecret.name (not $pg) -}}
{{- fail "store.postgres.passwordSecret needs store.postgres.url or store.postgres.urlSecret" -}}
{{- end -}}
{{- if and .caSecret.name (not $pg) -}}
{{- fail "store.postgres.caSecret needs store.postgres.url or store.postgres.urlSecret" -}}
{{- end -}}
{{- /* user:password@ in the URL, or password= in its query or key-value form */ -}}
{{- if or (regexMatch "^[^:/]+://[^/@]*:[^/@]*@" .url) (regexMatch "(?i)(^|[\\s?&])password\\s*=" .url) -}}
{{- fail "store.postgres.url holds a password, which would be written into the ConfigMap: put the URL in a Secret (store.postgres.urlSecret) or the password alone (store.postgres.passwordSecret)" -}}
{{- end -}}
{{- end -}}
{{- if and $pg .Values.persistence.existingClaim -}}
{{- fail "persistence.existingClaim: the PostgreSQL store uses no claim; leave it empty" -}}
{{- end -}}
{{- if lt (int .Values.terminationGracePeriodSeconds) (add (int .Values.preStopSleepSeconds) 30) -}}
{{- fail "terminationGracePeriodSeconds must be at least preStopSleepSeconds + 30: after SIGTERM portcullis releases its Lease, drains requests and ships its audit spool" -}}
{{- end -}}
{{- with .Values.podDisruptionBudget -}}
{{- if and (not (kindIs "invalid" .minAvailable)) (not (kindIs "invalid" .maxUnavailable)) -}}
{{- fail "podDisruptionBudget: set minAvailable or maxUnavailable, not both" -}}
{{- end -}}
{{- if and .enabled (or (kindIs "int64" .minAvailable) (kindIs "float64" .minAvailable)) (ge (int .minAvailable) (int $.Values.replicaCount)) -}}
{{- fail "podDisruptionBudget.minAvailable must be below replicaCount, or no pod could be evicted and node drains would never end" -}}
{{- end -}}
{{- if and .enabled (kindIs "string" .minAvailable) (eq (trimSuffix "%" .minAvailable) "100") -}}
{{- fail "podDisruptionBudget.minAvailable 100% lets no pod be evicted: node drains would never end" -}}
{{- end -}}
{{- if and .enabled (not (kindIs "invalid" .maxUnavailable)) (eq (trimSuffix "%" (toString .maxUnavailable)) "0") -}}
{{- fail "podDisruptionBudget.maxUnavailable 0 lets no pod be evicted: node drains would never end" -}}
{{- end -}}
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
{{- if not (regexMatch "^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$" .name) -}}
{{- fail (printf "clusters %s: a cluster's name is lower-case letters, digits and '-', at most 63 (it names a volume, and portcullis refuses others)" .name) -}}
{{- end -}}
{{- if and (not .inCluster) (or (not .server) (not .caSecret) (not .tokenSecret)) -}}
{{- fail (printf "clusters %s: needs inCluster: true, or server, caSecret and tokenSecret" .name) -}}
{{- end -}}
{{- /* Who portcullis is to a remote API server: guessed wrong, its own
       requests in that server's audit would read as another's, and a
       bypass of portcullis as its own, so no alert would fire. */ -}}
{{- if and (not .inCluster) (not .serviceAccount) -}}
{{- fail (printf "clusters %s: a remote cluster needs serviceAccount, the user its token is to that API server (system:serviceaccount:<namespace>:<name>)" .name) -}}
{{- end -}}
{{- end -}}
{{- end -}}
