package manifest

import (
	"errors"
	"fmt"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"strings"
	"testing"
)

// describe summarises objects as "file:line apiVersion/kind name" so tests
// can compare them as plain strings.
func describe(objs []Object) []string {
	out := make([]string, 0, len(objs))
	for _, o := range objs {
		name := o.Object.GetName()
		if name == "" {
			name = o.Object.GetGenerateName() + "*"
		}
		out = append(out, fmt.Sprintf("%s %s/%s %s", o.Source, o.Object.GetAPIVersion(), o.Object.GetKind(), name))
	}
	return out
}

// flatten returns the individual errors of an errors.Join tree.
func flatten(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, flatten(e)...)
		}
		return out
	}
	return []error{err}
}

func errorStrings(err error) []string {
	var out []string
	for _, e := range flatten(err) {
		out = append(out, e.Error())
	}
	return out
}

// checkErrors asserts that err consists of exactly one error per entry of
// want, each containing that entry, and that every error is an *Error
// matching kind (when kind is not nil).
func checkErrors(t *testing.T, err error, kind error, want ...string) {
	t.Helper()
	got := flatten(err)
	if len(got) != len(want) {
		t.Fatalf("got %d errors, want %d:\n%s", len(got), len(want), strings.Join(errorStrings(err), "\n"))
	}
	for i, e := range got {
		if !strings.Contains(e.Error(), want[i]) {
			t.Errorf("error %d = %q, want it to contain %q", i, e.Error(), want[i])
		}
		var me *Error
		if !errors.As(e, &me) {
			t.Errorf("error %d (%v) is a %T, not an *Error", i, e, e)
		}
		if kind != nil && !errors.Is(e, kind) {
			t.Errorf("error %d (%v) does not match %v", i, e, kind)
		}
	}
}

func decodeString(in string, opts Options) ([]Object, error) {
	return Decode("f.yaml", strings.NewReader(in), opts)
}

func unmarshalJSON(data []byte, v any) error {
	return utiljson.Unmarshal(data, v)
}
