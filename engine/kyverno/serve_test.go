package kyverno_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"sort"
	"strings"
	"testing"

	"github.com/truce-dev/truce/engine/kyverno/helper/protocol"
)

// The built helper answers every line, bad ones with an error naming what
// is wrong, and exits when its input ends. (A test of the binary, so the
// helper module's own tests need not link Kyverno a second time.)
func TestHelperServe(t *testing.T) {
	v, other := protocol.ProtocolVersion, protocol.ProtocolVersion+1
	in := strings.Join([]string{
		fmt.Sprintf(`{"v":%d,"id":1,"op":"hello"}`, v),
		fmt.Sprintf(`{"v":%d,"id":2,"op":"review","review":{"set":"missing","path":"/mutate","review":{}}}`, v),
		fmt.Sprintf(`{"v":%d,"id":3,"op":"hello"}`, other),
		fmt.Sprintf(`{"v":%d,"id":4,"op":"deleting","generate":{"policies":[],"policy":"gone"}}`, v),
		`not json`,
	}, "\n") + "\n"
	cmd := exec.CommandContext(testContext(t), helperPath)
	cmd.Stdin = strings.NewReader(in)
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("the helper: %v", err)
	}
	type response struct {
		ID      uint64 `json:"id"`
		Error   string `json:"error"`
		Kyverno string `json:"kyverno"`
	}
	var got []response
	dec := json.NewDecoder(&out)
	for dec.More() {
		var r response
		if err := dec.Decode(&r); err != nil {
			t.Fatal(err)
		}
		got = append(got, r)
	}
	sort.Slice(got, func(i, j int) bool { return got[i].ID < got[j].ID })
	if len(got) != 5 {
		t.Fatalf("%d responses, want 5: %+v", len(got), got)
	}
	if got[0].ID != 0 || !strings.Contains(got[0].Error, "decoding a request") {
		t.Errorf("not JSON: %+v", got[0])
	}
	if got[1].Kyverno != "v1.19.1" {
		t.Errorf("hello: %+v, want Kyverno v1.19.1", got[1])
	}
	if !strings.Contains(got[2].Error, `no policy set "missing"`) {
		t.Errorf("review of a missing set: %+v", got[2])
	}
	if !strings.Contains(got[3].Error, fmt.Sprintf("protocol version %d", other)) {
		t.Errorf("other version: %+v", got[3])
	}
	if !strings.Contains(got[4].Error, "no DeletingPolicy gone") {
		t.Errorf("deleting for a policy not sent: %+v", got[4])
	}
}
