{{- define "tplloop.again" -}}{{ include "tplloop.again" . }}{{- end -}}
