package fix

import (
	"errors"
	"strings"
	"testing"

	"github.com/truce-dev/truce/manifest"
)

var errNotExist = errors.New("no such file")

func objectsOf(t testing.TB, name, data string) []manifest.Object {
	t.Helper()
	objs, err := manifest.Decode(name, strings.NewReader(data), manifest.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	return objs
}
