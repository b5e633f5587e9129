{{/*
Standard names and labels (the `helm create` / Bitnami helpers), then the Lakegate pieces:
the rendered service.yaml and sidecar.yaml, the image references, the Secret, and the sidecar
container snippet that goes into Kafka Connect worker pods.
*/}}

{{/* The chart name, or nameOverride. */}}
{{- define "lakegate.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The fully qualified app name, truncated at 63 characters (DNS names); the release name alone
when it already contains the chart name.
*/}}
{{- define "lakegate.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* chart-version, as used by the helm.sh/chart label. */}}
{{- define "lakegate.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Common labels of every object. */}}
{{- define "lakegate.labels" -}}
helm.sh/chart: {{ include "lakegate.chart" . }}
{{ include "lakegate.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: lakegate
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Selector labels (add app.kubernetes.io/component to tell the workloads apart). */}}
{{- define "lakegate.selectorLabels" -}}
app.kubernetes.io/name: {{ include "lakegate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* commonAnnotations as a metadata block body, or nothing. */}}
{{- define "lakegate.annotations" -}}
{{- with .Values.commonAnnotations }}
{{- toYaml . }}
{{- end }}
{{- end }}

{{/* The ServiceAccount the service pod runs as. */}}
{{- define "lakegate.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "lakegate.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* registry/repository:tag or @digest; the tag defaults to the chart's appVersion. Takes (list image root). */}}
{{- define "lakegate.imageRef" -}}
{{- $image := index . 0 -}}
{{- $root := index . 1 -}}
{{- $repo := $image.repository -}}
{{- if $image.registry }}{{ $repo = printf "%s/%s" $image.registry $image.repository }}{{ end -}}
{{- if $image.digest -}}
{{- printf "%s@%s" $repo $image.digest -}}
{{- else -}}
{{- printf "%s:%s" $repo (default $root.Chart.AppVersion ($image.tag | toString)) -}}
{{- end -}}
{{- end }}

{{- define "lakegate.image" -}}
{{- include "lakegate.imageRef" (list .Values.image .) -}}
{{- end }}

{{/* The Secret holding the tokens (and S3 keys): the chart's own or existingSecret. */}}
{{- define "lakegate.secretName" -}}
{{- default (include "lakegate.fullname" .) .Values.existingSecret }}
{{- end }}

{{/*
A base64 value for the chart's Secret: the given value, else the value already in the cluster
(so generated tokens survive upgrades), else a new random token. Takes (list root key given).
*/}}
{{- define "lakegate.secretValue" -}}
{{- $root := index . 0 -}}
{{- $key := index . 1 -}}
{{- $given := index . 2 -}}
{{- if $given -}}
{{- $given | b64enc -}}
{{- else -}}
{{- $existing := lookup "v1" "Secret" $root.Release.Namespace (include "lakegate.fullname" $root) -}}
{{- if and $existing $existing.data (hasKey $existing.data $key) -}}
{{- index $existing.data $key -}}
{{- else -}}
{{- randAlphaNum 40 | b64enc -}}
{{- end -}}
{{- end -}}
{{- end }}

{{/* Env vars reading a key of the Secret. Takes (list root envName keyName). */}}
{{- define "lakegate.secretEnv" -}}
{{- $root := index . 0 -}}
- name: {{ index . 1 }}
  valueFrom:
    secretKeyRef:
      name: {{ include "lakegate.secretName" $root }}
      key: {{ index . 2 }}
{{- end }}

{{/* AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY from the Secret when s3Credentials.enabled. */}}
{{- define "lakegate.awsEnv" -}}
{{- if .Values.s3Credentials.enabled -}}
{{ include "lakegate.secretEnv" (list . "AWS_ACCESS_KEY_ID" .Values.secretKeys.accessKeyId) }}
{{ include "lakegate.secretEnv" (list . "AWS_SECRET_ACCESS_KEY" .Values.secretKeys.secretAccessKey) }}
{{- end -}}
{{- end }}

{{/* Where the service mounts its scratch emptyDir; rendered as spark.local_dir. */}}
{{- define "lakegate.sparkLocalDir" -}}
/var/lib/lakegate
{{- end }}

{{/*
The service's config file (service.yaml, docs/configuration.md) from .Values.config. Tokens are
`${...}` references to env vars set from the Secret: no secret value is ever rendered here.
*/}}
{{- define "lakegate.serviceConfig" -}}
{{- $c := .Values.config -}}
{{- $server := merge (dict "host" "0.0.0.0") (deepCopy $c.server) -}}
{{- $auth := dict "enabled" $c.auth.enabled -}}
{{- if hasKey $c.auth "session_hours" -}}
{{- $_ := set $auth "session_hours" $c.auth.session_hours -}}
{{- end -}}
{{- if hasKey $c.auth "secure_cookie" -}}
{{- $_ := set $auth "secure_cookie" $c.auth.secure_cookie -}}
{{- end -}}
{{- if $c.auth.enabled -}}
{{- $_ := set $auth "tokens" (list
      (dict "token" "${LAKEGATE_SIDECAR_TOKEN}" "role" "sidecar")
      (dict "token" "${LAKEGATE_ADMIN_TOKEN}" "role" "admin")
      (dict "token" "${LAKEGATE_READ_TOKEN}" "role" "read")) -}}
{{- end -}}
{{- $storage := dict "allowed_roots" $c.storage.allowed_roots -}}
{{- if $c.storage.s3 -}}
{{- $_ := set $storage "s3" (deepCopy $c.storage.s3) -}}
{{- end -}}
{{- $spark := omit (deepCopy $c.spark) "jars_dir" -}}
{{- $_ := set $spark "local_dir" (include "lakegate.sparkLocalDir" .) -}}
{{- if .Values.sparkOnKubernetes.enabled -}}
{{- $_ := set $spark "master" (printf "k8s://%s" .Values.sparkOnKubernetes.apiServer) -}}
{{- $_ := set $spark "conf" (merge (deepCopy (default dict $c.spark.conf)) (include "lakegate.sparkKubernetesConf" . | fromYaml)) -}}
{{- end -}}
{{- if $c.spark.jars_dir -}}
{{- $_ := set $spark "jars_dir" $c.spark.jars_dir -}}
{{- end -}}
{{- $tables := list -}}
{{- range $c.tables -}}
{{- $t := deepCopy . -}}
{{- if not (hasKey $t "partition_by") -}}{{- $_ := set $t "partition_by" list -}}{{- end -}}
{{- $tables = append $tables $t -}}
{{- end -}}
{{- $cfg := dict "server" $server "auth" $auth "storage" $storage "spark" $spark "tables" $tables -}}
{{- with $c.kafka -}}
{{- $_ := set $cfg "kafka" (deepCopy .) -}}
{{- end -}}
{{- with $c.leases -}}
{{- $_ := set $cfg "leases" (deepCopy .) -}}
{{- end -}}
{{- with $c.catalogs -}}
{{- $_ := set $cfg "catalogs" (deepCopy .) -}}
{{- end -}}
{{- toYaml $cfg -}}
{{- end }}

{{/* The in-cluster URL of the commit service, the sidecar's default target. */}}
{{- define "lakegate.serviceUrl" -}}
{{- if .Values.sidecar.serviceUrl -}}
{{- .Values.sidecar.serviceUrl -}}
{{- else -}}
{{- printf "http://%s.%s.svc:%v" (include "lakegate.fullname" .) .Release.Namespace .Values.service.ports.http -}}
{{- end -}}
{{- end }}

{{/* The Connect worker id the sidecar matches tasks against, with $(VAR) env references. */}}
{{- define "lakegate.sidecarWorkerId" -}}
{{- default (printf "$(POD_IP):%v" .Values.sidecar.connectRestPort) .Values.sidecar.workerId -}}
{{- end }}

{{/* Name of the sidecar's ConfigMap (sidecar.yaml). */}}
{{- define "lakegate.sidecarConfigMapName" -}}
{{- printf "%s-sidecar" (include "lakegate.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The sidecar's config file (sidecar.yaml, DESIGN §7) from .Values.sidecar. */}}
{{- define "lakegate.sidecarConfig" -}}
{{- $s := .Values.sidecar -}}
{{- $connect := dict "url" (printf "http://127.0.0.1:%v" $s.connectRestPort) -}}
{{- if $s.config.connect.connectors_regex -}}
{{- $_ := set $connect "connectors_regex" $s.config.connect.connectors_regex -}}
{{- else -}}
{{- $_ := set $connect "connectors" $s.config.connect.connectors -}}
{{- end -}}
{{- $cfg := dict
      "worker_id" (regexReplaceAll "\\$\\(([A-Za-z_][A-Za-z0-9_]*)\\)" (include "lakegate.sidecarWorkerId" .) "$${${1}}")
      "connect" $connect
      "kafka" (deepCopy $s.config.kafka)
      "storage" (deepCopy $s.config.storage)
      "service" (dict "url" (include "lakegate.serviceUrl" .) "token" "${LAKEGATE_SIDECAR_TOKEN}")
      "poll_interval_seconds" $s.config.poll_interval_seconds
      "catch_up_poll_seconds" $s.config.catch_up_poll_seconds
      "resend_after_seconds" $s.config.resend_after_seconds
      "max_files_per_manifest" $s.config.max_files_per_manifest
      "log_format" $s.config.log_format
      "preflight" $s.config.preflight
      "http" (dict "host" "0.0.0.0" "port" $s.httpPort) -}}
{{- toYaml $cfg -}}
{{- end }}

{{/*
The sidecar container, for the `containers:` list of a Kafka Connect worker pod (the example
Deployment here, or your own: see templates/sidecar-snippet.yaml and docs/deploy.md). It needs
the volumes of "lakegate.sidecarVolumes" in the same pod.
*/}}
{{- define "lakegate.sidecarContainer" -}}
{{- $s := .Values.sidecar -}}
- name: lakegate-sidecar
  image: {{ include "lakegate.imageRef" (list $s.image .) | quote }}
  imagePullPolicy: {{ $s.image.pullPolicy }}
  command:
    - lakegate-sidecar
  args:
    - --config
    - /etc/lakegate/sidecar.yaml
  env:
    - name: POD_IP
      valueFrom:
        fieldRef:
          fieldPath: status.podIP
    - name: POD_NAME
      valueFrom:
        fieldRef:
          fieldPath: metadata.name
    - name: LAKEGATE_SIDECAR_WORKER_ID
      value: {{ include "lakegate.sidecarWorkerId" . | quote }}
    {{- include "lakegate.secretEnv" (list . "LAKEGATE_SIDECAR_TOKEN" .Values.secretKeys.sidecarToken) | nindent 4 }}
    {{- with (include "lakegate.awsEnv" .) }}
    {{- . | nindent 4 }}
    {{- end }}
    {{- with $s.extraEnv }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  ports:
    - name: sidecar-http
      containerPort: {{ $s.httpPort }}
      protocol: TCP
  {{- if $s.livenessProbe.enabled }}
  livenessProbe:
    httpGet:
      path: /healthz
      port: sidecar-http
    {{- toYaml (omit $s.livenessProbe "enabled") | nindent 4 }}
  {{- end }}
  {{- if $s.readinessProbe.enabled }}
  readinessProbe:
    httpGet:
      path: /healthz
      port: sidecar-http
    {{- toYaml (omit $s.readinessProbe "enabled") | nindent 4 }}
  {{- end }}
  {{- with $s.resources }}
  resources:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $s.containerSecurityContext }}
  securityContext:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  volumeMounts:
    - name: lakegate-sidecar-config
      mountPath: /etc/lakegate
      readOnly: true
    - name: lakegate-sidecar-tmp
      mountPath: /tmp
{{- end }}

{{/* The volumes the sidecar container mounts, for the `volumes:` list of the same pod. */}}
{{- define "lakegate.sidecarVolumes" -}}
- name: lakegate-sidecar-config
  configMap:
    name: {{ include "lakegate.sidecarConfigMapName" . }}
- name: lakegate-sidecar-tmp
  emptyDir:
    sizeLimit: 256Mi
{{- end }}

{{/* Pod annotation that restarts Connect workers when sidecar.yaml changes. */}}
{{- define "lakegate.sidecarChecksum" -}}
checksum/lakegate-sidecar-config: {{ include (print .Template.BasePath "/sidecar-configmap.yaml") . | sha256sum }}
{{- end }}

{{/* The headless Service executors reach the driver through (its pod's stable name). */}}
{{- define "lakegate.sparkDriverServiceName" -}}
{{- printf "%s-spark-driver" (include "lakegate.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Where the executor pod template is mounted in the service pod. */}}
{{- define "lakegate.sparkTemplateDir" -}}
/etc/lakegate-spark
{{- end }}

{{/*
The Spark properties of client mode on Kubernetes (sparkOnKubernetes), under config.spark.conf:
the user's own keys there win. ${POD_NAME} is the service pod's name (downward API): executors
are owned by it, so they go when it goes.
*/}}
{{- define "lakegate.sparkKubernetesConf" -}}
{{- $k := .Values.sparkOnKubernetes -}}
{{- $conf := dict
      "spark.kubernetes.namespace" .Release.Namespace
      "spark.kubernetes.container.image" (printf "%s:%s" $k.image.repository $k.image.tag)
      "spark.kubernetes.container.image.pullPolicy" $k.image.pullPolicy
      "spark.kubernetes.driver.pod.name" "${POD_NAME}"
      "spark.kubernetes.executor.podNamePrefix" (include "lakegate.fullname" .)
      "spark.kubernetes.executor.podTemplateFile" (printf "%s/executor-pod-template.yaml" (include "lakegate.sparkTemplateDir" .))
      "spark.kubernetes.authenticate.executor.serviceAccountName" (default (include "lakegate.serviceAccountName" .) $k.executor.serviceAccountName)
      "spark.driver.host" (printf "%s.%s.svc" (include "lakegate.sparkDriverServiceName" .) .Release.Namespace)
      "spark.driver.bindAddress" "0.0.0.0"
      "spark.driver.port" ($k.driverPort | toString)
      "spark.blockManager.port" ($k.blockManagerPort | toString)
      "spark.executor.cores" ($k.executor.cores | toString)
      "spark.executor.memory" $k.executor.memory
      "spark.executor.memoryOverhead" $k.executor.memoryOverhead
      "spark.dynamicAllocation.enabled" ($k.dynamicAllocation.enabled | toString)
-}}
{{- if $k.dynamicAllocation.enabled -}}
{{- $_ := set $conf "spark.dynamicAllocation.shuffleTracking.enabled" "true" -}}
{{- $_ := set $conf "spark.dynamicAllocation.minExecutors" ($k.dynamicAllocation.minExecutors | toString) -}}
{{- $_ := set $conf "spark.dynamicAllocation.maxExecutors" ($k.dynamicAllocation.maxExecutors | toString) -}}
{{- $_ := set $conf "spark.dynamicAllocation.executorIdleTimeout" $k.dynamicAllocation.executorIdleTimeout -}}
{{- else -}}
{{- $_ := set $conf "spark.executor.instances" ($k.instances | toString) -}}
{{- end -}}
{{- toYaml $conf -}}
{{- end }}
