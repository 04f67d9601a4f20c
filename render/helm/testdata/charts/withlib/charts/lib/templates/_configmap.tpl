{{- define "lib.configmap" -}}
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .top.Release.Name }}-{{ .name }}
  labels:
    chart: {{ .top.Chart.Name }}
data:
{{- toYaml .data | nindent 2 }}
{{- end }}
