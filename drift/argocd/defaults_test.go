package argocd

import (
	"encoding/json"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
)

// TestSchemeDefaultsShortcut checks the shortcut withSchemeDefaults takes
// for objects the scheme leaves as they are: the patch it skips computing
// is "{}", and the result is what applying the computed patch gives.
func TestSchemeDefaultsShortcut(t *testing.T) {
	deployment := schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	service := schema.GroupVersionKind{Version: "v1", Kind: "Service"}
	for _, tc := range []struct {
		name      string
		gvk       schema.GroupVersionKind
		data      string
		defaulted bool // whether the scheme adds anything
	}{
		{"bare deployment", deployment, `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"a"},"spec":{"template":{"spec":{"containers":[{"name":"c","image":"i"}]}}}}`, true},
		{"stored deployment", deployment, storedDeployment, false},
		{"unknown field and big number kept", deployment, `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"a","annotations":{"n":"1"}},"spec":` + storedDeploymentSpec + `,"extra":{"big":9007199254740993,"f":1.50}}`, false},
		{"service", service, `{"apiVersion":"v1","kind":"Service","metadata":{"name":"s"},"spec":{"ports":[{"port":80}]}}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			typed, err := newVersioned(tc.gvk)
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(tc.data), typed); err != nil {
				t.Fatal(err)
			}
			defaulted := typed.DeepCopyObject()
			defaultsScheme.Default(defaulted)
			if got := !reflect.DeepEqual(typed, defaulted); got != tc.defaulted {
				t.Fatalf("scheme defaults change the object: %v, want %v", got, tc.defaulted)
			}
			patch, err := defaultsPatch(typed, defaulted)
			if err != nil {
				t.Fatal(err)
			}
			if !tc.defaulted && string(patch) != "{}" {
				t.Fatalf("patch of an object the scheme leaves alone = %s, want {}", patch)
			}
			patched, err := strategicpatch.StrategicMergePatch([]byte(tc.data), patch, typed.DeepCopyObject())
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]any
			if err := json.Unmarshal(patched, &m); err != nil {
				t.Fatal(err)
			}
			want, _ := json.Marshal(m)
			got, err := withSchemeDefaults([]byte(tc.data), typed)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(want) {
				t.Errorf("withSchemeDefaults =\n%s\nwant\n%s", got, want)
			}
		})
	}
}

const storedDeploymentSpec = `{"replicas":1,"revisionHistoryLimit":10,"progressDeadlineSeconds":600,"selector":{"matchLabels":{"app":"a"}},` +
	`"strategy":{"type":"RollingUpdate","rollingUpdate":{"maxSurge":"25%","maxUnavailable":"25%"}},` +
	`"template":{"metadata":{"labels":{"app":"a"}},"spec":{"restartPolicy":"Always","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst",` +
	`"securityContext":{},"schedulerName":"default-scheduler","containers":[{"name":"c","image":"i","imagePullPolicy":"IfNotPresent",` +
	`"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File","resources":{}}]}}}`

const storedDeployment = `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"a"},"spec":` + storedDeploymentSpec + `}`
